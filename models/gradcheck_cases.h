// The whole-model gradient-check cases: every attention variant with both decoders and cells.
#pragma once

#include "tapestry/core/gradcheck.h"

namespace tapestry::models {

void add_gradcheck_cases(GradcheckRegistry& reg);

}  // namespace tapestry::models
