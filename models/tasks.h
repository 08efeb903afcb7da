// Toy translation tasks (copy, reverse, sort, dates, grammar) that generate seeded, disjoint
// splits.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tapestry/models/example.h"

namespace tapestry::models {

enum class TaskKind { copy, reverse, sort, dates, grammar };

const char* task_name(TaskKind kind);
// Throws ValueError listing the valid names.
TaskKind parse_task(std::string_view name);

// min_len, max_len and vocab apply to copy, reverse and sort only; dates and grammar ignore them
// (their lengths follow from the formats and the grammar), but every field is validated.
struct TaskConfig {
  TaskKind kind;
  int64_t min_len = 5, max_len = 25;
  int64_t vocab = 20;  // symbols for copy/reverse/sort
  int64_t train = 20000, valid = 1000, test = 1000;
  uint64_t seed = 1;
};

// Throws ValueError naming the field and its value.
void validate_task_config(const TaskConfig& cfg);

// The same config gives identical splits. No source sentence occurs twice, within a split or
// across splits. The test split is drawn first, then valid, then train, so the held-out sets do
// not change when only the train size does. Throws ValueError when the task has fewer distinct
// sources than train + valid + test (or sampling stops finding new ones), saying how many.
Splits make_task(const TaskConfig& cfg);

// How many distinct source sentences the task can produce under cfg (saturates at INT64_MAX).
int64_t task_source_count(const TaskConfig& cfg);

std::string join(const std::vector<std::string>& tokens, std::string_view sep = " ");
// Splits on runs of spaces (convenient for writing grammar sentences in tests and tools).
std::vector<std::string> split_words(std::string_view text);

// ---- copy, reverse, sort ----------------------------------------------------------------------
// Symbol `index` of a vocabulary of `vocab`: "a".."z" when vocab <= 26, else "s" and the index
// zero-padded to a fixed width ("s00".."s99" for 100). Either way string order is index order,
// which is the order the sort task sorts by.
std::string symbol_token(int64_t index, int64_t vocab);

// ---- dates: human date formats -> ISO "yyyy-mm-dd" --------------------------------------------
// Character-level tokens on both sides; a space is the token kDateSpace. Dates run from
// 1950-01-01 to 2049-12-31, so a two-digit year yy means 19yy for yy >= 50 and 20yy otherwise.
inline constexpr const char* kDateSpace = "_";
inline constexpr int kDateMinYear = 1950, kDateMaxYear = 2049;

int num_date_formats();
// A pattern such as "weekday, d month yyyy".
const char* date_format_name(int format);
// The date in the given format as plain text with real spaces, e.g. "saturday, 21 november 2026".
// Throws ValueError for a date outside the calendar or the year range, or an unknown format.
std::string format_date(int year, int month, int day, int format);
// The dates example for that date and format (character tokens, ISO target, alignment).
Example date_example(int year, int month, int day, int format);
// One token per character, a space becoming kDateSpace.
std::vector<std::string> char_tokens(std::string_view text);

// ---- grammar: a small English -> French-like language (rules in task_grammar.cpp) -------------
// Translates an English sentence (NP verb NP [preposition NP]) or a lone noun phrase of the
// grammar, with the true alignment. Throws ValueError naming the first word that does not fit.
Example translate_grammar(const std::vector<std::string>& english);

}  // namespace tapestry::models
