// Gathers the gradient-check cases of ops/, nn/ and models/.
#include "tapestry/models/gradcheck_registry.h"

#include "tapestry/models/gradcheck_cases.h"
#include "tapestry/nn/gradcheck_cases.h"
#include "tapestry/ops/gradcheck_cases.h"

namespace tapestry {

void add_all_gradcheck_cases(GradcheckRegistry& reg) {
  ops::add_gradcheck_cases(reg);
  nn::add_gradcheck_cases(reg);
  models::add_gradcheck_cases(reg);
}

}  // namespace tapestry
