// Vocab: tokens <-> ids, with the specials <pad> 0, <bos> 1, <eos> 2 and <unk> 3.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tapestry::models {

class Vocab {
 public:
  static constexpr int32_t kPad = 0, kBos = 1, kEos = 2, kUnk = 3;
  static constexpr int32_t kSpecials = 4;

  Vocab();  // the specials only

  // Adds a token if it is new; returns its id.
  int32_t add(std::string_view token);
  // The id of a token, or kUnk for one not in the vocabulary.
  int32_t id(std::string_view token) const;
  bool contains(std::string_view token) const { return index_.count(std::string(token)) > 0; }
  // Throws IndexError for an id outside [0, size).
  const std::string& token(int32_t id) const;
  int64_t size() const { return static_cast<int64_t>(tokens_.size()); }
  const std::vector<std::string>& tokens() const { return tokens_; }

  std::vector<int32_t> encode(std::span<const std::string> tokens) const;
  // The tokens of `ids` up to the first <eos>, without <bos> and <pad>.
  std::vector<std::string> decode(std::span<const int32_t> ids) const;

  // A JSON array of the tokens in id order (for a checkpoint's metadata), and back. from_json
  // throws ValueError when the text is not such an array or does not start with the specials.
  std::string to_json() const;
  static Vocab from_json(std::string_view json);

 private:
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int32_t> index_;
};

// Counts tokens, then keeps those seen at least min_freq times, most frequent first (ties in order
// of first appearance), at most max_size entries in all including the specials (0: no limit).
class VocabBuilder {
 public:
  void count(std::span<const std::string> tokens);
  Vocab build(int64_t min_freq = 1, int64_t max_size = 0) const;

 private:
  std::unordered_map<std::string, int64_t> counts_;
  std::vector<std::string> order_;  // first appearance
};

}  // namespace tapestry::models
