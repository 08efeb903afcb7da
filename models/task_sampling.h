// Internal to the toy tasks (models/tasks.cpp, task_dates.cpp, task_grammar.cpp): saturating
// counts, the distinct sampling into splits that every task shares, and the entry points of the
// dates and grammar generators.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <limits>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "tapestry/core/errors.h"
#include "tapestry/core/random.h"
#include "tapestry/models/tasks.h"

namespace tapestry::models::detail {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

inline int64_t sat_add(int64_t a, int64_t b) {
  return a > kInt64Max - b ? kInt64Max : a + b;
}
inline int64_t sat_mul(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  return a > kInt64Max / b ? kInt64Max : a * b;
}

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

// The dates task (models/task_dates.cpp): how many distinct sources it has, and its splits.
int64_t dates_capacity();
Splits make_dates_task(const TaskConfig& cfg);

// The grammar task (models/task_grammar.cpp): how many distinct sources it has, and its splits.
int64_t grammar_capacity();
Splits make_grammar_task(const TaskConfig& cfg);

}  // namespace tapestry::models::detail
