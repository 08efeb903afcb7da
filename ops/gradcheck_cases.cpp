// Collects the gradient-check cases of every op family.
#include "tapestry/ops/gradcheck_cases.h"

namespace tapestry::ops {

void add_gradcheck_cases(GradcheckRegistry& reg) {
  add_arith_cases(reg);
  add_unary_cases(reg);
  add_matmul_cases(reg);
  add_softmax_cases(reg);
  add_loss_cases(reg);
  add_reduce_cases(reg);
  add_shape_cases(reg);
  add_index_cases(reg);
  add_dropout_cases(reg);
  add_rnn_cell_cases(reg);
  add_attention_op_cases(reg);
  add_norm_cases(reg);
}

}  // namespace tapestry::ops
