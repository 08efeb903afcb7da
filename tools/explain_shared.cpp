// Explain's helpers shared by its renderers: shapes, numbers, summaries, groups and names as text.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "tapestry/core/errors.h"
#include "tools/explain.h"

namespace tapestry::cli {

std::string shape_text(std::span<const int64_t> shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += fmt::format("{}{}", i ? "," : "", shape[i]);
  return s + ")";
}

std::string num(double v) {
  if (v == 0) return "0";
  return fmt::format("{:.4g}", v);
}

double norm(std::span<const double> v) {
  double s = 0;
  for (double x : v) s += x * x;
  return std::sqrt(s);
}

std::string summary_text(std::span<const double> v) {
  if (v.empty()) return "(empty)";
  double lo = v[0], hi = v[0], sum = 0;
  for (double x : v) {
    lo = std::min(lo, x);
    hi = std::max(hi, x);
    sum += x;
  }
  return fmt::format("min {}  max {}  mean {}  norm {}", num(lo), num(hi),
                     num(sum / static_cast<double>(v.size())), num(norm(v)));
}

bool in_groups(const std::string& region, std::span<const std::string> groups) {
  if (groups.empty()) return true;
  for (const auto& g : groups)
    if (region.rfind(g, 0) == 0) return true;
  return false;
}

std::string region_title(const std::string& region) {
  return region.empty() ? "(no region)" : region;
}

std::string element_text(const std::vector<int64_t>& shape, int64_t flat) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  std::string s = "[";
  for (size_t d = 0; d < idx.size(); ++d) s += fmt::format("{}{}", d ? "," : "", idx[d]);
  return s + "]";
}

std::string short_param(const std::string& name) {
  for (const char* prefix : {"encoder.", "decoder."})
    if (name.rfind(prefix, 0) == 0) return name.substr(std::string(prefix).size());
  return name;
}

void check_teacher_forced(const models::Vocab& tgt, std::span<const std::string> target,
                          int64_t step) {
  for (const auto& w : target)
    if (!tgt.contains(w) || tgt.id(w) < models::Vocab::kEos)
      throw ValueError(
          fmt::format("explain: the target word '{}' is not in the target vocabulary ({})", w,
                      vocab_list(tgt)));
  const auto steps = static_cast<int64_t>(target.size()) + 1;
  if (step < 0 || step >= steps)
    throw ValueError(fmt::format(
        "explain: step {} is outside the sentence: its {} target words make steps 0 to {} (the "
        "last writes <eos>)",
        step, target.size(), steps - 1));
}

}  // namespace tapestry::cli
