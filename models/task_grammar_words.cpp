// The grammar task's words: nouns, adjectives, verbs, prepositions and fixed expressions in English
// and French, and the determiners' forms.
#include <array>
#include <vector>

#include "tapestry/models/task_grammar.h"

namespace tapestry::models::detail {

const std::vector<Noun>& nouns() {
  using enum Gender;
  static const std::vector<Noun> v = {
      {"cat", "cats", "chat", "chats", masc},
      {"dog", "dogs", "chien", "chiens", masc},
      {"book", "books", "livre", "livres", masc},
      {"garden", "gardens", "jardin", "jardins", masc},
      {"bird", "birds", "oiseau", "oiseaux", masc},
      {"horse", "horses", "cheval", "chevaux", masc},
      {"teacher", "teachers", "professeur", "professeurs", masc},
      {"boy", "boys", "garcon", "garcons", masc},
      {"train", "trains", "train", "trains", masc},
      {"doctor", "doctors", "medecin", "medecins", masc},
      {"king", "kings", "roi", "rois", masc},
      {"painter", "painters", "peintre", "peintres", masc},
      {"neighbour", "neighbours", "voisin", "voisins", masc},
      {"hat", "hats", "chapeau", "chapeaux", masc},
      {"boat", "boats", "bateau", "bateaux", masc},
      {"castle", "castles", "chateau", "chateaux", masc},
      {"house", "houses", "maison", "maisons", fem},
      {"woman", "women", "femme", "femmes", fem},
      {"girl", "girls", "fille", "filles", fem},
      {"car", "cars", "voiture", "voitures", fem},
      {"table", "tables", "table", "tables", fem},
      {"door", "doors", "porte", "portes", fem},
      {"city", "cities", "ville", "villes", fem},
      {"apple", "apples", "pomme", "pommes", fem},
      {"flower", "flowers", "fleur", "fleurs", fem},
      {"chair", "chairs", "chaise", "chaises", fem},
      {"window", "windows", "fenetre", "fenetres", fem},
      {"letter", "letters", "lettre", "lettres", fem},
      {"queen", "queens", "reine", "reines", fem},
      {"bottle", "bottles", "bouteille", "bouteilles", fem},
      {"street", "streets", "rue", "rues", fem},
      {"river", "rivers", "riviere", "rivieres", fem},
      {"cow", "cows", "vache", "vaches", fem},
      {"mouse", "mice", "souris", "souris", fem},
  };
  return v;
}

const std::vector<Adjective>& adjectives() {
  static const std::vector<Adjective> v = {
      {"good", 0, true, {"bon", "bonne", "bons", "bonnes"}},
      {"beautiful", 0, true, {"beau", "belle", "beaux", "belles"}},
      {"big", 1, true, {"grand", "grande", "grands", "grandes"}},
      {"small", 1, true, {"petit", "petite", "petits", "petites"}},
      {"old", 2, true, {"vieux", "vieille", "vieux", "vieilles"}},
      {"happy", 0, false, {"heureux", "heureuse", "heureux", "heureuses"}},
      {"sad", 0, false, {"triste", "triste", "tristes", "tristes"}},
      {"rich", 0, false, {"riche", "riche", "riches", "riches"}},
      {"strong", 0, false, {"fort", "forte", "forts", "fortes"}},
      {"red", 3, false, {"rouge", "rouge", "rouges", "rouges"}},
      {"black", 3, false, {"noir", "noire", "noirs", "noires"}},
      {"white", 3, false, {"blanc", "blanche", "blancs", "blanches"}},
      {"green", 3, false, {"vert", "verte", "verts", "vertes"}},
      {"blue", 3, false, {"bleu", "bleue", "bleus", "bleues"}},
      {"french", 4, false, {"francais", "francaise", "francais", "francaises"}},
      {"european", 4, false, {"europeen", "europeenne", "europeens", "europeennes"}},
      {"economic", 5, false, {"economique", "economique", "economiques", "economiques"}},
  };
  return v;
}

const std::vector<Verb>& verbs() {
  static const std::vector<Verb> v = {
      {"sees", "see", "voit", "voient"},
      {"finds", "find", "trouve", "trouvent"},
      {"takes", "take", "prend", "prennent"},
      {"wants", "want", "veut", "veulent"},
      {"eats", "eat", "mange", "mangent"},
      {"watches", "watch", "regarde", "regardent"},
      {"paints", "paint", "peint", "peignent"},
      {"visits", "visit", "visite", "visitent"},
      {"follows", "follow", "suit", "suivent"},
      {"knows", "know", "connait", "connaissent"},
      {"sells", "sell", "vend", "vendent"},
      {"carries", "carry", "porte", "portent"},
      {"draws", "draw", "dessine", "dessinent"},
      {"chooses", "choose", "choisit", "choisissent"},
      {"cleans", "clean", "nettoie", "nettoient"},
      {"builds", "build", "construit", "construisent"},
      {"meets", "meet", "rencontre", "rencontrent"},
  };
  return v;
}

const std::vector<Prep>& preps() {
  static const std::vector<Prep> v = {
      {"in", "dans"},         {"on", "sur"},      {"under", "sous"},
      {"behind", "derriere"}, {"with", "avec"},   {"without", "sans"},
      {"for", "pour"},        {"toward", "vers"}, {"against", "contre"},
  };
  return v;
}

const std::vector<Phrase>& phrases() {
  using enum Gender;
  const std::vector<Det> any_sg = {Det::the, Det::a, Det::my, Det::this_};
  static const std::vector<Phrase> v = {
      {{"european", "economic", "area"},
       {"zone", "economique", "europeenne"},
       {2, 1, 0},
       fem,
       false,
       false,
       {Det::the}},
      {{"united", "states"}, {"etats", "unis"}, {1, 0}, masc, false, true, {Det::the}},
      {{"united", "nations"}, {"nations", "unies"}, {1, 0}, fem, false, true, {Det::the}},
      {{"prime", "minister"}, {"premier", "ministre"}, {0, 1}, masc, false, false, any_sg},
      {{"post", "office"}, {"bureau", "de", "poste"}, {1, -1, 0}, masc, false, false, any_sg},
      {{"town", "hall"}, {"mairie"}, {1}, fem, false, false, any_sg},
      {{"swimming", "pool"}, {"piscine"}, {1}, fem, false, false, any_sg},
      {{"apple", "tree"}, {"pommier"}, {1}, masc, false, false, any_sg},
  };
  return v;
}

const char* det_english(Det det) {
  constexpr std::array<const char*, 7> kEnglish = {"the", "a", "some", "my", "this", "these", ""};
  return kEnglish[static_cast<int>(det)];
}

const char* det_french(Det det, Gender gender, bool plural) {
  const bool fem = gender == Gender::fem;
  switch (det) {
    case Det::the:
      return plural ? "les" : fem ? "la" : "le";
    case Det::a:
      return fem ? "une" : "un";
    case Det::my:
      return plural ? "mes" : fem ? "ma" : "mon";
    case Det::this_:
      return fem ? "cette" : "ce";
    case Det::these:
      return "ces";
    case Det::some:
    case Det::bare:
      return "des";
  }
  return "";
}

bool det_fits(Det det, bool plural) {
  switch (det) {
    case Det::the:
    case Det::my:
      return true;
    case Det::a:
    case Det::this_:
      return !plural;
    case Det::some:
    case Det::these:
    case Det::bare:
      return plural;
  }
  return false;
}

}  // namespace tapestry::models::detail
