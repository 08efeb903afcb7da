// Preprocess: how a model's text becomes tokens and back (words, characters, or the PyTorch
// tutorial's normalisation), kept in the checkpoint so translation reads input as training did.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tapestry/models/text.h"

namespace tapestry::models {

struct Preprocess {
  enum class Mode { words, chars, tutorial };
  Mode mode = Mode::words;
  TextOptions text;  // words mode only

  // A line of raw text -> tokens. chars: one token per character, a space becoming "_".
  std::vector<std::string> tokenize(std::string_view line) const;
  // Tokens -> a line (words joined by spaces; characters joined, "_" back to a space).
  std::string detokenize(const std::vector<std::string>& tokens) const;

  std::string to_json() const;
  static Preprocess from_json(std::string_view json);  // throws ValueError
  std::string describe() const;                        // "words, lower-cased, punctuation split"
};

}  // namespace tapestry::models
