// Toy tasks: determinism, disjoint splits, config errors, and each task checked independently.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

#include "tapestry/core/errors.h"
#include "tapestry/models/tasks.h"

using namespace tapestry;
using namespace tapestry::models;
using Catch::Contains;

namespace {

constexpr TaskKind kAllTasks[] = {TaskKind::copy, TaskKind::reverse, TaskKind::sort,
                                  TaskKind::dates, TaskKind::grammar};

TaskConfig small_config(TaskKind kind, uint64_t seed = 1) {
  TaskConfig c{kind};
  c.train = 500, c.valid = 100, c.test = 100, c.seed = seed;
  return c;
}

bool same_examples(const std::vector<Example>& a, const std::vector<Example>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].src != b[i].src || a[i].tgt != b[i].tgt || a[i].align != b[i].align) return false;
  }
  return true;
}

// Every alignment entry is -1 or a valid source index, one per target token.
void require_valid_alignment(const Example& ex) {
  REQUIRE(ex.align.size() == ex.tgt.size());
  for (int32_t a : ex.align) {
    REQUIRE(a >= -1);
    REQUIRE(a < static_cast<int32_t>(ex.src.size()));
  }
}

bool is_monotonic(const std::vector<int32_t>& align) {
  int32_t last = -1;
  for (int32_t a : align) {
    if (a < 0) continue;
    if (a < last) return false;
    last = a;
  }
  return true;
}

// ---- an independent calendar (not the generator's days_from_civil) ----------------------------
bool leap(int y) {
  return y % 400 == 0 || (y % 4 == 0 && y % 100 != 0);
}
int month_days(int y, int m) {
  if (m == 2) return leap(y) ? 29 : 28;
  return (m == 4 || m == 6 || m == 9 || m == 11) ? 30 : 31;
}
// Tomohiko Sakamoto's weekday formula; 0 = Sunday.
int sakamoto_weekday(int y, int m, int d) {
  static const int t[] = {0, 3, 2, 5, 0, 3, 5, 1, 4, 6, 2, 4};
  if (m < 3) y -= 1;
  return (y + y / 4 - y / 100 + y / 400 + t[m - 1] + d) % 7;
}
const std::vector<std::string> kMonthNames = {"january",   "february", "march",    "april",
                                              "may",       "june",     "july",     "august",
                                              "september", "october",  "november", "december"};
const std::vector<std::string> kDayNames = {"sunday",   "monday", "tuesday", "wednesday",
                                            "thursday", "friday", "saturday"};
int month_of(const std::string& name, bool abbreviated) {
  for (int i = 0; i < 12; ++i) {
    const std::string full = kMonthNames[i];
    if (name == (abbreviated ? full.substr(0, 3) : full)) return i + 1;
  }
  return 0;
}
int weekday_of(const std::string& name, bool abbreviated) {
  for (int i = 0; i < 7; ++i) {
    if (name == (abbreviated ? kDayNames[i].substr(0, 3) : kDayNames[i])) return i;
  }
  return -1;
}
std::string ordinal_suffix(int d) {
  if (d >= 11 && d <= 13) return "th";
  if (d % 10 == 1) return "st";
  if (d % 10 == 2) return "nd";
  if (d % 10 == 3) return "rd";
  return "th";
}

struct ParsedDate {
  int format, y, m, d;
};

// Matches all of `text` against `pattern`: '#' is one digit, '?' an optional digit, '@' one or more
// lower-case letters, any other character itself. On a match, fields[1..] hold the runs of digits
// and letters in order (fields[0] is the text). Greedy, which suffices for the date patterns.
// (Hand-written rather than std::regex, which GCC 12 warns about under -fsanitize=address.)
bool match(const std::string& text, std::string_view pattern, std::vector<std::string>& fields) {
  fields.assign(1, text);
  size_t t = 0;
  char prev_kind = 0;
  auto digit_at = [&](size_t i) { return i < text.size() && text[i] >= '0' && text[i] <= '9'; };
  auto letter_at = [&](size_t i) { return i < text.size() && text[i] >= 'a' && text[i] <= 'z'; };
  for (char p : pattern) {
    const char kind = (p == '#' || p == '?') ? 'd' : p == '@' ? 'a' : 0;
    if (kind != 0 && kind != prev_kind) fields.emplace_back();
    prev_kind = kind;
    if (p == '#') {
      if (!digit_at(t)) return false;
      fields.back() += text[t++];
    } else if (p == '?') {
      if (digit_at(t)) fields.back() += text[t++];
    } else if (p == '@') {
      if (!letter_at(t)) return false;
      while (letter_at(t)) fields.back() += text[t++];
    } else {
      if (t >= text.size() || text[t] != p) return false;
      ++t;
    }
  }
  return t == text.size();
}

