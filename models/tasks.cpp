// Toy translation tasks: copy, reverse, sort, dates and a synthetic English -> French grammar.
#include "tapestry/models/tasks.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <limits>
#include <numeric>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "tapestry/core/errors.h"
#include "tapestry/core/random.h"

namespace tapestry::models {
namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
// Bounds that keep a config's memory and time sane; far above anything the models need.
constexpr int64_t kMaxSeqLen = 10000;
constexpr int64_t kMaxVocab = 1000000;
constexpr int64_t kMaxCount = 100000000;  // examples per split

int64_t sat_add(int64_t a, int64_t b) {
  return a > kInt64Max - b ? kInt64Max : a + b;
}
int64_t sat_mul(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  return a > kInt64Max / b ? kInt64Max : a * b;
}

constexpr std::array<std::pair<TaskKind, const char*>, 5> kTaskNames = {{
    {TaskKind::copy, "copy"},
    {TaskKind::reverse, "reverse"},
    {TaskKind::sort, "sort"},
    {TaskKind::dates, "dates"},
    {TaskKind::grammar, "grammar"},
}};

// ================================================================================================
// Distinct sampling shared by all tasks.

// Draws examples with `draw(rng)` and keeps those whose source is new, filling test, then valid,
// then train. `capacity` is the number of distinct sources the task has; `what` describes them.
template <class Draw>
Splits draw_distinct(const TaskConfig& cfg, int64_t capacity, const std::string& what,
                     Draw&& draw) {
  const int64_t needed = sat_add(sat_add(cfg.train, cfg.valid), cfg.test);
  const char* name = task_name(cfg.kind);
  if (capacity < needed) {
    throw ValueError(fmt::format(
        "make_task({}): only {} distinct sources exist ({}), but train + valid + test = {} + {} + "
        "{} = {} were requested",
        name, capacity, what, cfg.train, cfg.valid, cfg.test, needed));
  }
  // Rejection sampling slows down as the requested count nears the capacity; the cap turns a
  // near-exhaustive request into an error instead of an endless loop.
  const int64_t max_draws = sat_add(100000, sat_mul(50, needed));
  Rng rng(cfg.seed);
  std::unordered_set<std::string> seen;
  seen.reserve(static_cast<size_t>(needed));
  int64_t draws = 0;
  auto fill = [&](std::vector<Example>& out, int64_t count) {
    out.reserve(static_cast<size_t>(count));
    while (static_cast<int64_t>(out.size()) < count) {
      if (draws == max_draws) {
        throw ValueError(fmt::format(
            "make_task({}): found only {} distinct sources in {} draws ({} exist: {}), but train + "
            "valid + test = {} were requested; ask for fewer or widen the task",
            name, seen.size(), draws, capacity, what, needed));
      }
      ++draws;
      Example ex = draw(rng);
      if (seen.insert(join(ex.src)).second) out.push_back(std::move(ex));
    }
  };
  Splits splits;
  fill(splits.test, cfg.test);
  fill(splits.valid, cfg.valid);
  fill(splits.train, cfg.train);
  return splits;
}

// ================================================================================================
// copy, reverse, sort: random symbol strings.

int64_t sequence_capacity(const TaskConfig& cfg) {
  int64_t total = 0, power = 1;
  for (int64_t len = 1; len <= cfg.max_len; ++len) {
    power = sat_mul(power, cfg.vocab);
    if (len >= cfg.min_len) total = sat_add(total, power);
    if (total == kInt64Max) break;
  }
  return total;
}

Splits make_sequence_task(const TaskConfig& cfg) {
  std::vector<std::string> symbols;
  for (int64_t i = 0; i < cfg.vocab; ++i) symbols.push_back(symbol_token(i, cfg.vocab));
  std::string what = fmt::format("vocab {}, lengths {}..{}", cfg.vocab, cfg.min_len, cfg.max_len);
  return draw_distinct(cfg, sequence_capacity(cfg), what, [&](Rng& rng) {
    const int64_t len = cfg.min_len + rng.randint(cfg.max_len - cfg.min_len + 1);
    std::vector<int64_t> ids(static_cast<size_t>(len));
    for (auto& id : ids) id = rng.randint(cfg.vocab);
    // order[t] = source position of target token t.
    std::vector<int32_t> order(ids.size());
    std::iota(order.begin(), order.end(), 0);
    if (cfg.kind == TaskKind::reverse) std::reverse(order.begin(), order.end());
    if (cfg.kind == TaskKind::sort) {
      // Stable, so repeated symbols keep their source order and align to distinct positions.
      std::stable_sort(order.begin(), order.end(),
                       [&](int32_t a, int32_t b) { return ids[a] < ids[b]; });
    }
    Example ex;
    for (int64_t id : ids) ex.src.push_back(symbols[id]);
    for (int32_t pos : order) ex.tgt.push_back(ex.src[pos]);
    ex.align = std::move(order);
    return ex;
  });
}

// ================================================================================================
// dates: human formats -> ISO.

constexpr std::array<const char*, 12> kMonths = {"january",   "february", "march",    "april",
                                                 "may",       "june",     "july",     "august",
                                                 "september", "october",  "november", "december"};
constexpr std::array<const char*, 12> kMonthsShort = {"jan", "feb", "mar", "apr", "may", "jun",
                                                      "jul", "aug", "sep", "oct", "nov", "dec"};
// Index 0 is Monday.
constexpr std::array<const char*, 7> kWeekdays = {"monday", "tuesday",  "wednesday", "thursday",
                                                  "friday", "saturday", "sunday"};
constexpr std::array<const char*, 7> kWeekdaysShort = {"mon", "tue", "wed", "thu",
                                                       "fri", "sat", "sun"};

// Each format is unambiguous on its own: numeric month-first only with slashes, day-first only
// with dots, so every source string names exactly one date.
constexpr std::array<const char*, 14> kDateFormats = {
    "weekday, d month yyyy",     // saturday, 21 november 2026
    "d month yyyy",              // 21 november 2026
    "month d, yyyy",             // november 21, 2026
    "mon d, yyyy",               // nov 21, 2026
    "d mon. yyyy",               // 21 nov. 2026
    "mm/dd/yy",                  // 11/21/26
    "mm/dd/yyyy",                // 11/21/2026
    "dd.mm.yyyy",                // 21.11.2026
    "yyyy-mm-dd",                // 2026-11-21
    "wkd d mon yyyy",            // sat 21 nov 2026
    "the dth of month, yyyy",    // the 21st of november, 2026
    "d-mon-yyyy",                // 21-nov-2026
    "yyyymmdd",                  // 20261121
    "weekday, month dth, yyyy",  // saturday, november 21st, 2026
};

bool is_leap(int y) {
  return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}
int days_in_month(int y, int m) {
  constexpr std::array<int, 12> kDays = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && is_leap(y) ? 29 : kDays[m - 1];
}

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
int64_t days_from_civil(int y, int m, int d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

struct Civil {
  int y, m, d;
};
Civil civil_from_days(int64_t z) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const int64_t doe = z - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  const int d = static_cast<int>(doy - (153 * mp + 2) / 5 + 1);
  const int m = static_cast<int>(mp < 10 ? mp + 3 : mp - 9);
  return {static_cast<int>(yoe + era * 400) + (m <= 2), m, d};
}

// 0 = Monday; 1970-01-01 was a Thursday (3).
int weekday(int y, int m, int d) {
  const int64_t z = days_from_civil(y, m, d);
  return static_cast<int>(((z + 3) % 7 + 7) % 7);
}

std::string ordinal(int d) {
  const char* suffix = "th";
  if (d % 100 < 11 || d % 100 > 13) {
    if (d % 10 == 1) suffix = "st";
    if (d % 10 == 2) suffix = "nd";
    if (d % 10 == 3) suffix = "rd";
  }
  return fmt::format("{}{}", d, suffix);
}

// A formatted date and where its copyable digits sit, to align the ISO target.
struct DateText {
  std::string text;
  int year_pos = -1, year_digits = 0;  // 4, or 2 for yy
  int month_pos = -1;                  // two digits, or -1 when the month is a name
  int day_pos = -1, day_digits = 0;    // 1 or 2 characters
  int dash_pos[2] = {-1, -1};          // the ISO source's own separators

