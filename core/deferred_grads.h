// Weight gradients of per-time-step products, gathered in backward and multiplied at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tapestry/core/tensor.h"

namespace tapestry {

// A weight read at every time step (a recurrent W_hh, an attention's query layer) gets, in
// backward, one small product per step into its gradient: dW (P,Q) += u (R,P)^T v (R,Q) over the
// step's R = B rows. Each such product reads and writes the whole of dW (1536 x 512 floats at
// `medium`) for 32 rows of arithmetic. Staged here instead, every product's rows of u and v are
// copied, and all the rows staged for one gradient are multiplied at once, dW += U^T V with
// K = steps x B: dW is read and written once. The sum is the same up to rounding (the additions'
// order). The tape owns one of these (Tape::defer_product) and runs the products of a gradient
// before the backward of the node holding it, or at the end of backward for a leaf's.
class DeferredGrads {
 public:
  // Stages grad (P,Q) += u (R,P)^T v (R,Q), grad belonging to node `owner`; grad, u and v have
  // `dtype` (f32 or f64). grad must stay where it is until flushed.
  void stage(int32_t owner, Tensor* grad, DType dtype, const void* u, int64_t p, const void* v,
             int64_t q, int64_t rows);
  // Runs the products staged for node `owner`'s gradient.
  void flush(int32_t owner);
  // Runs every staged product.
  void flush_all();
  // Whether any product is staged (one test per node in backward when none is).
  bool pending() const { return pending_ > 0; }
  // Products staged since the last clear() (the tape clears at the start of each backward).
  int64_t staged() const { return staged_; }
  // Drops what is staged without running it (a backward that threw, a new recording); the
  // buffers are kept, so a steady training step allocates nothing here.
  void clear();

 private:
  // One gradient's staged rows; its dtype and (P,Q) are grad's.
  struct Entry {
    int32_t owner = -1;
    Tensor* grad = nullptr;
    int64_t rows = 0;
    // rows x P and rows x Q elements of grad's dtype, appended per stage
    std::vector<std::byte> u, v;
  };
  void run(Entry& e);

  std::vector<Entry> entries_;  // the first used_ are this backward's; later ones keep buffers
  size_t used_ = 0;
  int pending_ = 0;  // entries holding rows not yet multiplied
  int64_t staged_ = 0;
};

}  // namespace tapestry
