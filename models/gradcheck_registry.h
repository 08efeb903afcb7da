// The whole gradient-check registry: every op, layer and model case.
#pragma once

#include "tapestry/core/gradcheck.h"

namespace tapestry {

void add_all_gradcheck_cases(GradcheckRegistry& reg);

}  // namespace tapestry
