// README.md of a PyTorch export: how to use the package, this model's shape and its conventions.
#include <fmt/format.h>

#include <cmath>

#include "tools/export_pytorch.h"
#include "tools/progress.h"

namespace tapestry::cli {

namespace {

using models::DecoderKind;
using nn::AttentionKind;
using nn::CellKind;

const char* score_equation(AttentionKind kind) {
  switch (kind) {
    case AttentionKind::none:
      return "no weights: the context is the encoder's summary at every step (Cho et al. 2014)";
    case AttentionKind::bahdanau:
      return "e_j = v . tanh(W s + b + U h_j) (Bahdanau et al. 2015)";
    case AttentionKind::dot:
      return "e_j = s . h_j (Luong et al. 2015)";
    case AttentionKind::general:
      return "e_j = s^T W h_j (Luong et al. 2015)";
    case AttentionKind::concat:
      return "e_j = v . tanh(W [s; h_j]) (Luong et al. 2015)";
    case AttentionKind::scaled_dot:
      return "e_j = s . h_j / sqrt(K) (Vaswani et al. 2017)";
    case AttentionKind::cosine:
      return "e_j = beta cos(s, h_j), beta learned (Graves et al. 2014)";
    case AttentionKind::local_m:
      return "general scores in the window |j - p_t| <= D, p_t = min(t - 1, S_b - 1), times a "
             "Gaussian (Luong et al. 2015)";
    case AttentionKind::local_p:
      return "general scores in the window |j - p_t| <= D, p_t = (S_b - 1) sigmoid(v_p . "
             "tanh(W_p s)), times a Gaussian (Luong et al. 2015)";
  }
  return "?";
}

// The model-specific part of an RNN's: what this model is, in the terms of the conventions below.
std::string this_rnn(const models::SavedModel& m, const std::string& source) {
  const models::Seq2SeqConfig& c = m.model->config();
  const bool bahdanau = c.decoder == DecoderKind::bahdanau;
  const int64_t k = c.key_size(), a = c.attn_size > 0 ? c.attn_size : c.hidden;
  const bool uses_a = c.attention == AttentionKind::bahdanau ||
                      c.attention == AttentionKind::concat || c.attention == AttentionKind::local_p;
  const bool local = c.attention == AttentionKind::local_m || c.attention == AttentionKind::local_p;
  std::string s = fmt::format("- from `{}`: {}, {} parameters\n", source, c.summary(),
                              format_count(static_cast<double>(m.model->num_parameters())));
  s += fmt::format(
      "- vocabularies: {} source and {} target tokens (the 4 specials included); "
      "text: {}\n",
      c.src_vocab, c.tgt_vocab, m.preprocess.describe());
  s += fmt::format(
      "- encoder: embeddings E = {}, a {}directional {} of {} layer{} with H = {}, so the "
      "states h_j have K = {}; the summary is {}\n",
      c.emb, c.bidirectional ? "bi" : "uni",
      c.cell == CellKind::rnn   ? "`nn.RNN` (tanh)"
      : c.cell == CellKind::gru ? "`nn.GRU`"
                                : "`nn.LSTM`",
      c.layers, c.layers == 1 ? "" : "s", c.hidden, k,
      c.bidirectional ? "[forward final; backward final] of the top layer"
                      : "the top layer's final state");
  s += fmt::format("- attention `{}`: {}", nn::attention_name(c.attention),
                   score_equation(c.attention));
  if (uses_a) s += fmt::format("; A = {}", a);
  if (local)
    s += fmt::format("; D = {}, so the Gaussian's standard deviation is D/2 = {}", c.window,
                     c.window / 2.0);
  s += "\n";
  if (bahdanau)
    s += fmt::format(
        "- decoder `bahdanau`: {} layer{}; attends with the top layer's s_{{t-1}}; the first "
        "cell is fed [E y_{{t-1}}; c_t]; the output layer reads {} (F = {})\n",
        c.layers, c.layers == 1 ? "" : "s",
        c.deep_output ? "[s_t; c_t; E y_{t-1}]" : "s_t alone (deep output off)",
        c.deep_output ? c.hidden + k + c.emb : c.hidden);
  else
    s += fmt::format(
        "- decoder `luong`: {} layer{}; the first cell is fed [E y_{{t-1}}; h~_{{t-1}}]; attends "
        "with the top layer's h_t; the output layer reads h~_t = tanh(W_c [c_t; h_t]) (F = {})\n",
        c.layers, c.layers == 1 ? "" : "s", c.hidden);
  if (c.dropout > 0)
    s += fmt::format("- dropout {} (applied only in training mode, `model.train()`)\n", c.dropout);
  return s;
}

// A Transformer's: what this model is, in the terms of the conventions below.
std::string this_transformer(const models::SavedModel& m, const std::string& source) {
  const models::Seq2SeqConfig& c = m.model->config();
  const bool pre = c.norm == nn::NormPlace::pre;
  const bool learned = c.positions == models::Positions::learned;
  std::string s = fmt::format("- from `{}`: {}, {} parameters\n", source, c.summary(),
                              format_count(static_cast<double>(m.model->num_parameters())));
  s += fmt::format(
      "- vocabularies: {} source and {} target tokens (the 4 specials included); "
      "text: {}\n",
      c.src_vocab, c.tgt_vocab, m.preprocess.describe());
  s += fmt::format("- embeddings: d = {}, scaled by sqrt(d) = {:.4f}, plus ", c.d_model,
                   std::sqrt(static_cast<double>(c.d_model)));
  if (learned)
    s += fmt::format(
        "learned positions (`src_pos`, `tgt_pos`, {} rows each: sources of up to {} tokens, "
        "up to {} decoding steps)\n",
        c.max_positions, c.max_positions, c.max_positions);
  else
    s += "sinusoidal positions\n";
  s += fmt::format(
      "- `nn.Transformer`: {} encoder and {} decoder layer{}, {} heads of d/h = {}, a "
      "feed-forward block d -> {} -> d with {}, {}-norm ({}), a final LayerNorm after each "
      "stack\n",
      c.enc_layers, c.dec_layers, c.dec_layers == 1 ? "" : "s", c.heads, c.d_model / c.heads, c.ffn,
      c.activation == nn::Activation::relu ? "ReLU" : "GELU", nn::norm_place_name(c.norm),
      pre ? "x = x + sublayer(LN(x)), `norm_first=True`" : "x = LN(x + sublayer(x)), as in 2017");
  s += c.share_embeddings ? "- output layer: logits = h E_tgt^T + b, its weight the target "
                            "embedding `tgt_emb.weight` (shared), its bias `generator.bias`\n"
                          : "- output layer: logits = h W^T + b, `generator` (`nn.Linear`)\n";
  if (c.dropout > 0)
    s += fmt::format("- dropout {} (applied only in training mode, `model.train()`)\n", c.dropout);
  return s;
}

// Use: the first line names the PyTorch version the architecture needs.
constexpr const char* kUseRnn = R"MD(
## Use

Python 3.8 or later and PyTorch 1.9 or later (tested with 1.13); nothing else. The weights
are read with the standard library, or with the `safetensors` package when it is installed.
)MD";
constexpr const char* kUseTransformer = R"MD(
## Use

Python 3.8 or later and PyTorch 1.10 or later (`norm_first`; tested with 1.13); nothing else.
The weights are read with the standard library, or with the `safetensors` package when it is
installed.
)MD";

