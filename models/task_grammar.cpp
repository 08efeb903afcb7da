// The grammar task: sentences of a small English -> French-like grammar, drawn at random, realized
// with their true alignment, counted, and parsed back from English (translate_grammar).
#include "tapestry/models/task_grammar.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tapestry/core/errors.h"
#include "tapestry/core/random.h"
#include "tapestry/models/task_sampling.h"
#include "tapestry/models/tasks.h"

namespace tapestry::models {
using namespace detail;
namespace {

// ================================================================================================
// grammar: a small English -> French-like language, word level, ASCII (no accents, no elision).
//
//   rule                                                example: English => French
//   S -> NP verb NP [prep NP]                           the cat sees a dog
//                                                       => le chat voit un chien
//   negation by do-support becomes ne .. pas            the cat does not see a dog
//                                                       => le chat ne voit pas un chien
//   determiners agree with the noun's French gender     the, a/an, my, this, these, some
//     and number                                        => le/la/les, un/une, mon/ma/mes,
//                                                          ce/cette, ces, des
//   a bare English plural takes des (aligned -1)        cats see dogs
//                                                       => des chats voient des chiens
//   good, beautiful, big, small, old precede the noun   the big house => la grande maison
//   other adjectives follow it, in mirror order         the happy french girl
//                                                       => la fille francaise heureuse
//   adjectives agree in gender and number               the small white cats
//                                                       => les petits chats blancs
//   the verb agrees with the subject's French number    the united states sells the cars
//                                                       => les etats unis vendent les voitures
//   fixed expressions, which take no adjectives         the european economic area
//                                                       => la zone economique europeenne
//
// English puts at most two adjectives in a noun phrase, of different classes, in the order
// opinion, size, age, colour, origin, purpose ("the beautiful red cars"), and writes "an" before a
// vowel. Alignment: every French word aligns to the English word it translates: an article to the
// English determiner, "ne" and "pas" both to "not" ("does" stays unaligned), each word of a fixed
// expression to its counterpart; only the "des" of a bare plural has none (-1).
//
// The words and their forms are in task_grammar_words.cpp.

// English writes "an" before a vowel sound; "eu" (european) and "u" (united) sound like "you".
bool takes_an(std::string_view word) {
  return !word.empty() && std::string_view("aeio").find(word[0]) != std::string_view::npos &&
         !word.starts_with("eu");
}

struct NounPhrase {
  Det det = Det::the;
  int noun = 0;  // index into nouns(), or into phrases() when phrase
  bool phrase = false;
  bool plural = false;    // English number of a noun (a phrase's numbers are in its entry)
  std::vector<int> adjs;  // English order
};
struct Sentence {
  NounPhrase subject;
  int verb = 0;
  bool negated = false;
  NounPhrase object;
  int prep = -1;  // -1: no prepositional phrase
  NounPhrase prep_object;
};

bool english_plural(const NounPhrase& np) {
  return np.phrase ? phrases()[np.noun].en_plural : np.plural;
}
bool french_plural(const NounPhrase& np) {
  return np.phrase ? phrases()[np.noun].fr_plural : np.plural;
}

// Appends a noun phrase to both sides of `ex`; French words align to absolute English positions.
void realize_np(const NounPhrase& np, Example& ex) {
  std::vector<std::string> words;  // English after the determiner
  if (np.phrase) {
    for (const char* w : phrases()[np.noun].en) words.emplace_back(w);
  } else {
    for (int a : np.adjs) words.emplace_back(adjectives()[a].en);
    const Noun& n = nouns()[np.noun];
    words.emplace_back(np.plural ? n.en_pl : n.en_sg);
  }
  int32_t det_pos = -1;
  if (np.det != Det::bare) {
    det_pos = static_cast<int32_t>(ex.src.size());
    ex.src.emplace_back(np.det == Det::a && takes_an(words[0]) ? "an" : det_english(np.det));
  }
  const auto start = static_cast<int32_t>(ex.src.size());
  ex.src.insert(ex.src.end(), words.begin(), words.end());
  auto emit = [&](std::string word, int32_t from) {
    ex.tgt.push_back(std::move(word));
    ex.align.push_back(from);
  };

  const Gender gender = np.phrase ? phrases()[np.noun].gender : nouns()[np.noun].gender;
  emit(det_french(np.det, gender, french_plural(np)), det_pos);
  if (np.phrase) {
    const Phrase& p = phrases()[np.noun];
    for (size_t i = 0; i < p.fr.size(); ++i)
      emit(p.fr[i], p.fr_from[i] < 0 ? -1 : start + p.fr_from[i]);
    return;
  }
  const int form = (gender == Gender::fem ? 1 : 0) + (np.plural ? 2 : 0);
  const auto n_adj = static_cast<int32_t>(np.adjs.size());
  for (int32_t i = 0; i < n_adj; ++i) {
    const Adjective& a = adjectives()[np.adjs[i]];
    if (a.before_noun) emit(a.fr[form], start + i);
  }
  const Noun& n = nouns()[np.noun];
  emit(np.plural ? n.fr_pl : n.fr_sg, start + n_adj);
  for (int32_t i = n_adj - 1; i >= 0; --i) {
    const Adjective& a = adjectives()[np.adjs[i]];
    if (!a.before_noun) emit(a.fr[form], start + i);
  }
}

Example realize_sentence(const Sentence& s) {
  Example ex;
  realize_np(s.subject, ex);
  const Verb& v = verbs()[s.verb];
  const bool en_pl = english_plural(s.subject);
  const char* fr_verb = french_plural(s.subject) ? v.fr_3pl : v.fr_3sg;
  const auto here = static_cast<int32_t>(ex.src.size());
  if (s.negated) {
    ex.src.insert(ex.src.end(), {en_pl ? "do" : "does", "not", v.en_base});
    ex.tgt.insert(ex.tgt.end(), {"ne", fr_verb, "pas"});
    ex.align.insert(ex.align.end(), {here + 1, here + 2, here + 1});
  } else {
    ex.src.emplace_back(en_pl ? v.en_base : v.en_3sg);
    ex.tgt.emplace_back(fr_verb);
    ex.align.push_back(here);
  }
  realize_np(s.object, ex);
  if (s.prep >= 0) {
    ex.align.push_back(static_cast<int32_t>(ex.src.size()));
    ex.src.emplace_back(preps()[s.prep].en);
    ex.tgt.emplace_back(preps()[s.prep].fr);
    realize_np(s.prep_object, ex);
  }
  return ex;
}

// ---- sampling ----------------------------------------------------------------------------------

constexpr int64_t kGrammarMinWords = 4, kGrammarMaxWords = 16;

NounPhrase draw_np(Rng& rng) {
  NounPhrase np;
  if (rng.uniform() < 0.07) {
    np.phrase = true;
    np.noun = static_cast<int>(rng.randint(static_cast<int64_t>(phrases().size())));
    const auto& dets = phrases()[np.noun].dets;
    np.det = dets[rng.randint(static_cast<int64_t>(dets.size()))];
    return np;
  }
  np.noun = static_cast<int>(rng.randint(static_cast<int64_t>(nouns().size())));
  np.plural = rng.uniform() < 0.4;
  constexpr std::array<Det, 4> kSingular = {Det::the, Det::a, Det::my, Det::this_};
  constexpr std::array<Det, 5> kPlural = {Det::the, Det::some, Det::my, Det::these, Det::bare};
  np.det = np.plural ? kPlural[rng.randint(5)] : kSingular[rng.randint(4)];
  const double u = rng.uniform();
  const int n_adj = u < 0.45 ? 0 : u < 0.8 ? 1 : 2;
  const auto n_all = static_cast<int64_t>(adjectives().size());
  while (static_cast<int>(np.adjs.size()) < n_adj) {
    const int a = static_cast<int>(rng.randint(n_all));
    const bool same_class = std::any_of(np.adjs.begin(), np.adjs.end(), [&](int b) {
      return adjectives()[b].rank == adjectives()[a].rank;
    });
    if (!same_class) np.adjs.push_back(a);
  }
  std::sort(np.adjs.begin(), np.adjs.end(),
            [](int a, int b) { return adjectives()[a].rank < adjectives()[b].rank; });
  return np;
}

Example draw_grammar(Rng& rng) {
  for (;;) {  // a sentence outside the length range is redrawn; most are inside
    Sentence s;
    s.subject = draw_np(rng);
    s.verb = static_cast<int>(rng.randint(static_cast<int64_t>(verbs().size())));
    s.negated = rng.uniform() < 0.25;
    s.object = draw_np(rng);
    if (rng.uniform() < 0.4) {
      s.prep = static_cast<int>(rng.randint(static_cast<int64_t>(preps().size())));
      s.prep_object = draw_np(rng);
    }
    Example ex = realize_sentence(s);
    const auto n = static_cast<int64_t>(ex.src.size());
    if (n >= kGrammarMinWords && n <= kGrammarMaxWords) return ex;
  }
}

}  // namespace

namespace detail {

// Distinct English sentences of kGrammarMinWords..kGrammarMaxWords words: noun phrases counted by
// length, then combined (each sentence has exactly one structure, so counts multiply).
int64_t grammar_capacity() {
  std::vector<int64_t> np_count(kGrammarMaxWords + 1, 0);
  const auto n_nouns = static_cast<int64_t>(nouns().size());
  const auto n_adj = static_cast<int64_t>(adjectives().size());
  int64_t adj_pairs = 0;
  for (int64_t a = 0; a < n_adj; ++a)
    for (int64_t b = a + 1; b < n_adj; ++b)
      adj_pairs += adjectives()[a].rank != adjectives()[b].rank;
  const std::array<int64_t, 3> adj_choices = {1, n_adj, adj_pairs};
  for (int k = 0; k <= 2; ++k) {
    np_count[k + 2] += n_nouns * (4 + 4) * adj_choices[k];  // 4 singular + 4 plural determiners
    np_count[k + 1] += n_nouns * adj_choices[k];            // bare plural
  }
  for (const Phrase& p : phrases())
    np_count[1 + p.en.size()] += static_cast<int64_t>(p.dets.size());
  const auto n_verbs = static_cast<int64_t>(verbs().size());
  const auto n_preps = static_cast<int64_t>(preps().size());
  int64_t total = 0;
  for (int64_t ls = 1; ls <= kGrammarMaxWords; ++ls)
    for (int64_t lv : {1, 3})
      for (int64_t lo = 1; lo <= kGrammarMaxWords; ++lo)
        for (int64_t lp = 0; lp <= kGrammarMaxWords; ++lp) {  // lp = 0: no prepositional phrase
          const int64_t len = ls + lv + lo + (lp > 0 ? 1 + lp : 0);
          if (len < kGrammarMinWords || len > kGrammarMaxWords) continue;
          int64_t c = sat_mul(sat_mul(np_count[ls], np_count[lo]), n_verbs);
          if (lp > 0) c = sat_mul(c, sat_mul(n_preps, np_count[lp]));
          total = sat_add(total, c);
        }
  return total;
}

Splits make_grammar_task(const TaskConfig& cfg) {
  std::string what =
      fmt::format("grammar sentences of {}..{} words", kGrammarMinWords, kGrammarMaxWords);
  return draw_distinct(cfg, grammar_capacity(), what, draw_grammar);
}

}  // namespace detail

namespace {

// ---- parsing English back into the grammar's structures ---------------------------------------

struct Lexicon {
  std::unordered_map<std::string, std::pair<int, bool>> noun;  // word -> (noun, plural)
  std::unordered_map<std::string, int> adjective, prep;
  std::unordered_map<std::string, std::pair<int, bool>> verb;  // word -> (verb, is 3rd singular)
  std::unordered_map<std::string, Det> det;
};

const Lexicon& lexicon() {
  static const Lexicon lex = [] {
    Lexicon l;
    for (int i = 0; i < static_cast<int>(nouns().size()); ++i) {
      l.noun[nouns()[i].en_sg] = {i, false};
      l.noun[nouns()[i].en_pl] = {i, true};
    }
    for (int i = 0; i < static_cast<int>(adjectives().size()); ++i)
      l.adjective[adjectives()[i].en] = i;
    for (int i = 0; i < static_cast<int>(preps().size()); ++i) l.prep[preps()[i].en] = i;
    for (int i = 0; i < static_cast<int>(verbs().size()); ++i) {
      l.verb[verbs()[i].en_3sg] = {i, true};
      l.verb[verbs()[i].en_base] = {i, false};
    }
    for (Det d : {Det::the, Det::a, Det::some, Det::my, Det::this_, Det::these})
      l.det[det_english(d)] = d;
    l.det["an"] = Det::a;
    return l;
  }();
  return lex;
}

class Parser {
 public:
  explicit Parser(const std::vector<std::string>& words) : w_(words) {}

