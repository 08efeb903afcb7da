// Gradient clipping by global norm, as torch.nn.utils.clip_grad_norm_.
#pragma once

#include <span>

#include "tapestry/nn/parameter.h"

namespace tapestry::nn {

// Returns the L2 norm of all gradients taken together (blocks of 4096 squares summed in the
// gradient's dtype, as PyTorch sums in float32, the blocks in double) and, when
// max_norm / (norm + 1e-6) < 1, scales every gradient by that factor. Parameters with an undefined
// gradient are skipped. A non-finite norm (an inf or NaN gradient) is returned with the gradients
// left unchanged, so the caller can see it and skip the step instead of training on garbage; this
// differs from PyTorch, which would scale by NaN or 0. Throws ValueError if max_norm is negative or
// NaN, or a parameter pointer is null.
double clip_grad_norm(std::span<Parameter* const> params, double max_norm);

// The two halves of clip_grad_norm, for an optimizer that scales gradients as it reads them
// (Optimizer::step(grad_scale)): the global norm as clip_grad_norm returns it (null parameters
// throw ValueError), and the factor it would scale by, min(1, max_norm / (norm + 1e-6)); NaN
// for a non-finite norm (skip that step, as the trainer does).
double grad_norm(std::span<Parameter* const> params);
double clip_factor(double norm, double max_norm);

// grad_norm, with each gradient completed where it is read: prepare(context, i, begin, n) runs
// just before elements [begin, begin + n) of params[i]'s gradient are read, once for every
// element of every defined gradient (an undefined one is skipped, and not prepared), from the job
// that reads them, so that it may write them; the two jobs run on two cores when the gradients
// are many enough. The trainer adds the other shards' gradients so, in the pass that measures
// them, while they are in the cache. The norm is grad_norm's to the bit.
using GradRangeFn = void (*)(void* context, size_t param, int64_t begin, int64_t n);
double grad_norm(std::span<Parameter* const> params, GradRangeFn prepare, void* context);

}  // namespace tapestry::nn