constexpr const char* kUsage = R"MD(
```
python3 translate.py < input.txt                   # greedy, one translation per line
python3 translate.py --beam 5 --input input.txt    # beam search
python3 translate.py --beam 5 --nbest 3 < in.txt   # Moses n-best: INDEX ||| TEXT ||| SCORE
python3 translate.py --loss src.txt ref.txt        # teacher-forced loss as JSON
```

`translate.py` prints what `tapestry translate --model DIR` prints for the same input and flags
(`--beam`, `--nbest`, `--max-len-ratio`, `--max-len-extra`, `--length-penalty`,
`--batch-size`): an empty line gives an empty line (`i |||  ||| 0` in n-best lists). `--loss`
prints the mean -log p per target token, the perplexity and each pair's loss, as
`tapestry eval` measures it; `--dtype float64` computes in float64 instead of float32.

From Python:

```python
import sys
sys.path.insert(0, "path/to/this/directory")
from model import DecodeOptions, decode, load_model, make_batch

model = load_model("path/to/this/directory")        # eval mode; dtype=torch.float64 too
batch = make_batch([([4, 5, 6], [7, 8])])           # (source ids, target ids) pairs
print(model.loss(batch))                            # mean cross-entropy, teacher forced
print(decode(model, batch, DecodeOptions(beam=5)))  # n-best hypotheses per sentence
```

