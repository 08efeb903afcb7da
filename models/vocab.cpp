// Vocab: the id table, frequency-ranked building and JSON round trip.
#include "tapestry/models/vocab.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "tapestry/core/errors.h"

namespace tapestry::models {

namespace {
constexpr const char* kSpecialTokens[Vocab::kSpecials] = {"<pad>", "<bos>", "<eos>", "<unk>"};
}

Vocab::Vocab() {
  for (const char* t : kSpecialTokens) add(t);
}

int32_t Vocab::add(std::string_view token) {
  auto [it, inserted] = index_.emplace(std::string(token), static_cast<int32_t>(tokens_.size()));
  if (inserted) tokens_.emplace_back(token);
  return it->second;
}

int32_t Vocab::id(std::string_view token) const {
  auto it = index_.find(std::string(token));
  return it == index_.end() ? kUnk : it->second;
}

const std::string& Vocab::token(int32_t id) const {
  if (id < 0 || id >= size())
    throw IndexError(fmt::format("vocab: id {} outside [0, {})", id, size()));
  return tokens_[static_cast<size_t>(id)];
}

std::vector<int32_t> Vocab::encode(std::span<const std::string> tokens) const {
  std::vector<int32_t> ids;
  ids.reserve(tokens.size());
  for (const auto& t : tokens) ids.push_back(id(t));
  return ids;
}

std::vector<std::string> Vocab::decode(std::span<const int32_t> ids) const {
  std::vector<std::string> out;
  for (int32_t i : ids) {
    if (i == kEos) break;
    if (i == kBos || i == kPad) continue;
    out.push_back(token(i));
  }
  return out;
}

std::string Vocab::to_json() const {
  return nlohmann::json(tokens_).dump();
}

Vocab Vocab::from_json(std::string_view text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for 1e400
    throw ValueError(fmt::format("vocab: not valid JSON: {}", e.what()));
  }
  if (!j.is_array()) throw ValueError("vocab: expected a JSON array of tokens");
  Vocab v;
  for (size_t i = 0; i < j.size(); ++i) {
    if (!j[i].is_string()) throw ValueError(fmt::format("vocab: entry {} is not a string", i));
    const std::string t = j[i].get<std::string>();
    if (i < static_cast<size_t>(kSpecials)) {
      if (t != kSpecialTokens[i])
        throw ValueError(fmt::format("vocab: entry {} is '{}', expected the special '{}'", i, t,
                                     kSpecialTokens[i]));
      continue;
    }
    if (v.contains(t)) throw ValueError(fmt::format("vocab: token '{}' appears twice", t));
    v.add(t);
  }
  if (v.size() != static_cast<int64_t>(j.size()) || j.size() < static_cast<size_t>(kSpecials))
    throw ValueError("vocab: the array must start with <pad>, <bos>, <eos>, <unk>");
  return v;
}

void VocabBuilder::count(std::span<const std::string> tokens) {
  for (const auto& t : tokens) {
    auto [it, inserted] = counts_.emplace(t, 0);
    if (inserted) order_.push_back(t);
    ++it->second;
  }
}

Vocab VocabBuilder::build(int64_t min_freq, int64_t max_size) const {
  std::vector<const std::string*> kept;
  for (const auto& t : order_)
    if (counts_.at(t) >= min_freq) kept.push_back(&t);
  std::stable_sort(kept.begin(), kept.end(), [&](const std::string* a, const std::string* b) {
    return counts_.at(*a) > counts_.at(*b);
  });
  Vocab v;
  for (const std::string* t : kept) {
    if (max_size > 0 && v.size() >= max_size) break;
    v.add(*t);
  }
  return v;
}

}  // namespace tapestry::models
