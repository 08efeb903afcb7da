// Toy translation tasks: the copy, reverse and sort generators, and what all tasks share (names,
// config checks, the dispatch to each generator); dates and grammar are in task_dates.cpp and
// task_grammar.cpp.
#include "tapestry/models/tasks.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <numeric>
#include <utility>

#include "tapestry/core/errors.h"
#include "tapestry/core/random.h"
#include "tapestry/models/task_sampling.h"

namespace tapestry::models {
using namespace detail;
namespace {

// Bounds that keep a config's memory and time sane; far above anything the models need.
constexpr int64_t kMaxSeqLen = 10000;
constexpr int64_t kMaxVocab = 1000000;
constexpr int64_t kMaxCount = 100000000;  // examples per split

constexpr std::array<std::pair<TaskKind, const char*>, 5> kTaskNames = {{
    {TaskKind::copy, "copy"},
    {TaskKind::reverse, "reverse"},
    {TaskKind::sort, "sort"},
    {TaskKind::dates, "dates"},
    {TaskKind::grammar, "grammar"},
}};

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

}  // namespace tapestry::models