// An independent reader of the 14 date formats. Returns every reading that matches and is
// consistent (month and weekday names, weekday of the date, ordinal suffix, unpadded day).
std::vector<ParsedDate> read_human_date(const std::string& s) {
  std::vector<ParsedDate> out;
  std::vector<std::string> g;
  auto num = [&](int i) { return std::stoi(g[i]); };
  auto unpadded = [&](int i) { return g[i][0] != '0'; };
  auto add = [&](int format, int y, int m, int d, int weekday = -1) {
    if (m < 1 || m > 12 || d < 1 || d > month_days(y, m)) return;
    if (weekday >= 0 && sakamoto_weekday(y, m, d) != weekday) return;
    out.push_back({format, y, m, d});
  };
  if (match(s, "@, #? @ ####", g) && unpadded(2) && weekday_of(g[1], false) >= 0 &&
      month_of(g[3], false))
    add(0, num(4), month_of(g[3], false), num(2), weekday_of(g[1], false));
  if (match(s, "#? @ ####", g) && unpadded(1) && month_of(g[2], false))
    add(1, num(3), month_of(g[2], false), num(1));
  if (match(s, "@ #?, ####", g) && unpadded(2)) {
    if (month_of(g[1], false)) add(2, num(3), month_of(g[1], false), num(2));
    if (month_of(g[1], true)) add(3, num(3), month_of(g[1], true), num(2));
  }
  if (match(s, "#? @. ####", g) && unpadded(1) && month_of(g[2], true))
    add(4, num(3), month_of(g[2], true), num(1));
  if (match(s, "##/##/##", g)) add(5, num(3) >= 50 ? 1900 + num(3) : 2000 + num(3), num(1), num(2));
  if (match(s, "##/##/####", g)) add(6, num(3), num(1), num(2));
  if (match(s, "##.##.####", g)) add(7, num(3), num(2), num(1));
  if (match(s, "####-##-##", g)) add(8, num(1), num(2), num(3));
  if (match(s, "@ #? @ ####", g) && unpadded(2) && weekday_of(g[1], true) >= 0 &&
      month_of(g[3], true))
    add(9, num(4), month_of(g[3], true), num(2), weekday_of(g[1], true));
  if (match(s, "the #?@ of @, ####", g) && unpadded(1) && g[2] == ordinal_suffix(num(1)) &&
      month_of(g[3], false))
    add(10, num(4), month_of(g[3], false), num(1));
  if (match(s, "#?-@-####", g) && unpadded(1) && month_of(g[2], true))
    add(11, num(3), month_of(g[2], true), num(1));
  if (match(s, "########", g)) {
    add(12, std::stoi(s.substr(0, 4)), std::stoi(s.substr(4, 2)), std::stoi(s.substr(6, 2)));
  }
  if (match(s, "@, @ #?@, ####", g) && unpadded(3) && g[4] == ordinal_suffix(num(3)) &&
      weekday_of(g[1], false) >= 0 && month_of(g[2], false))
    add(13, num(5), month_of(g[2], false), num(3), weekday_of(g[1], false));
  return out;
}

std::string untokenize_chars(const std::vector<std::string>& tokens) {
  std::string s;
  for (const auto& t : tokens) {
    REQUIRE(t.size() == 1);
    REQUIRE(t != " ");
    s += t == "_" ? " " : t;
  }
  return s;
}

std::vector<int32_t> align_of(std::initializer_list<int32_t> v) {
  return std::vector<int32_t>(v);
}

}  // namespace

// ================================================================================================
// Names and configs.

TEST_CASE("task names round-trip and unknown names list the valid ones", "[tasks]") {
  for (TaskKind k : kAllTasks) REQUIRE(parse_task(task_name(k)) == k);
  REQUIRE(std::string(task_name(TaskKind::grammar)) == "grammar");
  REQUIRE_THROWS_AS(parse_task("french"), ValueError);
  REQUIRE_THROWS_WITH(parse_task("french"), Contains("'french'") && Contains("copy") &&
                                                Contains("reverse") && Contains("sort") &&
                                                Contains("dates") && Contains("grammar"));
}

