// Explain's equations: each group of an RNN attention model's graph written as math for its
// configuration, and a vocabulary's first tokens, for the renderers' headings.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "tools/explain.h"

namespace tapestry::cli {

using models::Seq2SeqConfig;
using models::Vocab;

// ---------------------------------------------------------------------------------------------
// The equations of each group, written for this configuration

namespace {

std::string upper(const char* s) {
  std::string u(s);
  for (char& ch : u) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return u;
}

std::string cell_equation(nn::CellKind kind) {
  switch (kind) {
    case nn::CellKind::gru:
      return "GRU(x, h): r = sig(W_ir x + b_ir + W_hr h + b_hr), z = sig(W_iz x + b_iz + W_hz h + "
             "b_hz), n = tanh(W_in x + b_in + r * (W_hn h + b_hn)), h' = (1 - z) n + z h";
    case nn::CellKind::lstm:
      return "LSTM(x, h, c): g = W_ih x + b_ih + W_hh h + b_hh; i, f, o = sig(g_i, g_f, g_o), "
             "u = tanh(g_g), c' = f c + i u, h' = o tanh(c')";
    case nn::CellKind::rnn:
      return "RNN(x, h): h' = tanh(W_ih x + b_ih + W_hh h + b_hh)";
  }
  return "";
}

}  // namespace

std::map<std::string, std::string> group_equations(const Seq2SeqConfig& c, int64_t src_len,
                                                   int64_t step) {
  using nn::AttentionKind;
  const std::string cell = upper(nn::cell_name(c.cell));
  const bool bahdanau = c.decoder == models::DecoderKind::bahdanau;
  std::map<std::string, std::string> eq;
  eq["encoder"] =
      (c.bidirectional
           ? fmt::format("h_j = [{0}_fwd(E_x x_j, h_(j-1)); {0}_bwd(E_x x_j, h_(j+1))], "
                         "j = 1..S; the summary joins both directions' final states",
                         cell)
           : fmt::format("h_j = {}(E_x x_j, h_(j-1)), j = 1..S; the summary is h_S", cell)) +
      (c.layers > 1 ? fmt::format(" ({} layers)", c.layers) : "") + ".  " + cell_equation(c.cell);
  switch (c.attention) {
    case AttentionKind::bahdanau:
      eq["attention.keys"] =
          "U h_j for every j, computed once per sentence and reused at every step";
      break;
    case AttentionKind::concat:
      eq["attention.keys"] =
          "W_h h_j for every j (the columns of W that multiply h_j), once per sentence";
      break;
    case AttentionKind::cosine:
      eq["attention.keys"] = "|h_j| = sqrt(h_j . h_j + 1e-8) for every j, once per sentence";
      break;
    default:
      break;
  }
  eq["decoder"] = std::string("s_0 = tanh(W_b summary + b_b)  (the bridge)") +
                  (c.cell == nn::CellKind::lstm ? ", c_0 = 0" : "") +
                  (bahdanau ? "" : ", h~_0 = 0");
  eq["decoder.embedding"] = "E_y y_(t-1), with y_0 = <bos>";
  const std::string query = bahdanau ? "the query s is s_(t-1), the state before this step"
                                     : "the query s is h_t, this step's new state";
  std::string scores;
  switch (c.attention) {
    case AttentionKind::none:
      break;
    case AttentionKind::bahdanau:
      scores = "e_j = v . tanh(W s + b + U h_j)";
      break;
    case AttentionKind::dot:
      scores = "e_j = s . h_j";
      break;
    case AttentionKind::general:
      scores = "e_j = s^T W h_j = (s W) . h_j";
      break;
    case AttentionKind::concat:
      scores = "e_j = v . tanh(W [s; h_j]) = v . tanh(W_s s + W_h h_j)";
      break;
    case AttentionKind::scaled_dot:
      scores = fmt::format("e_j = s . h_j / sqrt(K), K = {}", c.key_size());
      break;
    case AttentionKind::cosine:
      scores = "e_j = beta (s . h_j) / (|s| |h_j|)";
      break;
    case AttentionKind::local_m:
      scores = fmt::format("e_j = s^T W h_j; the window's centre p_t = min(t, S - 1) = {}",
                           std::min<int64_t>(step, src_len - 1));
      break;
    case AttentionKind::local_p:
      scores = "e_j = s^T W h_j; the window's centre p_t = (S - 1) sigmoid(v_p . tanh(W_p s))";
      break;
  }
  if (!scores.empty()) eq["attention.scores"] = scores + "  (" + query + ")";
  const bool local = c.attention == AttentionKind::local_m || c.attention == AttentionKind::local_p;
  eq["attention.softmax"] =
      local ? fmt::format(
                  "a_j = softmax(e over |j - p_t| <= D)_j * exp(-(j - p_t)^2 / (2 (D/2)^2)), "
                  "D = {}",
                  c.window)
            : "a_j = exp(e_j) / sum_k exp(e_k), over the real source positions";
  eq["attention.context"] = "c = sum_j a_j h_j";
  if (bahdanau) {
    eq["decoder.rnn"] = fmt::format("s_t = {}([E_y y_(t-1); c_t], s_(t-1))", cell);
    eq["output"] = c.deep_output ? "z = W_o [s_t; c_t; E_y y_(t-1)] + b_o" : "z = W_o s_t + b_o";
  } else {
    eq["decoder.rnn"] = fmt::format("h_t = {}([E_y y_(t-1); h~_(t-1)], h_(t-1))", cell);
    eq["decoder.combine"] = "h~_t = tanh(W_c [c_t; h_t])";
    eq["output"] = "z = W_o h~_t + b_o";
  }
  if (c.attention == AttentionKind::none)
    eq["decoder.rnn"] += "; without attention c_t is the encoder summary at every step";
  eq["loss"] = "L = -log softmax(z)[y*] = logsumexp(z) - z[y*]";
  return eq;
}

std::string vocab_list(const Vocab& v) {
  std::string s;
  const auto& toks = v.tokens();
  const size_t show = std::min<size_t>(toks.size(), 40);
  for (size_t i = 0; i < show; ++i) s += (i ? " " : "") + toks[i];
  if (show < toks.size()) s += fmt::format(" ... ({} in all)", toks.size());
  return s;
}

}  // namespace tapestry::cli