  int here() const { return static_cast<int>(text.size()); }
  void put(std::string_view s) { text += s; }
  void year4(int y) {
    year_pos = here(), year_digits = 4;
    text += fmt::format("{:04}", y);
  }
  void year2(int y) {
    year_pos = here(), year_digits = 2;
    text += fmt::format("{:02}", y % 100);
  }
  void month2(int m) {
    month_pos = here();
    text += fmt::format("{:02}", m);
  }
  void day(int d, bool padded) {
    day_pos = here();
    std::string s = padded ? fmt::format("{:02}", d) : fmt::format("{}", d);
    day_digits = static_cast<int>(s.size());
    text += s;
  }
  void day_ordinal(int d) {
    day(d, false);
    text += ordinal(d).substr(static_cast<size_t>(day_digits));
  }
};

void check_date(int y, int m, int d, int format) {
  if (y < kDateMinYear || y > kDateMaxYear || m < 1 || m > 12 || d < 1 || d > days_in_month(y, m)) {
    throw ValueError(fmt::format(
        "format_date: {:04}-{:02}-{:02} is not a calendar date between {}-01-01 and {}-12-31", y, m,
        d, kDateMinYear, kDateMaxYear));
  }
  if (format < 0 || format >= num_date_formats()) {
    throw ValueError(
        fmt::format("format_date: format {} is not in [0, {})", format, num_date_formats()));
  }
}

DateText build_date(int y, int m, int d, int format) {
  check_date(y, m, d, format);
  const std::string month = kMonths[m - 1], mon = kMonthsShort[m - 1];
  const int wd = weekday(y, m, d);
  DateText t;
  switch (format) {
    case 0:  // saturday, 21 november 2026
      t.put(fmt::format("{}, ", kWeekdays[wd])), t.day(d, false), t.put(" " + month + " ");
      t.year4(y);
      break;
    case 1:  // 21 november 2026
      t.day(d, false), t.put(" " + month + " "), t.year4(y);
      break;
    case 2:  // november 21, 2026
      t.put(month + " "), t.day(d, false), t.put(", "), t.year4(y);
      break;
    case 3:  // nov 21, 2026
      t.put(mon + " "), t.day(d, false), t.put(", "), t.year4(y);
      break;
    case 4:  // 21 nov. 2026
      t.day(d, false), t.put(" " + mon + ". "), t.year4(y);
      break;
    case 5:  // 11/21/26
      t.month2(m), t.put("/"), t.day(d, true), t.put("/"), t.year2(y);
      break;
    case 6:  // 11/21/2026
      t.month2(m), t.put("/"), t.day(d, true), t.put("/"), t.year4(y);
      break;
    case 7:  // 21.11.2026
      t.day(d, true), t.put("."), t.month2(m), t.put("."), t.year4(y);
      break;
    case 8:  // 2026-11-21
      t.year4(y), t.dash_pos[0] = t.here(), t.put("-"), t.month2(m), t.dash_pos[1] = t.here();
      t.put("-"), t.day(d, true);
      break;
    case 9:  // sat 21 nov 2026
      t.put(fmt::format("{} ", kWeekdaysShort[wd])), t.day(d, false), t.put(" " + mon + " ");
      t.year4(y);
      break;
    case 10:  // the 21st of november, 2026
      t.put("the "), t.day_ordinal(d), t.put(" of " + month + ", "), t.year4(y);
      break;
    case 11:  // 21-nov-2026
      t.day(d, false), t.put("-" + mon + "-"), t.year4(y);
      break;
    case 12:  // 20261121
      t.year4(y), t.month2(m), t.day(d, true);
      break;
    case 13:  // saturday, november 21st, 2026
      t.put(fmt::format("{}, {} ", kWeekdays[wd], month)), t.day_ordinal(d), t.put(", ");
      t.year4(y);
      break;
  }
  return t;
}

Example make_date_example(int y, int m, int d, int format) {
  const DateText t = build_date(y, m, d, format);
  Example ex;
  ex.src = char_tokens(t.text);
  ex.tgt = char_tokens(fmt::format("{:04}-{:02}-{:02}", y, m, d));
  ex.align.assign(10, -1);
  // A target character aligns to the source character it is copied from; the century of a
  // two-digit year, a month number read from a name, a day's padding zero and the separators of
  // non-ISO formats have no source character.
  for (int i = 0; i < t.year_digits; ++i) ex.align[4 - t.year_digits + i] = t.year_pos + i;
  ex.align[4] = t.dash_pos[0];
  if (t.month_pos >= 0) ex.align[5] = t.month_pos, ex.align[6] = t.month_pos + 1;
  ex.align[7] = t.dash_pos[1];
  for (int i = 0; i < t.day_digits; ++i) ex.align[10 - t.day_digits + i] = t.day_pos + i;
  return ex;
}

int64_t first_date_day() {
  return days_from_civil(kDateMinYear, 1, 1);
}
int64_t num_dates() {
  return days_from_civil(kDateMaxYear + 1, 1, 1) - first_date_day();
}

// "may" is its own abbreviation, so "month d, yyyy" and "mon d, yyyy" write a May date the same
// way: one string fewer for each of the 31 May days of every year.
int64_t dates_capacity() {
  return num_dates() * num_date_formats() - 31 * (kDateMaxYear - kDateMinYear + 1);
}

Splits make_dates_task(const TaskConfig& cfg) {
  const int64_t first = first_date_day(), count = num_dates();
  std::string what = fmt::format("{} dates from {}-01-01 to {}-12-31 in {} formats", count,
                                 kDateMinYear, kDateMaxYear, num_date_formats());
  return draw_distinct(cfg, dates_capacity(), what, [&](Rng& rng) {
    const Civil c = civil_from_days(first + rng.randint(count));
    return make_date_example(c.y, c.m, c.d, static_cast<int>(rng.randint(num_date_formats())));
  });
}

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

enum class Gender { masc, fem };
enum class Det { the, a, some, my, this_, these, bare };

struct Noun {
  const char *en_sg, *en_pl, *fr_sg, *fr_pl;
  Gender gender;
};
struct Adjective {
  const char* en;
  int rank;  // English order: 0 opinion, 1 size, 2 age, 3 colour, 4 origin, 5 purpose
  bool before_noun;
  std::array<const char*, 4> fr;  // masc sg, fem sg, masc pl, fem pl
};
struct Verb {
  const char *en_3sg, *en_base, *fr_3sg, *fr_3pl;
};
struct Prep {
  const char *en, *fr;
};
// A fixed multi-word noun phrase; fr_from[i] = index of the English word French word i translates.
struct Phrase {
  std::vector<const char*> en, fr;
  std::vector<int32_t> fr_from;
  Gender gender;
  bool en_plural, fr_plural;
  std::vector<Det> dets;  // the determiners it takes
};

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

const char* task_name(TaskKind kind) {
  for (const auto& [k, name] : kTaskNames)
    if (k == kind) return name;
  throw ValueError(fmt::format("task_name: unknown TaskKind {}", static_cast<int>(kind)));
}

TaskKind parse_task(std::string_view name) {
  for (const auto& [k, n] : kTaskNames)
    if (name == n) return k;
  throw ValueError(fmt::format(
      "parse_task: unknown task '{}'; valid tasks are copy, reverse, sort, dates, grammar", name));
}

void validate_task_config(const TaskConfig& cfg) {
  const char* name = task_name(cfg.kind);
  auto fail = [&](std::string_view field, int64_t value, std::string_view rule) {
    throw ValueError(fmt::format("TaskConfig({}): {} = {} {}", name, field, value, rule));
  };
  if (cfg.min_len < 1) fail("min_len", cfg.min_len, "must be >= 1");
  if (cfg.max_len < cfg.min_len) {
    fail("max_len", cfg.max_len, fmt::format("must be >= min_len = {}", cfg.min_len));
  }
  if (cfg.max_len > kMaxSeqLen)
    fail("max_len", cfg.max_len, fmt::format("must be <= {}", kMaxSeqLen));
  if (cfg.vocab < 2) fail("vocab", cfg.vocab, "must be >= 2");
  if (cfg.vocab > kMaxVocab) fail("vocab", cfg.vocab, fmt::format("must be <= {}", kMaxVocab));
  for (auto [field, count] :
       {std::pair{"train", cfg.train}, {"valid", cfg.valid}, {"test", cfg.test}}) {
    if (count < 0) fail(field, count, "must be >= 0");
    if (count > kMaxCount) fail(field, count, fmt::format("must be <= {}", kMaxCount));
  }
}

Splits make_task(const TaskConfig& cfg) {
  validate_task_config(cfg);
  switch (cfg.kind) {
    case TaskKind::copy:
    case TaskKind::reverse:
    case TaskKind::sort:
      return make_sequence_task(cfg);
    case TaskKind::dates:
      return make_dates_task(cfg);
    case TaskKind::grammar:
      return make_grammar_task(cfg);
  }
  throw ValueError(fmt::format("make_task: unknown TaskKind {}", static_cast<int>(cfg.kind)));
}

int64_t task_source_count(const TaskConfig& cfg) {
  validate_task_config(cfg);
  switch (cfg.kind) {
    case TaskKind::copy:
    case TaskKind::reverse:
    case TaskKind::sort:
      return sequence_capacity(cfg);
    case TaskKind::dates:
      return dates_capacity();
    case TaskKind::grammar:
      return grammar_capacity();
  }
  return 0;
}

std::string join(const std::vector<std::string>& tokens, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (i > 0) out += sep;
    out += tokens[i];
  }
  return out;
}