`preprocess.py` turns text into tokens and back (`Preprocess`, `Vocab`).
)MD";

// The table of files: its model.py and weights rows name the architecture's classes and
// parameters.
std::string files_table(bool transformer) {
  std::string s = R"MD(
## Files

| file | holds |
|---|---|
)MD";
  s += transformer
           ? "| `model.py` | the model as PyTorch modules (`Seq2Seq`: `nn.Embedding`, "
             "`nn.Transformer`, the output layer), the loss, greedy and beam search |\n"
           : "| `model.py` | the model as PyTorch modules (`Encoder`, one class per attention "
             "variant, `Decoder`, `Seq2Seq`), the loss, greedy and beam search |\n";
  s += R"MD(| `preprocess.py` | tokenisation, vocabularies, detokenisation |
| `translate.py` | the command line above |
| `config.json` | the model's shape |
)MD";
  s += transformer
           ? "| `weights.safetensors` | the parameters, float32, under Tapestry's names (which are "
             "those of `Seq2Seq` and `nn.Transformer`: `src_emb.weight`, "
             "`transformer.encoder.layers.0.self_attn.in_proj_weight`, "
             "`transformer.decoder.norm.bias`, `generator.bias`, ...) |\n"
           : "| `weights.safetensors` | the parameters, float32, under Tapestry's names (which are "
             "PyTorch's: `encoder.rnn.weight_ih_l0_reverse`, `decoder.cells.0.bias_hh`, ...) |\n";
  s += R"MD(| `src_vocab.json`, `tgt_vocab.json` | the tokens in id order |
| `preprocess.json` | the tokenisation mode |
)MD";
  return s;
}

constexpr const char* kConventionsRnn = R"MD(
## Conventions

Notation: S_b the real length of source sentence b, its positions j = 0..S_b-1; decoder step
t = 1, 2, ... reads y_{t-1} (y_0 = `<bos>`) and predicts y_t; E, H, K, A, D as above, h_j the
encoder states, E y the embedding of token y.

- **Special ids**, in both vocabularies: `<pad>` 0, `<bos>` 1, `<eos>` 2, `<unk>` 3. A token
  not in the vocabulary becomes `<unk>`.
- **Framing.** A source is its tokens only (no `<bos>`, no `<eos>`), padded with `<pad>` after
  its end. For a target y_1..y_n the decoder reads `<bos>` y_1 .. y_n and predicts y_1 .. y_n
  `<eos>`. The loss is the mean of -log p over those n + 1 tokens of every sentence in the
  batch (padding never counts), with the softmax over the whole target vocabulary.
- **Encoder.** Embedding, then `nn.RNN` (tanh), `nn.GRU` or `nn.LSTM` with PyTorch's equations
  and gate order, over the packed batch: padded steps are never read and never change a
  sentence's state, and the states h_j are 0 at padding. With several layers, each reads the
  states of the layer below (both directions concatenated).
- **The summary** is the top layer's final hidden state (an LSTM's h, not its cell c): for a
  unidirectional encoder the state after the last real token; for a bidirectional one
  [forward; backward], the forward state after the last real token and the backward state after
  reading back to the first (the backward part of h_0).
- **The bridge** forms the decoder's first state: s_0 = tanh(W_b summary + b_b), L*H values cut
  into one H-slice per layer (layer 0 first), the same map for every cell kind. An LSTM
  decoder's cells start from c_0 = 0; the Luong decoder's fed-back vector from h~_0 = 0.
