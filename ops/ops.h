// Every differentiable op, one header per family.
#pragma once

#include "ops/arith.h"
#include "ops/attention_ops.h"
#include "ops/dropout.h"
#include "ops/index.h"
#include "ops/loss.h"
#include "ops/matmul.h"
#include "ops/reduce.h"
#include "ops/rnn_cells.h"
#include "ops/shape_ops.h"
#include "ops/softmax.h"
#include "ops/unary.h"
