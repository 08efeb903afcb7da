// Decoding's steps behind one interface, for greedy and beam search: each architecture's stepper,
// and make_stepper, which chooses one.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "tapestry/core/tape.h"
#include "tapestry/models/batch.h"
#include "tapestry/models/seq2seq.h"

namespace tapestry::models {

// One architecture's decoding steps over a batch: the logits of the next token for every row, and
// the state carried between steps. A stepper is made once for a model and started afresh for
// every batch.
class Stepper {
 public:
  virtual ~Stepper() = default;
  // Encodes the batch, repeats its rows as `rows` says (beam search's k rows per sentence; empty:
  // each row once) and starts the decoder's state for up to `capacity` steps.
  virtual void start(const Batch& batch, std::span<const int32_t> rows, int64_t capacity) = 0;
  // The logits (B,V) after feeding y_prev (B ids) at step t; `weights` gets this step's attention
  // over the source (B,S) (undefined when the model has none). Both may be overwritten by the
  // next step: read them before taking it.
  virtual Var step(std::span<const int32_t> y_prev, int64_t t, Var& weights) = 0;
  // Row i continues from row rows[i] (beam search's parents).
  virtual void select_rows(std::span<const int32_t> rows) = 0;
  // Returns the state's tensors to the pool (a kept stepper holds no memory between batches).
  virtual void release() = 0;
};

// The stepper decoding `model` on `tape` (which should record nothing): the raw path of
// models/rnn_inference.h for a float32 RNN it covers, unless `through_ops`; otherwise every step
// through the ops (the reference the raw path is tested against: both give the same bits).
std::unique_ptr<Stepper> make_stepper(Seq2Seq& model, Tape& tape, bool through_ops = false);

}  // namespace tapestry::models
