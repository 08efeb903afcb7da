// Recurrent cells and layers composed from ops; padding is handled by selecting, per step, the
// new state for real rows and the old one for padded rows.
#include "tapestry/nn/rnn.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "tapestry/core/scratch.h"
#include "tapestry/nn/init.h"
#include "tapestry/ops/arith.h"
#include "tapestry/ops/dropout.h"
#include "tapestry/ops/index.h"
#include "tapestry/ops/matmul.h"
#include "tapestry/ops/rnn_cells.h"
#include "tapestry/ops/shape_ops.h"
#include "tapestry/ops/unary.h"

namespace tapestry::nn {

const char* cell_name(CellKind kind) {
  switch (kind) {
    case CellKind::rnn:
      return "rnn";
    case CellKind::gru:
      return "gru";
    case CellKind::lstm:
      return "lstm";
  }
  return "?";
}

CellKind parse_cell(std::string_view name) {
  for (CellKind k : {CellKind::rnn, CellKind::gru, CellKind::lstm})
    if (name == cell_name(k)) return k;
  throw ValueError(fmt::format("unknown cell '{}' (valid: rnn, gru, lstm)", name));
}

int gate_count(CellKind kind) {
  return kind == CellKind::rnn ? 1 : kind == CellKind::gru ? 3 : 4;
}

namespace {
// Gate k of a (B,G*H) pre-activation.
Var gate(const Var& g, int k, int64_t h) {
  return ops::slice(g, 1, k * h, h);
}
}  // namespace

RecurrentState cell_step(CellKind kind, const Var& gx, const RecurrentState& s, const Var& w_hh,
                         const Var& b_hh, WeightPacks* packs) {
  const int64_t b = s.h.dim(0), h = s.h.dim(1);
  Var hw = ops::matmul(s.h, w_hh, false, true, packs);  // (B,H) x (G*H,H)^T -> (B,G*H)
  switch (kind) {
    case CellKind::rnn:
      return {ops::tanh(ops::add(gx, ops::add(hw, b_hh))), Var()};
    case CellKind::gru:
      return {ops::gru_cell(gx, hw, b_hh, s.h), Var()};
    case CellKind::lstm: {
      Var hc = ops::lstm_cell(gx, hw, b_hh, s.c);  // (2,B,H): slices along axis 0 are views
      return {ops::reshape(ops::slice(hc, 0, 0, 1), Shape{b, h}),
              ops::reshape(ops::slice(hc, 0, 1, 1), Shape{b, h})};
    }
  }
  return {};
}

RecurrentState cell_step_composed(CellKind kind, const Var& gx, const RecurrentState& s,
                                  const Var& w_hh, const Var& b_hh) {
  const int64_t h = s.h.dim(1);
  Var gh = ops::add(ops::matmul(s.h, w_hh, false, true), b_hh);  // (B,H) x (G*H,H)^T -> (B,G*H)
  switch (kind) {
    case CellKind::rnn:
      return {ops::tanh(ops::add(gx, gh)), Var()};
    case CellKind::gru: {
      Var r = ops::sigmoid(ops::add(gate(gx, 0, h), gate(gh, 0, h)));
      Var z = ops::sigmoid(ops::add(gate(gx, 1, h), gate(gh, 1, h)));
      Var n = ops::tanh(ops::add(gate(gx, 2, h), ops::mul(r, gate(gh, 2, h))));
      // (1 - z) n + z h  =  n + z (h - n)
      return {ops::add(n, ops::mul(z, ops::sub(s.h, n))), Var()};
    }
    case CellKind::lstm: {
      Var g = ops::add(gx, gh);
      Var i = ops::sigmoid(gate(g, 0, h));
      Var f = ops::sigmoid(gate(g, 1, h));
      Var u = ops::tanh(gate(g, 2, h));
      Var o = ops::sigmoid(gate(g, 3, h));
      Var c = ops::add(ops::mul(f, s.c), ops::mul(i, u));
      return {ops::mul(o, ops::tanh(c)), c};
    }
  }
  return {};
}

// ---------------------------------------------------------------------------------------------
// Cell

Cell::Cell(CellKind kind, int64_t input_size, int64_t hidden_size, Rng& rng, DType dtype)
    : kind_(kind), input_(input_size), hidden_(hidden_size) {
  const int64_t g = gate_count(kind) * hidden_size;
  const double bound = 1.0 / std::sqrt(static_cast<double>(hidden_size));
  auto make = [&](Shape shape) {
    Tensor t = Tensor::empty(shape, dtype);
    init::uniform(t, -bound, bound, rng);
    return t;
  };
  w_ih_ = &add_parameter("weight_ih", make({g, input_size}));
  w_hh_ = &add_parameter("weight_hh", make({g, hidden_size}));
  b_ih_ = &add_parameter("bias_ih", make({g}));
  b_hh_ = &add_parameter("bias_hh", make({g}));
}

RecurrentState Cell::forward(Tape& tape, const Var& x, const RecurrentState& s) {
  const char* name = cell_name(kind_);
  if (x.ndim() != 2 || x.dim(1) != input_ || s.h.ndim() != 2 || s.h.dim(0) != x.dim(0) ||
      s.h.dim(1) != hidden_ ||
      (kind_ == CellKind::lstm && (!s.c.value().defined() || s.c.shape() != s.h.shape())))
    throw ShapeError(fmt::format(
        "{} cell: input {} and state h {} c {} do not fit input size {} and hidden size {}", name,
        x.shape().str(), s.h.shape().str(), s.c.value().defined() ? s.c.shape().str() : "none",
        input_, hidden_));
  Var gx = ops::affine(x, w_ih_->var(tape), b_ih_->var(tape), tape.weight_packs());
  return cell_step(kind_, gx, s, w_hh_->var(tape), b_hh_->var(tape), tape.weight_packs());
}

Var Cell::project_head(Tape& tape, const Var& a, int64_t split) {
  if (split <= 0 || split >= input_ || a.ndim() < 2 || a.shape()[a.ndim() - 1] != split)
    throw ShapeError(fmt::format("{} cell: head {} does not fit a split at {} of input size {}",
                                 cell_name(kind_), a.shape().str(), split, input_));
  return project_head(tape, a, weight_head(tape, split));
}

Var Cell::project_head(Tape& tape, const Var& a, const Var& w_head) {
  const int64_t g = gate_count(kind_) * hidden_;
  if (w_head.ndim() != 2 || w_head.dim(0) != g || w_head.dim(1) <= 0 || w_head.dim(1) >= input_ ||
      a.ndim() < 2 || a.shape()[a.ndim() - 1] != w_head.dim(1))
    throw ShapeError(fmt::format("{} cell: head {} does not fit the block {} of W_ih ({}, {})",
                                 cell_name(kind_), a.shape().str(), w_head.shape().str(), g,
                                 input_));
  // w_head is a copy of W_ih's first columns: its packs are made from W_ih itself.
  return ops::affine(a, w_head, b_ih_->var(tape), tape.weight_packs(), {&w_ih_->value, 0});
}

void Cell::check_split(int64_t split) const {
  if (split <= 0 || split >= input_)
    throw ShapeError(
        fmt::format("{} cell: a split at {} of input size {}", cell_name(kind_), split, input_));
}

Var Cell::weight_head(Tape& tape, int64_t split) {
  check_split(split);
  return ops::slice(w_ih_->var(tape), 1, 0, split);  // (G*H, split)
}

Var Cell::weight_tail(Tape& tape, int64_t split) {
  check_split(split);
  return ops::slice(w_ih_->var(tape), 1, split, input_ - split);  // (G*H, in-split)
}

RecurrentState Cell::forward_split(Tape& tape, const Var& head, const Var& r, const Var& tail,
                                   const RecurrentState& s) {
  const int64_t g = gate_count(kind_) * hidden_;
  if (head.ndim() != 2 || head.dim(1) != g || r.ndim() != 2 || r.dim(0) != head.dim(0) ||
      tail.ndim() != 2 || tail.dim(0) != g || tail.dim(1) != r.dim(1) ||
      s.h.shape() != Shape{head.dim(0), hidden_})
    throw ShapeError(fmt::format("{} cell: head {}, rest {}, tail {} and state h {} do not fit",
                                 cell_name(kind_), head.shape().str(), r.shape().str(),
                                 tail.shape().str(), s.h.shape().str()));
  // tail is a copy of W_ih's last columns: its packs are made from W_ih itself.
  Var gx = ops::add(head, ops::matmul(r, tail, false, true, tape.weight_packs(),
                                      {&w_ih_->value, input_ - tail.dim(1)}));
  return cell_step(kind_, gx, s, w_hh_->var(tape), b_hh_->var(tape), tape.weight_packs());
}

// ---------------------------------------------------------------------------------------------
// RNN

RNN::RNN(CellKind kind, int64_t input_size, int64_t hidden_size, int num_layers, bool bidirectional,
         Rng& rng, DType dtype, double dropout)
    : kind_(kind),
      input_(input_size),
      hidden_(hidden_size),
      layers_(num_layers),
      bidirectional_(bidirectional),
      dropout_(dropout),
      dropout_rng_(rng.split()) {
  if (num_layers < 1)
    throw ValueError(
        fmt::format("{}: num_layers must be at least 1, got {}", cell_name(kind), num_layers));
  const int64_t g = gate_count(kind) * hidden_size;
  const double bound = 1.0 / std::sqrt(static_cast<double>(hidden_size));
  auto make = [&](Shape shape) {
    Tensor t = Tensor::empty(shape, dtype);
    init::uniform(t, -bound, bound, rng);
    return t;
  };
  for (int l = 0; l < num_layers; ++l) {
    const int64_t in = l == 0 ? input_size : hidden_size * directions();
    for (int d = 0; d < directions(); ++d) {
      std::string sfx = fmt::format("_l{}{}", l, d ? "_reverse" : "");
      Weights w;
      w.w_ih = &add_parameter("weight_ih" + sfx, make({g, in}));
      w.w_hh = &add_parameter("weight_hh" + sfx, make({g, hidden_size}));
      w.b_ih = &add_parameter("bias_ih" + sfx, make({g}));
      w.b_hh = &add_parameter("bias_hh" + sfx, make({g}));
      weights_.push_back(w);
    }
  }
}

Var RNN::run_direction(Tape& tape, const Weights& w, const Var& x, const Tensor& step_masks,
                       int64_t full_steps, RecurrentState s, bool reverse,
                       RecurrentState& final_state) {
  const int64_t b = x.dim(0), steps = x.dim(1), g = gate_count(kind_) * hidden_;
  // All steps' input projections in one product: (B,S,in) x (G*H,in)^T -> (B,S,G*H), laid out
  // step-major (S,B,G*H) once so that each step's slice is a view, not a copy.
  Var gx_all = ops::affine(x, w.w_ih->var(tape), w.b_ih->var(tape), tape.weight_packs());
  Var gx_steps = ops::permute(gx_all, {1, 0, 2});
  Var w_hh = w.w_hh->var(tape), b_hh = w.b_hh->var(tape);
  Tensor zeros = Tensor::zeros({b, hidden_}, x.dtype());
  std::vector<Var>& outputs = scratch_list<Var, struct RnnOutputs>();
  outputs.resize(static_cast<size_t>(steps));
  for (int64_t i = 0; i < steps; ++i) {
    const int64_t t = reverse ? steps - 1 - i : i;
    Var gx = ops::reshape(ops::slice(gx_steps, 0, t, 1), Shape{b, g});
    RecurrentState next = cell_step(kind_, gx, s, w_hh, b_hh, tape.weight_packs());
    if (t < full_steps) {  // every row is real here: the masks below would pass all of next
      s = next;
      outputs[t] = next.h;
      continue;
    }
    // (B,1): 1 where step t is a real token of that row
    const Tensor real = step_masks.rows(t, 1).reshape(Shape{b, 1});
    s.h = ops::where(real, next.h, s.h);
    if (kind_ == CellKind::lstm) s.c = ops::where(real, next.c, s.c);
    outputs[t] = ops::where(real, next.h, zeros);
  }
  final_state = s;
  Var y = ops::stack(outputs, 1);  // (B,S,H)
  outputs.clear();
  return y;
}

RNN::Output RNN::forward(Tape& tape, const Var& x, std::span<const int64_t> lengths, const Var& h0,
                         const Var& c0, Rng* dropout_rng) {
  const char* name = cell_name(kind_);
  if (x.ndim() != 3 || x.dim(2) != input_)
    throw ShapeError(fmt::format("{}: input {} should be (B,S,{})", name, x.shape().str(), input_));
  const int64_t b = x.dim(0), steps = x.dim(1),
                states = static_cast<int64_t>(layers_) * directions();
  if (static_cast<int64_t>(lengths.size()) != b)
    throw ShapeError(fmt::format("{}: {} lengths for a batch of {} (input {})", name,
                                 lengths.size(), b, x.shape().str()));
  for (size_t i = 0; i < lengths.size(); ++i)
    if (lengths[i] < 0 || lengths[i] > steps)
      throw ValueError(fmt::format("{}: length {} of row {} is outside [0, {}] (input {})", name,
                                   lengths[i], i, steps, x.shape().str()));
  const Shape state_shape{states, b, hidden_};
  for (const Var* v : {&h0, &c0})
    if (v->value().defined() && v->shape() != state_shape)
      throw ShapeError(fmt::format("{}: initial state {} should be {}", name, v->shape().str(),
                                   state_shape.str()));

  // Masks of real steps: step-major (S,B) for the recurrence, and (B,S,1) for the input.
  Tensor step_masks = Tensor::zeros({steps, b}, x.dtype());
  Tensor input_mask = Tensor::zeros({b, steps, 1}, x.dtype());
  for (int64_t t = 0; t < steps; ++t)
    for (int64_t r = 0; r < b; ++r)
      if (t < lengths[r]) {
        step_masks.set(t * b + r, 1.0);
        input_mask.set(r * steps + t, 1.0);
      }
  // Padded input steps are replaced, not multiplied, so whatever they hold (even NaN) is never
  // read. Steps before the shortest row's end are real in every row.
  const int64_t full_steps = b > 0 ? *std::min_element(lengths.begin(), lengths.end()) : steps;
  Var layer_in =
      full_steps == steps ? x : ops::where(input_mask, x, Tensor::zeros(x.shape(), x.dtype()));

  auto initial = [&](const Var& v, int64_t k) -> Var {
    if (!v.value().defined()) return Var(Tensor::zeros({b, hidden_}, x.dtype()));
    return ops::reshape(ops::slice(v, 0, k, 1), Shape{b, hidden_});
  };
  std::vector<Var>& h_n = scratch_list<Var, struct RnnFinalH>();
  std::vector<Var>& c_n = scratch_list<Var, struct RnnFinalC>();
  std::vector<Var>& outs = scratch_list<Var, struct RnnDirections>();
  for (int l = 0; l < layers_; ++l) {
    outs.clear();
    for (int d = 0; d < directions(); ++d) {
      const int64_t k = static_cast<int64_t>(l) * directions() + d;
      RecurrentState s{initial(h0, k), kind_ == CellKind::lstm ? initial(c0, k) : Var()};
      RecurrentState final_state;
      outs.push_back(run_direction(tape, weights_[k], layer_in, step_masks, full_steps, s, d == 1,
                                   final_state));
      h_n.push_back(final_state.h);
      if (kind_ == CellKind::lstm) c_n.push_back(final_state.c);
    }
    layer_in = outs.size() == 1 ? outs[0] : ops::concat(outs, 2);
    if (l + 1 < layers_ && dropout_ > 0)
      layer_in =
          ops::dropout(layer_in, dropout_, dropout_rng ? *dropout_rng : dropout_rng_, training());
  }
  Output out;
  out.y = layer_in;
  out.h_n = ops::stack(h_n, 0);
  if (kind_ == CellKind::lstm) out.c_n = ops::stack(c_n, 0);
  h_n.clear(), c_n.clear(), outs.clear();
  return out;
}

}  // namespace tapestry::nn