TEST_CASE("bad task configs are rejected naming the field and value", "[tasks]") {
  auto with = [](auto change) {
    TaskConfig c{TaskKind::copy};
    change(c);
    return c;
  };
  REQUIRE_THROWS_AS(make_task(with([](TaskConfig& c) { c.min_len = 0; })), ValueError);
  REQUIRE_THROWS_WITH(make_task(with([](TaskConfig& c) { c.min_len = 0; })),
                      Contains("min_len = 0"));
  REQUIRE_THROWS_WITH(make_task(with([](TaskConfig& c) { c.max_len = 3; })),
                      Contains("max_len = 3") && Contains("min_len = 5"));
  REQUIRE_THROWS_WITH(make_task(with([](TaskConfig& c) { c.vocab = 1; })), Contains("vocab = 1"));
  REQUIRE_THROWS_WITH(make_task(with([](TaskConfig& c) { c.train = -1; })), Contains("train = -1"));
  REQUIRE_THROWS_WITH(make_task(with([](TaskConfig& c) { c.valid = -2; })), Contains("valid = -2"));
  REQUIRE_THROWS_WITH(make_task(with([](TaskConfig& c) { c.test = -3; })), Contains("test = -3"));
  REQUIRE_THROWS_WITH(make_task(with([](TaskConfig& c) { c.train = int64_t(1) << 40; })),
                      Contains("train = 1099511627776"));
  REQUIRE_THROWS_WITH(make_task(with([](TaskConfig& c) { c.max_len = 1000000; })),
                      Contains("max_len = 1000000"));
  REQUIRE_THROWS_WITH(make_task(with([](TaskConfig& c) { c.kind = static_cast<TaskKind>(9); })),
                      Contains("TaskKind 9"));
  // Fields a task ignores are still validated.
  TaskConfig dates{TaskKind::dates};
  dates.vocab = 0;
  REQUIRE_THROWS_WITH(make_task(dates), Contains("vocab = 0"));
}

TEST_CASE("a request beyond the distinct sources fails saying how many exist", "[tasks]") {
  // vocab 2, lengths 1..2: 2 + 4 = 6 distinct sources, counted by hand.
  TaskConfig c{TaskKind::copy};
  c.vocab = 2, c.min_len = 1, c.max_len = 2, c.train = 5, c.valid = 1, c.test = 1;
  REQUIRE(task_source_count(c) == 6);
  REQUIRE_THROWS_AS(make_task(c), ValueError);
  REQUIRE_THROWS_WITH(make_task(c), Contains("only 6 distinct sources") && Contains("= 7"));
  // Exactly all six can be had.
  c.train = 4;
  Splits s = make_task(c);
  std::set<std::string> all;
  for (auto* split : {&s.train, &s.valid, &s.test})
    for (const auto& ex : *split) all.insert(join(ex.src));
  REQUIRE(all == std::set<std::string>{"a", "b", "a a", "a b", "b a", "b b"});

  // Sampling that stops finding new sources gives up with an error instead of looping: all
  // 2^14 - 2 = 16382 strings of lengths 1..13 over 2 symbols, drawn with uniform lengths, leave
  // each length-13 string a chance of 1/(13 * 8192) per draw.
  TaskConfig dense{TaskKind::copy};
  dense.vocab = 2, dense.min_len = 1, dense.max_len = 13;
  dense.train = 16382 - 2, dense.valid = 1, dense.test = 1;
  REQUIRE(task_source_count(dense) == 16382);
  REQUIRE_THROWS_WITH(make_task(dense), Contains("found only") && Contains("16382 exist"));
}

TEST_CASE("distinct source counts are computed by hand for copy and dates", "[tasks]") {
  TaskConfig c{TaskKind::sort};
  c.vocab = 3, c.min_len = 2, c.max_len = 4;
  REQUIRE(task_source_count(c) == 9 + 27 + 81);
  c.vocab = 1000000, c.max_len = 10000;  // saturates instead of overflowing
  REQUIRE(task_source_count(c) == std::numeric_limits<int64_t>::max());
  // 1950..2049: 100 years, 25 of them leap (1952, 1956, ..., 2048; 2000 is a leap year), in 14
  // formats, less the 31 * 100 May dates that "november 21, 2026" and "nov 21, 2026" write alike.
  REQUIRE(task_source_count(TaskConfig{TaskKind::dates}) == (100 * 365 + 25) * 14 - 3100);

  for (TaskKind k : kAllTasks) {
    WARN(task_name(k) << ": " << task_source_count(TaskConfig{k})
                      << " distinct sources under the default config");
  }
}