std::vector<std::string> split_words(std::string_view text) {
  std::vector<std::string> words;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && text[i] == ' ') ++i;
    size_t j = i;
    while (j < text.size() && text[j] != ' ') ++j;
    if (j > i) words.emplace_back(text.substr(i, j - i));
    i = j;
  }
  return words;
}

std::string symbol_token(int64_t index, int64_t vocab) {
  if (index < 0 || index >= vocab) {
    throw IndexError(fmt::format("symbol_token: index {} is not in [0, {})", index, vocab));
  }
  if (vocab <= 26) return std::string(1, static_cast<char>('a' + index));
  const int width = static_cast<int>(fmt::format("{}", vocab - 1).size());
  return fmt::format("s{:0{}}", index, width);
}

int num_date_formats() {
  return static_cast<int>(kDateFormats.size());
}

const char* date_format_name(int format) {
  if (format < 0 || format >= num_date_formats()) {
    throw ValueError(
        fmt::format("date_format_name: format {} is not in [0, {})", format, num_date_formats()));
  }
  return kDateFormats[format];
}

std::string format_date(int year, int month, int day, int format) {
  return build_date(year, month, day, format).text;
}

Example date_example(int year, int month, int day, int format) {
  return make_date_example(year, month, day, format);
}

std::vector<std::string> char_tokens(std::string_view text) {
  std::vector<std::string> tokens;
  tokens.reserve(text.size());
  for (char c : text) tokens.push_back(c == ' ' ? std::string(kDateSpace) : std::string(1, c));
  return tokens;
}

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
