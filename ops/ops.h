// Every differentiable op, one header per family.
#pragma once

#include "ops/arith.h"
#include "ops/matmul.h"
#include "ops/unary.h"