// ================================================================================================
// Properties shared by every task.

TEST_CASE("every task is deterministic from its seed and a new seed changes the data", "[tasks]") {
  for (TaskKind k : kAllTasks) {
    INFO(task_name(k));
    Splits a = make_task(small_config(k, 7)), b = make_task(small_config(k, 7));
    REQUIRE(same_examples(a.train, b.train));
    REQUIRE(same_examples(a.valid, b.valid));
    REQUIRE(same_examples(a.test, b.test));
    Splits c = make_task(small_config(k, 8));
    REQUIRE_FALSE(same_examples(a.train, c.train));
    REQUIRE_FALSE(same_examples(a.test, c.test));
    // The held-out sets are drawn first, so they do not depend on the train size.
    TaskConfig bigger = small_config(k, 7);
    bigger.train = 900;
    Splits d = make_task(bigger);
    REQUIRE(same_examples(a.test, d.test));
    REQUIRE(same_examples(a.valid, d.valid));
  }
}

TEST_CASE("every task meets the counts with distinct sources across and within splits", "[tasks]") {
  for (TaskKind k : kAllTasks) {
    INFO(task_name(k));
    TaskConfig cfg{k};  // 20000 / 1000 / 1000
    auto t0 = std::chrono::steady_clock::now();
    Splits s = make_task(cfg);
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    REQUIRE(s.train.size() == 20000);
    REQUIRE(s.valid.size() == 1000);
    REQUIRE(s.test.size() == 1000);
    std::unordered_set<std::string> seen;
    size_t src_tokens = 0, tgt_tokens = 0, max_src = 0;
    std::set<std::string> src_vocab, tgt_vocab;
    for (auto* split : {&s.test, &s.valid, &s.train}) {
      for (const auto& ex : *split) {
        REQUIRE(seen.insert(join(ex.src)).second);
        REQUIRE_FALSE(ex.src.empty());
        REQUIRE_FALSE(ex.align.empty());  // every task here knows its alignment
        require_valid_alignment(ex);
        src_tokens += ex.src.size(), tgt_tokens += ex.tgt.size();
        max_src = std::max(max_src, ex.src.size());
        src_vocab.insert(ex.src.begin(), ex.src.end());
        tgt_vocab.insert(ex.tgt.begin(), ex.tgt.end());
      }
    }
    WARN(task_name(k) << ": 20000/1000/1000 generated in " << secs << " s; mean source length "
                      << double(src_tokens) / 22000 << " (max " << max_src
                      << "), mean target length " << double(tgt_tokens) / 22000 << "; vocabularies "
                      << src_vocab.size() << " source, " << tgt_vocab.size() << " target");
  }
}

// ================================================================================================
// copy, reverse, sort.

TEST_CASE("symbol tokens are letters up to 26 symbols, then zero-padded s-numbers", "[tasks]") {
  REQUIRE(symbol_token(0, 20) == "a");
  REQUIRE(symbol_token(19, 20) == "t");
  REQUIRE(symbol_token(25, 26) == "z");
  REQUIRE(symbol_token(0, 27) == "s00");
  REQUIRE(symbol_token(99, 100) == "s99");
  REQUIRE(symbol_token(5, 1000) == "s005");
  REQUIRE_THROWS_AS(symbol_token(20, 20), IndexError);
  REQUIRE_THROWS_AS(symbol_token(-1, 20), IndexError);
}

