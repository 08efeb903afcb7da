// Every differentiable op, one header per family.
#pragma once

#include "tapestry/ops/arith.h"
#include "tapestry/ops/attention_ops.h"
#include "tapestry/ops/dropout.h"
#include "tapestry/ops/index.h"
#include "tapestry/ops/loss.h"
#include "tapestry/ops/matmul.h"
#include "tapestry/ops/norm.h"
#include "tapestry/ops/reduce.h"
#include "tapestry/ops/rnn_cells.h"
#include "tapestry/ops/scaled_dot_attention.h"
#include "tapestry/ops/shape_ops.h"
#include "tapestry/ops/softmax.h"
#include "tapestry/ops/unary.h"
