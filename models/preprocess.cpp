// Preprocess: tokenising in the four modes, and the JSON kept in checkpoints.
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
    case Preprocess::Mode::subword:
      return "subword";
  }
  return "?";
}

std::vector<std::string> split(const Preprocess& p, std::string_view line, const Subword* sp) {
  switch (p.mode) {
    case Preprocess::Mode::words:
      return models::tokenize(line, p.text);
    case Preprocess::Mode::tutorial:
      return models::tokenize(tutorial_normalize(line), {});
    case Preprocess::Mode::chars: {
      std::vector<std::string> out;
      for (char32_t c : utf8_decode(line)) out.push_back(c == ' ' ? kSpace : utf8_encode({c}));
      return out;
    }
    case Preprocess::Mode::subword:
      if (sp == nullptr) throw ValueError("preprocess: a subword model without its segmentation");
      return sp->encode(p.subword_text(line));
  }
  return {};
}

std::string join(const Preprocess& p, const std::vector<std::string>& tokens, const Subword* sp) {
  if (p.mode == Preprocess::Mode::subword) {
    if (sp == nullptr) throw ValueError("preprocess: a subword model without its segmentation");
    return sp->decode(tokens);
  }
  if (p.mode == Preprocess::Mode::chars) {
    std::string s;
    for (const auto& t : tokens) s += t == kSpace ? " " : t;
    return s;
  }
  // The tutorial's tokens are space-separated words and marks, as its own output was.
  return detokenize(tokens, p.mode == Preprocess::Mode::words ? p.text : TextOptions{});
}

std::shared_ptr<const Subword> subword_from_json(const nlohmann::json& j, SubwordKind kind) {
  return std::make_shared<const Subword>(
      Subword::from_proto(base64_decode(j.get<std::string>()), kind));
}
}  // namespace

std::string Preprocess::subword_text(std::string_view line) const {
  return text.lowercase ? to_lower(line) : std::string(line);
}

std::vector<std::string> Preprocess::tokenize_source(std::string_view line) const {
  return split(*this, line, src_subword.get());
}
std::vector<std::string> Preprocess::tokenize_target(std::string_view line) const {
  return split(*this, line, tgt_subword.get());
}
std::string Preprocess::detokenize_target(const std::vector<std::string>& tokens) const {
  return join(*this, tokens, tgt_subword.get());
}
std::string Preprocess::detokenize_source(const std::vector<std::string>& tokens) const {
  return join(*this, tokens, src_subword.get());
}

Vocab subword_vocab(const Subword& model) {
  Vocab v;
  const std::vector<std::string> pieces = model.pieces();
  for (size_t id = Vocab::kSpecials; id < pieces.size(); ++id)
    if (v.add(pieces[id]) != static_cast<int32_t>(id))
      throw ValueError(fmt::format("subword: piece {} '{}' appears twice", id, pieces[id]));
  return v;
}

Vocab Preprocess::source_vocab() const {
  if (!src_subword) throw ValueError("preprocess: only a subword model has a fixed vocabulary");
  return subword_vocab(*src_subword);
}
Vocab Preprocess::target_vocab() const {
  if (!tgt_subword) throw ValueError("preprocess: only a subword model has a fixed vocabulary");
  return subword_vocab(*tgt_subword);
}

std::string Preprocess::to_json() const {
  nlohmann::json j{{"mode", mode_name(mode)},
                   {"lowercase", text.lowercase},
                   {"split_punctuation", text.split_punctuation}};
  if (mode == Mode::subword && src_subword && tgt_subword) {
    j["subword"] = {{"kind", subword_kind_name(src_subword->kind())},
                    {"joint", joint()},
                    {"source", base64_encode(src_subword->proto())}};
    if (!joint()) j["subword"]["target"] = base64_encode(tgt_subword->proto());
  }
  return j.dump();
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
    else if (m == "subword")
      p.mode = Mode::subword;
    else
      throw ValueError(
          fmt::format("preprocess: unknown mode '{}' (valid: words, chars, tutorial, subword)", m));
    p.text.lowercase = j.at("lowercase").get<bool>();
    p.text.split_punctuation = j.at("split_punctuation").get<bool>();
    if (p.mode == Mode::subword) {
      const auto& sw = j.at("subword");
      const SubwordKind kind = parse_subword_kind(sw.at("kind").get<std::string>());
      p.src_subword = subword_from_json(sw.at("source"), kind);
      p.tgt_subword =
          sw.at("joint").get<bool>() ? p.src_subword : subword_from_json(sw.at("target"), kind);
    }
  } catch (const nlohmann::json::exception& e) {
    throw ValueError(fmt::format("preprocess: {}", e.what()));
  } catch (const ValueError& e) {
    const std::string what = e.what();
    throw ValueError(what.rfind("preprocess: ", 0) == 0 ? what : "preprocess: " + what);
  }
  return p;
}

std::string Preprocess::describe() const {
  if (mode == Mode::chars) return "characters";
  if (mode == Mode::tutorial) return "the PyTorch tutorial's normalisation";
  if (mode == Mode::subword) {
    if (!src_subword || !tgt_subword) return "subwords";
    const auto count = [](const Subword& s) { return s.pieces().size(); };
    const std::string sizes = joint() ? fmt::format("{} joint pieces", count(*src_subword))
                                      : fmt::format("{} source and {} target pieces",
                                                    count(*src_subword), count(*tgt_subword));
    return fmt::format("SentencePiece {}, {}, {}", subword_kind_name(src_subword->kind()), sizes,
                       text.lowercase ? "lower-cased" : "cased");
  }
  std::string s = "words";
  if (text.lowercase) s += ", lower-cased";
  if (text.split_punctuation) s += ", punctuation split";
  return s;
}

}  // namespace tapestry::models