TEST_CASE("copy, reverse and sort targets are the copied, reversed and sorted source", "[tasks]") {
  for (TaskKind k : {TaskKind::copy, TaskKind::reverse, TaskKind::sort}) {
    INFO(task_name(k));
    TaskConfig cfg = small_config(k);
    cfg.min_len = 3, cfg.max_len = 9, cfg.vocab = 20;
    Splits s = make_task(cfg);
    std::set<int64_t> lengths;
    for (const auto& ex : s.train) {
      REQUIRE(ex.src.size() >= 3);
      REQUIRE(ex.src.size() <= 9);
      lengths.insert(static_cast<int64_t>(ex.src.size()));
      for (const auto& tok : ex.src) {  // vocab 20: the letters a..t
        REQUIRE(tok.size() == 1);
        REQUIRE(tok[0] >= 'a');
        REQUIRE(tok[0] <= 't');
      }
      std::vector<std::string> expected = ex.src;
      if (k == TaskKind::reverse) std::reverse(expected.begin(), expected.end());
      if (k == TaskKind::sort) std::sort(expected.begin(), expected.end());
      REQUIRE(ex.tgt == expected);
      // Each target token aligns to a source token equal to it, and every source position is
      // used once (the alignment is a permutation).
      std::vector<int32_t> sorted_align = ex.align;
      std::sort(sorted_align.begin(), sorted_align.end());
      for (size_t t = 0; t < ex.tgt.size(); ++t) {
        REQUIRE(sorted_align[t] == static_cast<int32_t>(t));
        REQUIRE(ex.src[ex.align[t]] == ex.tgt[t]);
        const auto n = static_cast<int32_t>(ex.src.size());
        if (k == TaskKind::copy) REQUIRE(ex.align[t] == static_cast<int32_t>(t));
        if (k == TaskKind::reverse) REQUIRE(ex.align[t] == n - 1 - static_cast<int32_t>(t));
        // Stable: repeated symbols keep their source order.
        if (k == TaskKind::sort && t > 0 && ex.tgt[t] == ex.tgt[t - 1])
          REQUIRE(ex.align[t] > ex.align[t - 1]);
      }
    }
    REQUIRE(lengths.size() == 7);  // 500 draws hit every length 3..9
  }
}

TEST_CASE("sort orders s-number symbols numerically with a large vocabulary", "[tasks]") {
  TaskConfig cfg = small_config(TaskKind::sort);
  cfg.vocab = 100;
  for (const auto& ex : make_task(cfg).train) {
    std::vector<int> values;
    for (const auto& tok : ex.src) {
      REQUIRE(tok.size() == 3);
      REQUIRE(tok[0] == 's');
      values.push_back(std::stoi(tok.substr(1)));
    }
    std::sort(values.begin(), values.end());
    for (size_t t = 0; t < values.size(); ++t) REQUIRE(std::stoi(ex.tgt[t].substr(1)) == values[t]);
  }
}

// ================================================================================================
// dates.

TEST_CASE("dates: each format written out by hand for Saturday 2026-11-21", "[tasks][dates]") {
  // 2026-11-21 is a Saturday (checked against Python's datetime and a printed calendar).
  const std::vector<std::string> expected = {
      "saturday, 21 november 2026",
      "21 november 2026",
      "november 21, 2026",
      "nov 21, 2026",
      "21 nov. 2026",
      "11/21/26",
      "11/21/2026",
      "21.11.2026",
      "2026-11-21",
      "sat 21 nov 2026",
      "the 21st of november, 2026",
      "21-nov-2026",
      "20261121",
      "saturday, november 21st, 2026",
  };
  REQUIRE(num_date_formats() == static_cast<int>(expected.size()));
  for (int f = 0; f < num_date_formats(); ++f) {
    INFO("format " << f << " (" << date_format_name(f) << ")");
    REQUIRE(format_date(2026, 11, 21, f) == expected[f]);
  }
}

