// Gradient check of a module of your own: every parameter's gradient and every input's, against
// finite differences in float64, printed as a table by gradcheck_table.
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "tapestry/core/gradcheck.h"
#include "tapestry/nn/module.h"

namespace tapestry::nn {

// Checks fn(tape, x) = a function of the module and of inputs x, with respect to each input
// (named x0, x1, ...) and each of the module's parameters (by their paths), as
// tapestry::gradcheck does for a plain function. The module must be float64 (build it with
// DType::f64); its parameters are perturbed in place and put back, and their gradients are
// overwritten. Throws DTypeError naming a float32 parameter, ValueError as gradcheck does.
GradcheckResult gradcheck_module(Module& module,
                                 const std::function<Var(Tape&, std::span<const Var> x)>& fn,
                                 std::vector<Tensor> inputs, const GradcheckOptions& options = {});

}  // namespace tapestry::nn
