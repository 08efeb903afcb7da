// The dates task: a date in one of many human formats -> ISO "yyyy-mm-dd", character by character.
#include <fmt/format.h>

#include <array>
#include <string>
#include <vector>

#include "tapestry/core/errors.h"
#include "tapestry/core/random.h"
#include "tapestry/models/task_sampling.h"
#include "tapestry/models/tasks.h"

namespace tapestry::models {
using namespace detail;
namespace {

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

}  // namespace

namespace detail {

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

}  // namespace detail

// ================================================================================================
// Public API.

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

}  // namespace tapestry::models
