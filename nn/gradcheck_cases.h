// The gradient-check cases of every layer in nn/.
#pragma once

#include <functional>
#include <memory>

#include "tapestry/core/gradcheck.h"
#include "tapestry/nn/module.h"

namespace tapestry::nn {

// Adds every layer's cases and requires each layer name to have one.
void add_gradcheck_cases(GradcheckRegistry& reg);

// A case that checks a module's parameters and the inputs given to it: `make` builds the module in
// float64; `fn` runs it on leaves bound to the random inputs.
struct InputTensor {
  std::string name;
  Shape shape;
  double lo = -1, hi = 1;
};
using ModuleMaker = std::function<std::unique_ptr<Module>(Rng&)>;
using ModuleFn = std::function<Var(Tape&, Module&, std::span<const Var>)>;
GradcheckCase module_case(std::string layer, std::string name, std::vector<InputTensor> inputs,
                          ModuleMaker make, ModuleFn fn);

}  // namespace tapestry::nn
