// Preprocess: tokenising in the three modes, and the JSON kept in checkpoints.
#include "tapestry/models/preprocess.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "tapestry/core/errors.h"

namespace tapestry::models {

namespace {
constexpr const char* kSpace = "_";
const char* mode_name(Preprocess::Mode m) {
  switch (m) {
    case Preprocess::Mode::words:
      return "words";
    case Preprocess::Mode::chars:
      return "chars";
    case Preprocess::Mode::tutorial:
      return "tutorial";
  }
  return "?";
}
}  // namespace

std::vector<std::string> Preprocess::tokenize(std::string_view line) const {
  switch (mode) {
    case Mode::words:
      return models::tokenize(line, text);
    case Mode::tutorial:
      return models::tokenize(tutorial_normalize(line), {});
    case Mode::chars: {
      std::vector<std::string> out;
      for (char32_t c : utf8_decode(line)) out.push_back(c == ' ' ? kSpace : utf8_encode({c}));
      return out;
    }
  }
  return {};
}

std::string Preprocess::detokenize(const std::vector<std::string>& tokens) const {
  std::string s;
  for (const auto& t : tokens) {
    if (mode == Mode::chars) {
      s += t == kSpace ? " " : t;
    } else {
      if (!s.empty()) s += ' ';
      s += t;
    }
  }
  return s;
}

std::string Preprocess::to_json() const {
  return nlohmann::json{{"mode", mode_name(mode)},
                        {"lowercase", text.lowercase},
                        {"split_punctuation", text.split_punctuation}}
      .dump();
}

Preprocess Preprocess::from_json(std::string_view json) {
  Preprocess p;
  try {
    auto j = nlohmann::json::parse(json);
    const std::string m = j.at("mode").get<std::string>();
    if (m == "words")
      p.mode = Mode::words;
    else if (m == "chars")
      p.mode = Mode::chars;
    else if (m == "tutorial")
      p.mode = Mode::tutorial;
    else
      throw ValueError(
          fmt::format("preprocess: unknown mode '{}' (valid: words, chars, tutorial)", m));
    p.text.lowercase = j.at("lowercase").get<bool>();
    p.text.split_punctuation = j.at("split_punctuation").get<bool>();
  } catch (const nlohmann::json::exception& e) {
    throw ValueError(fmt::format("preprocess: {}", e.what()));
  }
  return p;
}

std::string Preprocess::describe() const {
  if (mode == Mode::chars) return "characters";
  if (mode == Mode::tutorial) return "the PyTorch tutorial's normalisation";
  std::string s = "words";
  if (text.lowercase) s += ", lower-cased";
  if (text.split_punctuation) s += ", punctuation split";
  return s;
}

}  // namespace tapestry::models
