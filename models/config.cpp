// Seq2SeqConfig: validation and the JSON form kept in checkpoints.
#include "tapestry/models/config.h"

#include <fmt/format.h>

#include <limits>
#include <nlohmann/json.hpp>

#include "tapestry/core/errors.h"

namespace tapestry::models {

const char* arch_name(Arch arch) {
  return arch == Arch::rnn ? "rnn" : "transformer";
}

Arch parse_arch(std::string_view name) {
  if (name == "rnn") return Arch::rnn;
  if (name == "transformer") return Arch::transformer;
  throw ValueError(fmt::format("unknown arch '{}' (valid: rnn, transformer)", name));
}

const char* positions_name(Positions p) {
  return p == Positions::sinusoidal ? "sinusoidal" : "learned";
}

Positions parse_positions(std::string_view name) {
  if (name == "sinusoidal") return Positions::sinusoidal;
  if (name == "learned") return Positions::learned;
  throw ValueError(fmt::format("unknown positions '{}' (valid: sinusoidal, learned)", name));
}

int64_t Seq2SeqConfig::position_limit() const {
  return transformer() && positions == Positions::learned ? max_positions
                                                          : std::numeric_limits<int64_t>::max();
}

nn::TransformerLayerConfig Seq2SeqConfig::layer_config() const {
  nn::TransformerLayerConfig c;
  c.d_model = d_model;
  c.heads = heads;
  c.ffn = ffn;
  c.dropout = dropout;
  c.norm = norm;
  c.activation = activation;
  return c;
}

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
  require(src_vocab <= kMaxVocab && tgt_vocab <= kMaxVocab,
          fmt::format("vocabularies may hold at most {} tokens (source {}, target {})", kMaxVocab,
                      src_vocab, tgt_vocab));
  require(dropout >= 0 && dropout < 1, fmt::format("dropout must be in [0, 1), got {}", dropout));
  if (transformer()) {
    require(d_model >= 2 && d_model <= kMaxWidth,
            fmt::format("d_model must be 2 to {}, got {}", kMaxWidth, d_model));
    require(heads >= 1 && heads <= kMaxHeads,
            fmt::format("heads must be 1 to {}, got {}", kMaxHeads, heads));
    require(d_model % heads == 0,
            fmt::format("d_model {} must be a multiple of the {} heads", d_model, heads));
    require(positions != Positions::sinusoidal || d_model % 2 == 0,
            fmt::format("sinusoidal positions need an even d_model, got {}", d_model));
    require(ffn >= 1 && ffn <= kMaxWidth,
            fmt::format("ffn must be 1 to {}, got {}", kMaxWidth, ffn));
    require(enc_layers >= 1 && enc_layers <= kMaxLayers,
            fmt::format("enc_layers must be 1 to {}, got {}", kMaxLayers, enc_layers));
    require(dec_layers >= 1 && dec_layers <= kMaxLayers,
            fmt::format("dec_layers must be 1 to {}, got {}", kMaxLayers, dec_layers));
    require(max_positions >= 2 && max_positions <= kMaxPositions,
            fmt::format("max_positions must be 2 to {}, got {}", kMaxPositions, max_positions));
    return;
  }
  require(emb >= 1 && emb <= kMaxWidth, fmt::format("emb must be 1 to {}, got {}", kMaxWidth, emb));
  require(hidden >= 1 && hidden <= kMaxWidth,
          fmt::format("hidden must be 1 to {}, got {}", kMaxWidth, hidden));
  require(layers >= 1 && layers <= kMaxLayers,
          fmt::format("layers must be 1 to {}, got {}", kMaxLayers, layers));
  require(attn_size >= 0 && attn_size <= kMaxWidth,
          fmt::format("attn_size must be 0 (= hidden) to {}, got {}", kMaxWidth, attn_size));
  require(window >= 1 && window <= kMaxWindow,
          fmt::format("window must be 1 to {}, got {}", kMaxWindow, window));
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
  if (transformer()) {
    const nlohmann::json j = {{"arch", arch_name(arch)},
                              {"src_vocab", src_vocab},
                              {"tgt_vocab", tgt_vocab},
                              {"d_model", d_model},
                              {"heads", heads},
                              {"ffn", ffn},
                              {"enc_layers", enc_layers},
                              {"dec_layers", dec_layers},
                              {"norm", nn::norm_place_name(norm)},
                              {"activation", nn::activation_name(activation)},
                              {"positions", positions_name(positions)},
                              {"max_positions", max_positions},
                              {"share_embeddings", share_embeddings},
                              {"dropout", dropout},
                              {"seed", seed}};
    return j.dump();
  }
  // An RNN's config has no "arch" key: files written before the Transformer read the same.
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

namespace {

using Json = nlohmann::json;

// A JSON value for messages, cut short so that a huge bad value does not flood them.
std::string shown(const Json& v) {
  std::string s = v.dump(-1, ' ', false, Json::error_handler_t::replace);
  return s.size() > 40 ? s.substr(0, 37) + "..." : s;
}

// Reads the keys of a checkpoint's config, each checked for its JSON type and range first, so
// that no value from the file is used before it is known to be sensible.
class ConfigReader {
 public:
  explicit ConfigReader(const Json& j) : j_(j) {}