- **Bahdanau decoder**: a_t = attend(s_{t-1}) with the top layer's previous state,
  s_t = RNN([E y_{t-1}; c_t], s_{t-1}) (the context enters the first layer's cell; each further
  layer reads the new state of the layer below), and the output layer reads
  [s_t; c_t; E y_{t-1}] (deep output) or s_t alone.
- **Luong decoder**: h_t = RNN([E y_{t-1}; h~_{t-1}], h_{t-1}) (input feeding into the first
  layer), a_t = attend(h_t) with the top layer's new state, h~_t = tanh(W_c [c_t; h_t]) (no
  bias), and the output layer reads h~_t.
- **Output**: logits = W_o features + b_o over the target vocabulary.
- **Attention** turns the query s into scores e_j and weights a = softmax(e) over the real
  source positions only: padding is left out of the softmax and gets weight exactly 0. The
  context is c = sum_j a_j h_j. Scores: `bahdanau` v . tanh(W s + b + U h_j); `dot` s . h_j;
  `general` s^T W h_j; `concat` v . tanh(W [s; h_j]) (W's first H columns multiply s, no bias);
  `scaled-dot` s . h_j / sqrt(K); `cosine` beta (s . h_j) / (|s| |h_j|), norms
  sqrt(sum x^2 + 1e-8), beta learned; `none` has no weights and its context is the summary at
  every step. `dot`, `scaled-dot` and `cosine` need H = K.
- **Local attention** (`local-m`, `local-p`): `general` scores inside the window
  |j - p_t| <= D (and inside the sentence), a softmax over the window, times a Gaussian of
  standard deviation D/2 centred on p_t: a_j = softmax(e)_j exp(-(j - p_t)^2 / (2 (D/2)^2)), so
  the weights sum to at most 1. `local-m` takes p_t = min(t - 1, S_b - 1) (the step that
  reads `<bos>` attends around position 0); `local-p` predicts p_t = (S_b - 1)
  sigmoid(v_p . tanh(W_p s)) from its query s. The window is a constant mask; the gradient
  reaches p_t through the Gaussian.
- **Dropout** (when the rate is above 0, in training mode only) acts on the embeddings, between
  recurrent layers and on the output layer's input.
)MD";

constexpr const char* kConventionsTransformer = R"MD(
## Conventions

Notation: S_b the real length of source sentence b, its positions j = 0..S_b-1; decoder
position t = 0, 1, ... reads y_t (y_0 = `<bos>`) and predicts y_{t+1}; d, h as above; E y the
embedding of token y.

- **Special ids**, in both vocabularies: `<pad>` 0, `<bos>` 1, `<eos>` 2, `<unk>` 3. A token
  not in the vocabulary becomes `<unk>`.
- **Framing.** A source is its tokens only (no `<bos>`, no `<eos>`), padded with `<pad>` after
  its end. For a target y_1..y_n the decoder reads `<bos>` y_1 .. y_n and predicts y_1 .. y_n
  `<eos>`. The loss is the mean of -log p over those n + 1 tokens of every sentence in the
  batch (padding never counts), with the softmax over the whole target vocabulary.
- **Inputs**: x_p = dropout(E y_p sqrt(d) + P_p) at every position p from 0, the source's and
  the target's alike, each with its own embedding. Sinusoidal positions are Vaswani et al.'s,
  P[p, 2i] = sin(p / 10000^(2i/d)) and P[p, 2i+1] = cos(p / 10000^(2i/d)), computed in float64
  and rounded; learned positions are the rows of `src_pos.weight` and `tgt_pos.weight`, so a
  source may have at most max_positions tokens and decoding may take at most max_positions
  steps (past them, as in Tapestry, it stops with an error).
- **Layers** are `torch.nn.TransformerEncoderLayer` and `TransformerDecoderLayer` with
  `batch_first=True`. Post-norm: x = norm1(x + dropout(SelfAttn(x))), then in the decoder
  x = norm2(x + dropout(CrossAttn(x, memory))), then x = norm(x + dropout(FFN(x))) with the
  layer's last norm (norm2 in the encoder, norm3 in the decoder). Pre-norm moves each norm onto
  the sublayer's input: x = x + dropout(SelfAttn(norm1(x))), and so on. FFN(x) =
  linear2(dropout(act(linear1(x)))), act ReLU or the exact GELU (x Phi(x), with erf).
  LayerNorm's epsilon is 1e-5. Each stack ends with a LayerNorm (`transformer.encoder.norm`,
  `transformer.decoder.norm`), in either placement.
