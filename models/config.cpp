// Seq2SeqConfig: validation and the JSON form kept in checkpoints.
#include "tapestry/models/config.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "tapestry/core/errors.h"

namespace tapestry::models {

const char* decoder_name(DecoderKind kind) {
  return kind == DecoderKind::bahdanau ? "bahdanau" : "luong";
}

DecoderKind parse_decoder(std::string_view name) {
  if (name == "bahdanau") return DecoderKind::bahdanau;
  if (name == "luong") return DecoderKind::luong;
  throw ValueError(fmt::format("unknown decoder '{}' (valid: bahdanau, luong)", name));
}

void Seq2SeqConfig::validate() const {
  auto require = [](bool ok, const std::string& what) {
    if (!ok) throw ValueError("model config: " + what);
  };
  require(src_vocab > 4 && tgt_vocab > 4,
          fmt::format("vocabularies need more than the 4 specials (source {}, target {})",
                      src_vocab, tgt_vocab));
  require(emb >= 1, fmt::format("emb must be at least 1, got {}", emb));
  require(hidden >= 1, fmt::format("hidden must be at least 1, got {}", hidden));
  require(layers >= 1 && layers <= 8, fmt::format("layers must be 1 to 8, got {}", layers));
  require(attn_size >= 0, fmt::format("attn_size must be 0 (= hidden) or more, got {}", attn_size));
  require(window >= 1, fmt::format("window must be at least 1, got {}", window));
  require(dropout >= 0 && dropout < 1, fmt::format("dropout must be in [0, 1), got {}", dropout));
  using nn::AttentionKind;
  const bool same_size = attention == AttentionKind::dot ||
                         attention == AttentionKind::scaled_dot ||
                         attention == AttentionKind::cosine;
  require(!same_size || key_size() == hidden,
          fmt::format("{} attention compares the decoder state (H = {}) with the encoder states "
                      "(K = {}) directly, so they must be the same size: use a unidirectional "
                      "encoder, or general or bahdanau attention",
                      nn::attention_name(attention), hidden, key_size()));
}

std::string Seq2SeqConfig::to_json() const {
  nlohmann::json j = {{"src_vocab", src_vocab},
                      {"tgt_vocab", tgt_vocab},
                      {"emb", emb},
                      {"hidden", hidden},
                      {"layers", layers},
                      {"bidirectional", bidirectional},
                      {"cell", nn::cell_name(cell)},
                      {"attention", nn::attention_name(attention)},
                      {"decoder", decoder_name(decoder)},
                      {"attn_size", attn_size},
                      {"window", window},
                      {"dropout", dropout},
                      {"deep_output", deep_output},
                      {"seed", seed}};
  return j.dump();
}

Seq2SeqConfig Seq2SeqConfig::from_json(std::string_view text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for 1e400
    throw ValueError(fmt::format("model config: not valid JSON: {}", e.what()));
  }
  if (!j.is_object()) throw ValueError("model config: expected a JSON object");
  // nlohmann's get<int64_t>() converts a floating-point value unchecked (undefined behaviour out of
  // range, and an integer too long for 64 bits is parsed as one), so the sizes must be integers.
  auto integer = [&](const char* key) -> const nlohmann::json& {
    const nlohmann::json& v = j.at(key);
    if (!v.is_number_integer())
      throw ValueError(fmt::format("model config: '{}' is {}, not an integer", key, v.dump()));
    return v;
  };
  Seq2SeqConfig c;
  try {
    c.src_vocab = integer("src_vocab").get<int64_t>();
    c.tgt_vocab = integer("tgt_vocab").get<int64_t>();
    c.emb = integer("emb").get<int64_t>();
    c.hidden = integer("hidden").get<int64_t>();
    c.layers = integer("layers").get<int>();
    c.bidirectional = j.at("bidirectional").get<bool>();
    c.cell = nn::parse_cell(j.at("cell").get<std::string>());
    c.attention = nn::parse_attention(j.at("attention").get<std::string>());
    c.decoder = parse_decoder(j.at("decoder").get<std::string>());
    c.attn_size = integer("attn_size").get<int64_t>();
    c.window = integer("window").get<int64_t>();
    c.dropout = j.at("dropout").get<double>();
    c.deep_output = j.at("deep_output").get<bool>();
    c.seed = integer("seed").get<uint64_t>();
  } catch (const nlohmann::json::exception& e) {
    throw ValueError(fmt::format("model config: {}", e.what()));
  }
  c.validate();
  return c;
}

std::string Seq2SeqConfig::summary() const {
  return fmt::format("{}{} {}x{} emb {}, {} attention, {} decoder", nn::cell_name(cell),
                     bidirectional ? " bi" : "", layers, hidden, emb, nn::attention_name(attention),
                     decoder_name(decoder));
}

}  // namespace tapestry::models
