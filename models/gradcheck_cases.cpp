// Whole-model gradient checks: a tiny Seq2Seq in float64 on 2 sentences of different lengths,
// every parameter (the attention's W, U, v among them) against central differences of the loss.
#include "tapestry/models/gradcheck_cases.h"

#include <fmt/format.h>

#include "tapestry/models/seq2seq.h"
#include "tapestry/nn/gradcheck_cases.h"

namespace tapestry::models {

namespace {

// Sources of lengths 3 and 2, targets of 2 and 1 tokens (T = 3 with <eos>).
const std::vector<EncodedPair>& tiny_pairs() {
  static const std::vector<EncodedPair> pairs = {{{4, 5, 6}, {5, 4}}, {{6, 4}, {6}}};
  return pairs;
}

// The loss is O(1) while some gradients (the attention's, through a 3-unit model) are O(1e-5), so
// plain differences at h = 1e-6 carry rounding noise of about 1e-10, a relative 1e-5: the
// fourth-order difference at h = 1e-4 measures them to about 1e-12.
GradcheckCase model_case(const Seq2SeqConfig& c, double teacher_forcing, std::string extra) {
  GradcheckCase gc = nn::module_case(
      "seq2seq",
      fmt::format("{} {}, {} decoder{}", nn::cell_name(c.cell), nn::attention_name(c.attention),
                  decoder_name(c.decoder), extra),
      {},
      [c](Rng&) {
        return std::unique_ptr<nn::Module>(std::make_unique<Seq2Seq>(c, DType::f64).release());
      },
      [teacher_forcing](Tape& tape, nn::Module& m, std::span<const Var>) {
        auto& model = static_cast<Seq2Seq&>(m);
        model.rng() = Rng(7);  // the same teacher-forcing draws in every evaluation
        static const int64_t rows[] = {0, 1};
        return model.loss(tape, make_batch(tiny_pairs(), rows), teacher_forcing);
      });
  gc.eps = 1e-3;
  gc.fourth_order = true;
  return gc;
}

// The whole Transformer on the same two sentences: padding in the source and the target, the
// causal mask, every parameter.
GradcheckCase transformer_case(const Seq2SeqConfig& c, double label_smoothing) {
  GradcheckCase gc = nn::module_case(
      "transformer",
      fmt::format("{}-norm, {}, {} positions{}{}", nn::norm_place_name(c.norm),
                  nn::activation_name(c.activation), positions_name(c.positions),
                  c.share_embeddings ? ", shared target embedding" : "",
                  label_smoothing > 0 ? fmt::format(", label smoothing {}", label_smoothing) : ""),
      {},
      [c](Rng&) {
        return std::unique_ptr<nn::Module>(std::make_unique<Seq2Seq>(c, DType::f64).release());
      },
      [label_smoothing](Tape& tape, nn::Module& m, std::span<const Var>) {
        auto& model = static_cast<Seq2Seq&>(m);
        static const int64_t rows[] = {0, 1};
        return model.loss(tape, make_batch(tiny_pairs(), rows), 1.0, nullptr, label_smoothing);
      });
  // A step of 1e-3 moves the embeddings (scaled by sqrt(d)) across a ReLU's kink in the pre-norm
  // model (error 2e-2 there, 2e-7 with GELU); at 1e-4 no input crosses one.
  gc.eps = 1e-4;
  gc.fourth_order = true;
  return gc;
}

}  // namespace

void add_gradcheck_cases(GradcheckRegistry& reg) {
  reg.require_layer("seq2seq");
  reg.require_layer("transformer");
  Seq2SeqConfig t;
  t.arch = Arch::transformer;
  t.src_vocab = t.tgt_vocab = 7;
  t.d_model = 4;
  t.heads = 2;
  t.ffn = 6;
  t.enc_layers = 2;
  t.dec_layers = 2;
  t.max_positions = 6;
  for (nn::NormPlace norm : {nn::NormPlace::post, nn::NormPlace::pre}) {
    Seq2SeqConfig c = t;
    c.norm = norm;
    reg.add(transformer_case(c, 0.0));
    c.activation = nn::Activation::gelu;
    reg.add(transformer_case(c, 0.0));
  }
  Seq2SeqConfig learned = t;
  learned.positions = Positions::learned;
  learned.share_embeddings = true;
  learned.activation = nn::Activation::gelu;
  reg.add(transformer_case(learned, 0.0));
  reg.add(transformer_case(t, 0.1));
  Seq2SeqConfig base;
  base.src_vocab = base.tgt_vocab = 7;
  base.emb = 2;
  base.hidden = 3;
  base.attn_size = 2;
  base.window = 1;
  for (nn::CellKind cell : {nn::CellKind::gru, nn::CellKind::lstm}) {
    for (DecoderKind decoder : {DecoderKind::bahdanau, DecoderKind::luong}) {
      for (nn::AttentionKind attention : nn::all_attention_kinds()) {
        Seq2SeqConfig c = base;
        c.cell = cell;
        c.decoder = decoder;
        c.attention = attention;
        // The dot-product family compares the decoder state with the keys, so K must be H.
        c.bidirectional = attention != nn::AttentionKind::dot &&
                          attention != nn::AttentionKind::scaled_dot &&
                          attention != nn::AttentionKind::cosine;
        reg.add(model_case(c, 1.0, c.bidirectional ? ", bidirectional" : ""));
      }
    }
  }
  // Two layers, the plain output layer, a tanh RNN, and feeding back the model's own predictions.
  Seq2SeqConfig deep = base;
  deep.layers = 2;
  deep.deep_output = false;
  reg.add(model_case(deep, 1.0, ", 2 layers, output from s_t only"));
  Seq2SeqConfig rnn = base;
  rnn.cell = nn::CellKind::rnn;
  rnn.decoder = DecoderKind::luong;
  rnn.attention = nn::AttentionKind::general;
  reg.add(model_case(rnn, 0.5, ", teacher forcing 0.5"));
}

}  // namespace tapestry::models