TEST_CASE("dates: weekdays, leap days, ordinals and two-digit years by hand", "[tasks][dates]") {
  // Weekdays: 2000-02-29 Tuesday, 1969-07-20 (Apollo 11 landing) Sunday, 1950-01-01 Sunday,
  // 2049-12-31 Friday, 1970-01-01 Thursday (the Unix epoch), 2012-03-02 Friday, 2011-10-03 Monday.
  REQUIRE(format_date(2000, 2, 29, 0) == "tuesday, 29 february 2000");
  REQUIRE(format_date(2000, 2, 29, 5) == "02/29/00");
  REQUIRE(format_date(2000, 2, 29, 13) == "tuesday, february 29th, 2000");
  REQUIRE(format_date(1969, 7, 20, 9) == "sun 20 jul 1969");
  REQUIRE(format_date(1969, 7, 20, 5) == "07/20/69");
  REQUIRE(format_date(1969, 7, 20, 4) == "20 jul. 1969");
  REQUIRE(format_date(1950, 1, 1, 0) == "sunday, 1 january 1950");
  REQUIRE(format_date(1950, 1, 1, 10) == "the 1st of january, 1950");
  REQUIRE(format_date(1950, 1, 1, 7) == "01.01.1950");
  REQUIRE(format_date(2049, 12, 31, 13) == "friday, december 31st, 2049");
  REQUIRE(format_date(2049, 12, 31, 5) == "12/31/49");
  REQUIRE(format_date(1970, 1, 1, 9) == "thu 1 jan 1970");
  REQUIRE(format_date(2012, 3, 2, 13) == "friday, march 2nd, 2012");
  REQUIRE(format_date(2011, 10, 3, 10) == "the 3rd of october, 2011");
  REQUIRE(format_date(2011, 10, 3, 11) == "3-oct-2011");
  REQUIRE(format_date(2011, 10, 3, 12) == "20111003");
  REQUIRE(format_date(1999, 5, 5, 2) == "may 5, 1999");
  REQUIRE(format_date(1999, 5, 5, 4) == "5 may. 1999");
  REQUIRE(format_date(2013, 12, 11, 10) == "the 11th of december, 2013");
  REQUIRE(format_date(1987, 8, 12, 10) == "the 12th of august, 1987");
  REQUIRE(format_date(2024, 1, 13, 13) == "saturday, january 13th, 2024");
  REQUIRE(format_date(2022, 6, 22, 10) == "the 22nd of june, 2022");
  REQUIRE(format_date(2001, 9, 23, 13) == "sunday, september 23rd, 2001");

  REQUIRE_THROWS_AS(format_date(2023, 2, 29, 0), ValueError);  // 2023 is not a leap year
  REQUIRE_THROWS_WITH(format_date(2023, 2, 29, 0), Contains("2023-02-29"));
  REQUIRE_NOTHROW(format_date(2024, 2, 29, 0));
  REQUIRE_THROWS_WITH(format_date(2026, 4, 31, 1), Contains("2026-04-31"));
  REQUIRE_THROWS_WITH(format_date(1949, 12, 31, 1), Contains("1949-12-31") && Contains("1950"));
  REQUIRE_THROWS_WITH(format_date(2050, 1, 1, 1), Contains("2050-01-01"));
  REQUIRE_THROWS_WITH(format_date(2026, 13, 1, 1), Contains("2026-13-01"));
  REQUIRE_THROWS_WITH(format_date(2026, 11, 21, 14), Contains("format 14"));
  REQUIRE_THROWS_WITH(format_date(2026, 11, 21, -1), Contains("format -1"));
}