  const Json& at(const char* key) const {
    auto it = j_.find(key);
    if (it == j_.end()) throw ValueError(fmt::format("config has no \"{}\"", key));
    return *it;
  }

  // A whole number in [lo, hi]. 4.0 is refused too: the writer never writes one.
  int64_t integer(const char* key, int64_t lo, int64_t hi) const {
    const Json& v = at(key);
    if (!v.is_number_integer())
      throw ValueError(fmt::format("config.{}: {} is not an integer", key, shown(v)));
    // Compared as the type the parser chose: a value above INT64_MAX is unsigned only.
    const bool in_range = v.is_number_unsigned() ? v.get<uint64_t>() <= static_cast<uint64_t>(hi) &&
                                                       static_cast<int64_t>(v.get<uint64_t>()) >= lo
                                                 : v.get<int64_t>() >= lo && v.get<int64_t>() <= hi;
    if (!in_range)
      throw ValueError(
          fmt::format("config.{}: {} is out of range [{}, {}]", key, shown(v), lo, hi));
    return v.get<int64_t>();
  }

  uint64_t unsigned_integer(const char* key) const {
    const Json& v = at(key);
    if (!v.is_number_integer())
      throw ValueError(fmt::format("config.{}: {} is not an integer", key, shown(v)));
    if (!v.is_number_unsigned() && v.get<int64_t>() < 0)
      throw ValueError(fmt::format("config.{}: {} is out of range [0, {}]", key, shown(v),
                                   std::numeric_limits<uint64_t>::max()));
    return v.get<uint64_t>();
  }

  // A number in [lo, hi) (an integer such as 0 is a number too).
  double number(const char* key, double lo, double hi) const {
    const Json& v = at(key);
    if (!v.is_number())
      throw ValueError(fmt::format("config.{}: {} is not a number", key, shown(v)));
    const double x = v.get<double>();
    if (!(x >= lo && x < hi))
      throw ValueError(
          fmt::format("config.{}: {} is out of range [{}, {})", key, shown(v), lo, hi));
    return x;
  }

  bool boolean(const char* key) const {
    const Json& v = at(key);
    if (!v.is_boolean())
      throw ValueError(fmt::format("config.{}: {} is not true or false", key, shown(v)));
    return v.get<bool>();
  }

  // A name that `parse` accepts; its message (listing the valid names) is kept.
  template <class Parse>
  auto name(const char* key, Parse parse) const {
    const Json& v = at(key);
    if (!v.is_string())
      throw ValueError(fmt::format("config.{}: {} is not a string", key, shown(v)));
    try {
      return parse(v.get_ref<const std::string&>());
    } catch (const ValueError& e) {
      throw ValueError(fmt::format("config.{}: {}", key, e.what()));
    }
  }