  bool done() const { return pos_ == w_.size(); }
  const std::string& peek() const { return done() ? kEnd : w_[pos_]; }

  [[noreturn]] void fail(std::string_view expected) const {
    throw ValueError(
        fmt::format("translate_grammar: '{}': word {} ('{}') does not fit: expected {}", join(w_),
                    pos_, done() ? "end of sentence" : w_[pos_], expected));
  }

  NounPhrase noun_phrase() {
    const Lexicon& lex = lexicon();
    NounPhrase np;
    np.det = Det::bare;
    const size_t det_pos = pos_;
    if (auto it = lex.det.find(peek()); it != lex.det.end()) np.det = it->second, ++pos_;
    for (int p = 0; p < static_cast<int>(phrases().size()); ++p) {
      const auto& en = phrases()[p].en;
      if (pos_ + en.size() <= w_.size() && std::equal(en.begin(), en.end(), w_.begin() + pos_)) {
        const auto& dets = phrases()[p].dets;
        if (std::find(dets.begin(), dets.end(), np.det) == dets.end()) {
          pos_ = det_pos;
          fail(fmt::format("a determiner that '{}' takes",
                           join(std::vector<std::string>(en.begin(), en.end()))));
        }
        np.phrase = true, np.noun = p;
        pos_ += en.size();
        check_article(np, det_pos);
        return np;
      }
    }
    for (auto it = lex.adjective.find(peek()); it != lex.adjective.end();
         it = lex.adjective.find(peek())) {
      np.adjs.push_back(it->second);
      ++pos_;
    }
    auto it = lex.noun.find(peek());
    if (it == lex.noun.end()) fail("a noun");
    np.noun = it->second.first, np.plural = it->second.second;
    if (!det_fits(np.det, np.plural)) {
      pos_ = det_pos;
      fail(fmt::format("a determiner for a {} noun", np.plural ? "plural" : "singular"));
    }
    ++pos_;
    check_article(np, det_pos);
    return np;
  }

