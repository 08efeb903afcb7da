// The gradient-check cases of every op, one function per op family.
#pragma once

#include "tapestry/core/gradcheck.h"

namespace tapestry::ops {

// Adds every op family's cases.
void add_gradcheck_cases(GradcheckRegistry& reg);

void add_arith_cases(GradcheckRegistry& reg);
void add_unary_cases(GradcheckRegistry& reg);
void add_matmul_cases(GradcheckRegistry& reg);
void add_softmax_cases(GradcheckRegistry& reg);
void add_loss_cases(GradcheckRegistry& reg);
void add_reduce_cases(GradcheckRegistry& reg);
void add_shape_cases(GradcheckRegistry& reg);
void add_index_cases(GradcheckRegistry& reg);
void add_dropout_cases(GradcheckRegistry& reg);
void add_rnn_cell_cases(GradcheckRegistry& reg);
void add_attention_op_cases(GradcheckRegistry& reg);
void add_norm_cases(GradcheckRegistry& reg);

}  // namespace tapestry::ops