 private:
  const Json& j_;
};

}  // namespace

Seq2SeqConfig Seq2SeqConfig::from_json(std::string_view text) {
  Json j;
  try {
    j = Json::parse(text);
  } catch (const Json::exception& e) {  // parse_error, or out_of_range for 1e400
    throw ValueError(fmt::format("model config: not valid JSON: {}", e.what()));
  }
  if (!j.is_object())
    throw ValueError(fmt::format("model config: expected a JSON object, got {}", shown(j)));
  const ConfigReader r(j);
  Seq2SeqConfig c;
  if (j.contains("arch"))
    c.arch = r.name("arch", [](const std::string& s) { return parse_arch(s); });
  if (c.transformer()) {
    c.src_vocab = r.integer("src_vocab", 5, kMaxVocab);
    c.tgt_vocab = r.integer("tgt_vocab", 5, kMaxVocab);
    c.d_model = r.integer("d_model", 2, kMaxWidth);
    c.heads = r.integer("heads", 1, kMaxHeads);
    c.ffn = r.integer("ffn", 1, kMaxWidth);
    c.enc_layers = static_cast<int>(r.integer("enc_layers", 1, kMaxLayers));
    c.dec_layers = static_cast<int>(r.integer("dec_layers", 1, kMaxLayers));
    c.norm = r.name("norm", [](const std::string& s) { return nn::parse_norm_place(s); });
    c.activation =
        r.name("activation", [](const std::string& s) { return nn::parse_activation(s); });
    c.positions = r.name("positions", [](const std::string& s) { return parse_positions(s); });
    c.max_positions = r.integer("max_positions", 2, kMaxPositions);
    c.share_embeddings = r.boolean("share_embeddings");
    c.dropout = r.number("dropout", 0, 1);
    c.seed = r.unsigned_integer("seed");
    c.validate();
    return c;
  }
  c.src_vocab = r.integer("src_vocab", 5, kMaxVocab);
  c.tgt_vocab = r.integer("tgt_vocab", 5, kMaxVocab);
  c.emb = r.integer("emb", 1, kMaxWidth);
  c.hidden = r.integer("hidden", 1, kMaxWidth);
  c.layers = static_cast<int>(r.integer("layers", 1, kMaxLayers));
  c.bidirectional = r.boolean("bidirectional");
  c.cell = r.name("cell", [](const std::string& s) { return nn::parse_cell(s); });
  c.attention = r.name("attention", [](const std::string& s) { return nn::parse_attention(s); });
  c.decoder = r.name("decoder", [](const std::string& s) { return parse_decoder(s); });
  c.attn_size = r.integer("attn_size", 0, kMaxWidth);
  c.window = r.integer("window", 1, kMaxWindow);
  c.dropout = r.number("dropout", 0, 1);
  c.deep_output = r.boolean("deep_output");
  c.seed = r.unsigned_integer("seed");
  c.validate();
  return c;
}

namespace {

// The Transformer's parameters (models/transformer.cpp), named as PyTorch names those of
// torch_transformer.py's model: src_emb, tgt_emb, transformer.{encoder,decoder}, generator.
void transformer_shapes(const Seq2SeqConfig& c, std::vector<std::pair<std::string, Shape>>& out) {
  const int64_t d = c.d_model, f = c.ffn;
  auto add = [&](std::string name, Shape shape) { out.emplace_back(std::move(name), shape); };
  auto attention = [&](const std::string& p) {
    add(p + "in_proj_weight", {3 * d, d});
    add(p + "in_proj_bias", {3 * d});
    add(p + "out_proj.weight", {d, d});
    add(p + "out_proj.bias", {d});
  };
  auto norm = [&](const std::string& p) {
    add(p + "weight", {d});
    add(p + "bias", {d});
  };
  auto feed_forward = [&](const std::string& p) {
    add(p + "linear1.weight", {f, d});
    add(p + "linear1.bias", {f});
    add(p + "linear2.weight", {d, f});
    add(p + "linear2.bias", {d});
  };
  add("src_emb.weight", {c.src_vocab, d});
  add("tgt_emb.weight", {c.tgt_vocab, d});
  if (c.positions == Positions::learned) {
    add("src_pos.weight", {c.max_positions, d});
    add("tgt_pos.weight", {c.max_positions, d});
  }
  for (int l = 0; l < c.enc_layers; ++l) {
    const std::string p = fmt::format("transformer.encoder.layers.{}.", l);
    attention(p + "self_attn.");
    feed_forward(p);
    norm(p + "norm1.");
    norm(p + "norm2.");
  }
  norm("transformer.encoder.norm.");
  for (int l = 0; l < c.dec_layers; ++l) {
    const std::string p = fmt::format("transformer.decoder.layers.{}.", l);
    attention(p + "self_attn.");
    attention(p + "multihead_attn.");
    feed_forward(p);
    norm(p + "norm1.");
    norm(p + "norm2.");
    norm(p + "norm3.");
  }
  norm("transformer.decoder.norm.");
  if (!c.share_embeddings) add("generator.weight", {c.tgt_vocab, d});
  add("generator.bias", {c.tgt_vocab});
}

}  // namespace

std::vector<std::pair<std::string, Shape>> Seq2SeqConfig::parameter_shapes() const {
  validate();
  std::vector<std::pair<std::string, Shape>> out;
  if (transformer()) {
    transformer_shapes(*this, out);
    return out;
  }
  const int64_t g = nn::gate_count(cell) * hidden, h = hidden, k = key_size();
  const int64_t a = attn_size > 0 ? attn_size : hidden;
  auto add = [&](std::string name, Shape shape) { out.emplace_back(std::move(name), shape); };
  auto cell_weights = [&](const std::string& prefix, const std::string& suffix, int64_t in) {
    add(prefix + "weight_ih" + suffix, {g, in});
    add(prefix + "weight_hh" + suffix, {g, h});
    add(prefix + "bias_ih" + suffix, {g});
    add(prefix + "bias_hh" + suffix, {g});
  };
  // Encoder (models/encoder.cpp, nn::RNN).
  add("encoder.embedding.weight", {src_vocab, emb});
  const int directions = bidirectional ? 2 : 1;
  for (int l = 0; l < layers; ++l)
    for (int d = 0; d < directions; ++d)
      cell_weights("encoder.rnn.", fmt::format("_l{}{}", l, d ? "_reverse" : ""),
                   l == 0 ? emb : h * directions);
  // Decoder (models/decoder.cpp, nn::Attention::make).
  add("decoder.embedding.weight", {tgt_vocab, emb});
  add("decoder.bridge.weight", {h * layers, k});
  add("decoder.bridge.bias", {h * layers});
  using nn::AttentionKind;
  switch (attention) {
    case AttentionKind::none:
    case AttentionKind::dot:
    case AttentionKind::scaled_dot:
      break;
    case AttentionKind::bahdanau:
      add("decoder.attention.W", {a, h});
      add("decoder.attention.b", {a});
      add("decoder.attention.U", {a, k});
      add("decoder.attention.v", {a});
      break;
    case AttentionKind::concat:
      add("decoder.attention.W", {a, h + k});
      add("decoder.attention.v", {a});
      break;
    case AttentionKind::general:
    case AttentionKind::local_m:
      add("decoder.attention.W", {h, k});
      break;
    case AttentionKind::local_p:
      add("decoder.attention.W", {h, k});
      add("decoder.attention.W_p", {a, h});
      add("decoder.attention.v_p", {a});
      break;
    case AttentionKind::cosine:
      add("decoder.attention.beta", {1});
      break;
  }
  for (int l = 0; l < layers; ++l)
    cell_weights(fmt::format("decoder.cells.{}.", l), "",
                 l > 0 ? h : emb + (decoder == DecoderKind::bahdanau ? k : h));
  if (decoder == DecoderKind::luong) add("decoder.combine.weight", {h, k + h});
  const int64_t features = decoder == DecoderKind::luong || !deep_output ? h : h + k + emb;
  add("decoder.out.weight", {tgt_vocab, features});
  add("decoder.out.bias", {tgt_vocab});
  return out;
}

int64_t Seq2SeqConfig::parameter_count() const {
  int64_t n = 0;
  for (const auto& [name, shape] : parameter_shapes()) n += shape.numel();
  return n;
}

std::string Seq2SeqConfig::summary() const {
  if (transformer())
    return fmt::format("transformer {}+{} layers d {} heads {} ffn {}, {}-norm, {}, {} positions{}",
                       enc_layers, dec_layers, d_model, heads, ffn, nn::norm_place_name(norm),
                       nn::activation_name(activation), positions_name(positions),
                       share_embeddings ? ", shared target embedding" : "");
  return fmt::format("{}{} {}x{} emb {}, {} attention, {} decoder", nn::cell_name(cell),
                     bidirectional ? " bi" : "", layers, hidden, emb, nn::attention_name(attention),
                     decoder_name(decoder));
}

}  // namespace tapestry::models
