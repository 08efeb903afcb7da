// Recurrent layers as torch.nn.RNN/GRU/LSTM: cells, and multi-layer bidirectional layers over
// padded batches; equations, gate order, parameter names and shapes follow PyTorch exactly.
#pragma once

#include <span>
#include <string_view>

#include "tapestry/core/random.h"
#include "tapestry/nn/module.h"

namespace tapestry::nn {

enum class CellKind { rnn, gru, lstm };

const char* cell_name(CellKind kind);        // "rnn", "gru", "lstm"
CellKind parse_cell(std::string_view name);  // throws ValueError listing the valid names
int gate_count(CellKind kind);               // 1, 3 (r, z, n), 4 (i, f, g, o)

// A recurrent state: h (B,H), and for an LSTM the cell c (B,H).
struct RecurrentState {
  Var h{};
  Var c{};  // undefined for RNN and GRU cells
};

// One step of a cell from the input projection gx = x W_ih^T + b_ih (B,G*H):
//   rnn:  h' = tanh(gx + h W_hh^T + b_hh)
//   gru:  r = s(gx_r + gh_r),  z = s(gx_z + gh_z),  n = tanh(gx_n + r * gh_n),  h' = (1-z) n + z h
//         with gh = h W_hh^T + b_hh (so b_hn sits inside the reset product, as in PyTorch)
//   lstm: g = gx + h W_hh^T + b_hh;  i, f, o = s(g_i, g_f, g_o);  u = tanh(g_g)
//         c' = f c + i u,  h' = o tanh(c')
// The gate arithmetic runs as one fused op (ops::gru_cell, ops::lstm_cell); cell_step_composed
// does the same with elementary ops (tests hold the two equal).
// w_hh is a weight: packs, if given, hold its pack for h W_hh^T (ops::matmul).
RecurrentState cell_step(CellKind kind, const Var& gx, const RecurrentState& s, const Var& w_hh,
                         const Var& b_hh, WeightPacks* packs = nullptr);
RecurrentState cell_step_composed(CellKind kind, const Var& gx, const RecurrentState& s,
                                  const Var& w_hh, const Var& b_hh);

// A single cell, as torch.nn.RNNCell / GRUCell / LSTMCell: weight_ih (G*H,in), weight_hh (G*H,H),
// bias_ih and bias_hh (G*H), all ~ U(-1/sqrt(H), 1/sqrt(H)).
class Cell : public Module {
 public:
  Cell(CellKind kind, int64_t input_size, int64_t hidden_size, Rng& rng, DType dtype = DType::f32);
  // x (B,in), state (B,H) -> next state
  RecurrentState forward(Tape& tape, const Var& x, const RecurrentState& s);

  // The same step with the input split in two blocks, x = [a; r], a of width `split`: when a is
  // known for every step at once (a decoder's embedded targets under teacher forcing), its part
  // of the input projection is one product for all steps, and each step adds r's part:
  //   head = project_head(a_all, split)  a (...,split) -> a W_ih[:, :split]^T + b_ih (...,G*H)
  //   tail = weight_tail(split)          W_ih[:, split:] (G*H, in-split), once per batch
  //   forward_split(head_t, r_t, tail, s) == forward([a_t; r_t], s)
  // (equal up to rounding: gx = head + r tail^T adds two products). A decoder takes the same
  // split step by step as well (project_head with weight_head's block, made once), so that
  // decoding computes what training computed. w_head and tail must be weight_head's and
  // weight_tail's: with the tape's weight packs, the products read W_ih's columns through their
  // packs instead of the blocks' values (the gradient still flows into the blocks).
  Var project_head(Tape& tape, const Var& a, int64_t split);
  Var project_head(Tape& tape, const Var& a, const Var& w_head);
  Var weight_head(Tape& tape, int64_t split);
  Var weight_tail(Tape& tape, int64_t split);
  RecurrentState forward_split(Tape& tape, const Var& head, const Var& r, const Var& tail,
                               const RecurrentState& s);
  CellKind kind() const { return kind_; }
  int64_t hidden_size() const { return hidden_; }

 private:
  // Throws ShapeError unless 0 < split < the input size: W_ih's columns split into two blocks.
  void check_split(int64_t split) const;

  CellKind kind_;
  int64_t input_, hidden_;
  Parameter *w_ih_, *w_hh_, *b_ih_, *b_hh_;
};

// A multi-layer, optionally bidirectional recurrent layer over a padded batch.
class RNN : public Module {
 public:
  struct Output {
    Var y;    // (B,S,D*H): every hidden state of the last layer (directions concatenated); 0 at
              // padding
    Var h_n;  // (L*D,B,H): each sequence's final state per layer and direction
    Var c_n;  // (L*D,B,H): LSTM only
  };

  // dropout applies to the outputs of every layer but the last, in training mode (as PyTorch).
  RNN(CellKind kind, int64_t input_size, int64_t hidden_size, int num_layers, bool bidirectional,
      Rng& rng, DType dtype = DType::f32, double dropout = 0.0);

  // x (B,S,in) with lengths[b] <= S real steps per row; padded steps are never read and never
  // change a row's state. h0 and c0 (L*D,B,H) default to zeros. Dropout between layers draws from
  // `dropout_rng` if given, else from the layer's own generator.
  Output forward(Tape& tape, const Var& x, std::span<const int64_t> lengths, const Var& h0 = Var(),
                 const Var& c0 = Var(), Rng* dropout_rng = nullptr);

  CellKind kind() const { return kind_; }
  int64_t hidden_size() const { return hidden_; }
  int num_layers() const { return layers_; }
  int directions() const { return bidirectional_ ? 2 : 1; }

 private:
  struct Weights {
    Parameter *w_ih, *w_hh, *b_ih, *b_hh;
  };
  // Runs one layer in one direction over the whole sequence; returns its outputs (B,S,H).
  Var run_direction(Tape& tape, const Weights& w, const Var& x, const Tensor& step_masks,
                    int64_t full_steps, RecurrentState s, bool reverse,
                    RecurrentState& final_state);

  CellKind kind_;
  int64_t input_, hidden_;
  int layers_;
  bool bidirectional_;
  double dropout_;
  Rng dropout_rng_;
  std::vector<Weights> weights_;  // layer-major: [l0, l0_reverse, l1, ...]
};

}  // namespace tapestry::nn
