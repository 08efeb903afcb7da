// Gathers the gradient-check cases of ops/, nn/ and models/.
#include "models/gradcheck_registry.h"

#include "models/gradcheck_cases.h"
#include "nn/gradcheck_cases.h"
#include "ops/gradcheck_cases.h"

namespace tapestry {

void add_all_gradcheck_cases(GradcheckRegistry& reg) {
  ops::add_gradcheck_cases(reg);
  nn::add_gradcheck_cases(reg);
  models::add_gradcheck_cases(reg);
}

}  // namespace tapestry
