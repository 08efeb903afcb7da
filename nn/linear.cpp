// Linear layer: y = x W^T + b as one affine op over all leading axes.
#include "tapestry/nn/linear.h"

#include <fmt/format.h>

#include <cmath>

#include "tapestry/nn/init.h"
#include "tapestry/ops/matmul.h"

namespace tapestry::nn {

Linear::Linear(int64_t in, int64_t out, bool bias, Rng& rng, DType dtype) : in_(in), out_(out) {
  const double bound = in > 0 ? 1.0 / std::sqrt(static_cast<double>(in)) : 0.0;
  Tensor w = Tensor::empty({out, in}, dtype);
  init::uniform(w, -bound, bound, rng);
  weight_ = &add_parameter("weight", w);
  if (bias) {
    Tensor b = Tensor::empty({out}, dtype);
    init::uniform(b, -bound, bound, rng);
    bias_ = &add_parameter("bias", b);
  }
}

Var Linear::forward(Tape& tape, const Var& x) {
  if ((x.ndim() != 2 && x.ndim() != 3) || x.shape().back() != in_)
    throw ShapeError(
        fmt::format("linear: input {} does not fit weight ({},{}): expected (N,{}) or (B,S,{})",
                    x.shape().str(), out_, in_, in_, in_));
  // (N,in) x (out,in)^T + (out) -> (N,out)
  return ops::affine(x, weight_->var(tape), bias_ ? bias_->var(tape) : Var(), tape.weight_packs());
}

}  // namespace tapestry::nn