- **Attention** is `torch.nn.MultiheadAttention`: `in_proj_weight` (3d x d) stacks W_q, W_k and
  W_v in that order (`in_proj_bias` likewise), each head takes d/h of the projected columns,
  weights softmax(Q K^T / sqrt(d/h)), then `out_proj`. The source's padding is left out of
  every softmax over source positions (the encoder's self-attention, the decoder's
  cross-attention): it gets weight exactly 0. The decoder's self-attention is causal (position
  t sees positions 0..t).
- **Output**: logits = h W^T + b over the target vocabulary, h the decoder stack's output; W is
  `generator.weight`, or the target embedding when it is shared.
- **Decoding steps**: the decoder runs over the whole prefix `<bos>` y_1 .. y_t at every step
  and its last position predicts y_{t+1} (`nn.Transformer` keeps no key/value cache; Tapestry
  computes only the new position against its caches, the same numbers to rounding).
- **Dropout** (when the rate is above 0, in training mode only) acts on the inputs x_p, on each
  sublayer's output, inside the feed-forward block and on the attention weights.
)MD";

constexpr const char* kDecoding = R"MD(
## Decoding

- Each step's log-probabilities are a log-softmax over the tokens a translation may hold
  (`<eos>` and up): `<pad>` and `<bos>` are never produced.
- A sentence of S_b tokens stops after ceil(max_len_ratio * S_b) + max_len_extra steps
  (`<eos>` counted; 2 and 5 by default) but never more than 4096, or at `<eos>`. `translate.py`
  cuts a line of more than 1024 tokens to its first 1024, as `tapestry translate` does, and
  says so on standard error.
- **Greedy** takes the most probable token, the lowest id among equals.
- **Beam search** (width k) ranks every continuation of every live hypothesis by its total
  log-probability (equal totals: the lower slot, then the lower token id first) and walks the
  best 2k in that order: `<eos>` among the first k finishes a hypothesis, any other token fills
  one of the k slots for the next step, until k are filled. The k best finished hypotheses are
  kept. A sentence is done when none is left alive, when k have finished and no live one scores
  better than the k-th of them at its current length, or when the live ones reach the length
  limit (they then finish as they stand, without `<eos>`).
- **Scores**: log p / steps^length_penalty, steps counting the tokens and the final `<eos>`
  (a length penalty of 0 ranks by log p). The n-best list is the finished hypotheses by score,
  best first (equal scores: the one finished first).
- **Text**: the output's ids become tokens up to the first `<eos>`, `<bos>` and `<pad>`
  dropped; words are joined by single spaces, characters are joined with `_` turned back into
  a space.

In float32 the computations follow Tapestry's step for step but not bit for bit (Tapestry's
float32 kernels have their own exp, tanh and sigmoid, and sums run in other orders): losses
agree to a few parts in a million, and the translations are Tapestry's unless two candidates
tie to within float32 rounding. An n-best score printed to 4 decimals can differ by one unit in
its last digit.
)MD";

}  // namespace

std::string pytorch_readme(const models::SavedModel& m, const std::string& source) {
  if (m.model->is_transformer())
    return "# A Tapestry model, exported to PyTorch\n\nA Transformer encoder-decoder trained by "
           "Tapestry, as plain PyTorch modules around `torch.nn.Transformer`, with its weights, "
           "vocabularies and tokenisation, and a translation script.\n\n## This model\n\n" +
           this_transformer(m, source) + kUseTransformer + kUsage + files_table(true) +
           kConventionsTransformer + kDecoding;
  return "# A Tapestry model, exported to PyTorch\n\nAn RNN encoder-decoder with attention "
         "trained by Tapestry, as plain PyTorch modules, with its weights, vocabularies and "
         "tokenisation, and a translation script.\n\n## This model\n\n" +
         this_rnn(m, source) + kUseRnn + kUsage + files_table(false) + kConventionsRnn + kDecoding;
}

}  // namespace tapestry::cli