  Sentence sentence(NounPhrase subject) {
    const Lexicon& lex = lexicon();
    Sentence s;
    s.subject = std::move(subject);
    const bool plural = english_plural(s.subject);
    if (peek() == "does" || peek() == "do") {
      if (peek() != (plural ? "do" : "does")) fail(plural ? "'do'" : "'does'");
      ++pos_;
      if (peek() != "not") fail("'not'");
      ++pos_;
      auto it = lex.verb.find(peek());
      if (it == lex.verb.end() || it->second.second) fail("a verb in its base form");
      s.verb = it->second.first, s.negated = true;
    } else {
      auto it = lex.verb.find(peek());
      if (it == lex.verb.end()) fail("a verb");
      if (it->second.second == plural) fail(plural ? "a plural verb" : "a singular verb");
      s.verb = it->second.first;
    }
    ++pos_;
    s.object = noun_phrase();
    if (!done()) {
      auto it = lex.prep.find(peek());
      if (it == lex.prep.end()) fail("a preposition or the end of the sentence");
      s.prep = it->second;
      ++pos_;
      s.prep_object = noun_phrase();
    }
    if (!done()) fail("the end of the sentence");
    return s;
  }

 private:
  // "a" and "an" both parse as the indefinite article; the form must suit the next word.
  void check_article(const NounPhrase& np, size_t det_pos) {
    if (np.det != Det::a) return;
    const bool an = takes_an(w_[det_pos + 1]);
    if (w_[det_pos] != (an ? "an" : "a")) {
      pos_ = det_pos;
      fail(an ? "'an' before a vowel" : "'a' before a consonant");
    }
  }

  static inline const std::string kEnd;
  const std::vector<std::string>& w_;
  size_t pos_ = 0;
};

}  // namespace

// ================================================================================================
// Public API.

Example translate_grammar(const std::vector<std::string>& english) {
  Parser parser(english);
  NounPhrase np = parser.noun_phrase();
  if (parser.done()) {
    Example ex;
    realize_np(np, ex);
    return ex;
  }
  return realize_sentence(parser.sentence(std::move(np)));
}

}  // namespace tapestry::models