TEST_CASE("dates: character tokens and alignments by hand", "[tasks][dates]") {
  Example ex = date_example(2026, 11, 21, 0);  // "saturday, 21 november 2026"
  REQUIRE(join(ex.src, "") == "saturday,_21_november_2026");
  REQUIRE(ex.src.size() == 26);
  REQUIRE(join(ex.tgt, "") == "2026-11-21");
  // Year digits at 22..25, day digits at 10..11; month name, separators: nothing to copy.
  REQUIRE(ex.align == align_of({22, 23, 24, 25, -1, -1, -1, -1, 10, 11}));

  ex = date_example(2026, 11, 21, 5);  // "11/21/26": the century is not in the source
  REQUIRE(ex.align == align_of({-1, -1, 6, 7, -1, 0, 1, -1, 3, 4}));
  ex = date_example(2026, 11, 21, 8);  // ISO to ISO: every character is a copy
  REQUIRE(ex.align == align_of({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  ex = date_example(1999, 5, 5, 1);  // "5 may 1999": the day's padding zero is not a copy
  REQUIRE(join(ex.src, "") == "5_may_1999");
  REQUIRE(ex.align == align_of({6, 7, 8, 9, -1, -1, -1, -1, -1, 0}));
  ex = date_example(1950, 1, 1, 7);  // "01.01.1950"
  REQUIRE(ex.align == align_of({6, 7, 8, 9, -1, 3, 4, -1, 0, 1}));
}

TEST_CASE("dates: every source string names one date (the formats are unambiguous)",
          "[tasks][dates]") {
  // All 36525 dates x 14 formats give distinct strings but for May, whose abbreviation is its
  // name: "may 5, 1999" is both "month d, yyyy" and "mon d, yyyy" (of the same date). The
  // generated pairs below are read back to a single date by an independent reader.
  std::unordered_set<std::string> all;
  int dates = 0;
  for (int y = kDateMinYear; y <= kDateMaxYear; ++y)
    for (int m = 1; m <= 12; ++m)
      for (int d = 1; d <= month_days(y, m); ++d, ++dates)
        for (int f = 0; f < num_date_formats(); ++f) all.insert(format_date(y, m, d, f));
  REQUIRE(dates == 36525);
  REQUIRE(all.size() == size_t(36525) * 14 - 31 * 100);
  REQUIRE(format_date(1999, 5, 5, 2) == format_date(1999, 5, 5, 3));
}

TEST_CASE("dates: generated pairs are read back by an independent parser", "[tasks][dates]") {
  TaskConfig cfg{TaskKind::dates};
  cfg.train = 3000, cfg.valid = 0, cfg.test = 0;
  std::map<int, int> per_format;
  for (const auto& ex : make_task(cfg).train) {
    const std::string text = untokenize_chars(ex.src);
    INFO(text);
    // The target is a real ISO date in range.
    const std::string iso = join(ex.tgt, "");
    REQUIRE(ex.tgt.size() == 10);
    std::vector<std::string> g;
    REQUIRE(match(iso, "####-##-##", g));
    const int y = std::stoi(g[1]), m = std::stoi(g[2]), d = std::stoi(g[3]);
    REQUIRE(y >= 1950);
    REQUIRE(y <= 2049);
    REQUIRE(m >= 1);
    REQUIRE(m <= 12);
    REQUIRE(d >= 1);
    REQUIRE(d <= month_days(y, m));
    // The source reads as the target date and nothing else (weekday names included); only a May
    // date in "month d, yyyy" also reads as "mon d, yyyy".
    auto readings = read_human_date(text);
    REQUIRE(!readings.empty());
    REQUIRE(readings.size() == (readings[0].format == 2 && m == 5 ? 2u : 1u));
    for (const auto& r : readings) {
      REQUIRE(r.y == y);
      REQUIRE(r.m == m);
      REQUIRE(r.d == d);
      ++per_format[r.format];
    }
    // An aligned target character is a copy of its source character.
    for (size_t t = 0; t < 10; ++t)
      if (ex.align[t] >= 0) REQUIRE(ex.src[ex.align[t]] == ex.tgt[t]);
    // Year digits are always copied (two of them for yy).
    REQUIRE(ex.align[2] >= 0);
    REQUIRE(ex.align[3] >= 0);
  }
  REQUIRE(per_format.size() == 14);  // every format occurs
  // The reader itself rejects a wrong weekday, a wrong ordinal suffix, a padded day, a bad date.
  REQUIRE(read_human_date("saturday, 21 november 2026").size() == 1);
  REQUIRE(read_human_date("friday, 21 november 2026").empty());
  REQUIRE(read_human_date("the 21th of november, 2026").empty());
  REQUIRE(read_human_date("05 may 1999").empty());
  REQUIRE(read_human_date("02/30/2024").empty());
  for (auto [f, n] : per_format) REQUIRE(n > 100);  // 3000 / 14 ~ 214 each
}

// ================================================================================================
// grammar.

TEST_CASE("grammar: hand-written translations and alignments", "[tasks][grammar]") {
  struct Case {
    const char *en, *fr;
    std::vector<int32_t> align;
  };
  // Derived by hand from the rules at the top of the grammar generator.
  const std::vector<Case> cases = {
      {"the big red house", "la grande maison rouge", {0, 1, 3, 2}},
      {"the european economic area", "la zone economique europeenne", {0, 3, 2, 1}},
      {"the united states", "les etats unis", {0, 2, 1}},
      {"an old woman", "une vieille femme", {0, 1, 2}},
      {"a european car", "une voiture europeenne", {0, 2, 1}},
      {"the small white cats see the old birds",
       "les petits chats blancs voient les vieux oiseaux",
       {0, 1, 3, 2, 4, 5, 6, 7}},
      {"the king does not see the queen", "le roi ne voit pas la reine", {0, 1, 3, 4, 3, 5, 6}},
      {"the united states sells some old horses",
       "les etats unis vendent des vieux chevaux",
       {0, 2, 1, 3, 4, 5, 6}},
      {"cats find my black hats in the garden",
       "des chats trouvent mes chapeaux noirs dans le jardin",
       {-1, 0, 1, 2, 4, 3, 5, 6, 7}},
      {"the beautiful french women do not paint a post office",
       "les belles femmes francaises ne peignent pas un bureau de poste",
       {0, 1, 3, 2, 5, 6, 5, 7, 9, -1, 8}},
      {"this happy french girl meets these rich kings",
       "cette fille francaise heureuse rencontre ces rois riches",
       {0, 3, 2, 1, 4, 5, 7, 6}},
      {"my green bottle carries a mouse under this apple tree",
       "ma bouteille verte porte une souris sous ce pommier",
       {0, 2, 1, 3, 4, 5, 6, 7, 9}},
      {"the mice watch the prime minister",
       "les souris regardent le premier ministre",
       {0, 1, 2, 3, 4, 5}},
  };
  for (const auto& c : cases) {
    INFO(c.en);
    Example ex = translate_grammar(split_words(c.en));
    REQUIRE(join(ex.src) == c.en);
    REQUIRE(join(ex.tgt) == c.fr);
    REQUIRE(ex.align == c.align);
  }
}

TEST_CASE("grammar: English outside the grammar is rejected naming the word", "[tasks][grammar]") {
  auto translate = [](const char* en) { return translate_grammar(split_words(en)); };
  REQUIRE_THROWS_AS(translate("the cats sees the dog"), ValueError);
  REQUIRE_THROWS_WITH(translate("the cats sees the dog"),
                      Contains("word 2 ('sees')") && Contains("plural verb"));
  REQUIRE_THROWS_WITH(translate("the cat does not sees the dog"), Contains("('sees')"));
  REQUIRE_THROWS_WITH(translate("the cat do not see the dog"), Contains("'does'"));
  REQUIRE_THROWS_WITH(translate("a cats"), Contains("plural noun"));
  REQUIRE_THROWS_WITH(translate("a old cat"), Contains("'an'"));
  REQUIRE_THROWS_WITH(translate("an cat"), Contains("'a'"));
  REQUIRE_THROWS_WITH(translate("the big"), Contains("a noun"));
  REQUIRE_THROWS_WITH(translate("the cat sees the dog today"), Contains("('today')"));
  REQUIRE_THROWS_WITH(translate("a united states"), Contains("united states"));
  REQUIRE_THROWS_WITH(translate("cat sees the dog"), Contains("('cat')"));
  REQUIRE_THROWS_AS(translate(""), ValueError);
}

TEST_CASE("grammar: generated pairs have valid, mostly non-monotonic alignments",
          "[tasks][grammar]") {
  TaskConfig cfg{TaskKind::grammar};
  cfg.valid = 0, cfg.test = 0;  // 20000 train pairs
  Splits s = make_task(cfg);
  int non_monotonic = 0, negated = 0, phrases = 0;
  size_t tgt_tokens = 0, aligned = 0;
  std::map<size_t, int> lengths;
  for (const auto& ex : s.train) {
    INFO(join(ex.src) << " => " << join(ex.tgt));
    require_valid_alignment(ex);
    REQUIRE(ex.src.size() >= 4);
    REQUIRE(ex.src.size() <= 16);
    ++lengths[ex.src.size()];
    non_monotonic += !is_monotonic(ex.align);
    tgt_tokens += ex.tgt.size();
    for (size_t t = 0; t < ex.tgt.size(); ++t) {
      if (ex.align[t] < 0) {
        // Only a bare plural's article and the "de" of "bureau de poste" have no English word.
        const bool bare_plural = ex.tgt[t] == "des";
        const bool post_office_de = ex.tgt[t] == "de" && t > 0 && ex.tgt[t - 1] == "bureau";
        REQUIRE((bare_plural || post_office_de));
        continue;
      }
      ++aligned;
    }
    // Negation shows on both sides: "ne" and "pas" exactly when "not".
    const bool has_not = std::count(ex.src.begin(), ex.src.end(), "not") == 1;
    REQUIRE(has_not == (std::count(ex.tgt.begin(), ex.tgt.end(), "ne") == 1));
    REQUIRE(has_not == (std::count(ex.tgt.begin(), ex.tgt.end(), "pas") == 1));
    negated += has_not;
    phrases += std::count(ex.src.begin(), ex.src.end(), "united") +
               std::count(ex.src.begin(), ex.src.end(), "area");
    // Consistency: translating the English again gives the same pair.
    Example again = translate_grammar(ex.src);
    REQUIRE(again.tgt == ex.tgt);
    REQUIRE(again.align == ex.align);
  }
  const double frac_non_monotonic = double(non_monotonic) / s.train.size();
  const double frac_aligned = double(aligned) / tgt_tokens;
  WARN("grammar: " << 100 * frac_non_monotonic << "% non-monotonic, " << 100 * frac_aligned
                   << "% of target tokens aligned, " << negated << " negated, " << phrases
                   << " with united/area expressions; source lengths 4.."
                   << lengths.rbegin()->first);
  REQUIRE(frac_non_monotonic > 0.3);
  REQUIRE(frac_aligned > 0.95);
  REQUIRE(negated > 2000);
  REQUIRE(phrases > 200);
  REQUIRE(lengths.size() >= 10);  // a spread of sentence lengths
}
