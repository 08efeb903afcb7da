// Gradient-check cases for the fused GRU and LSTM cells: batch sizes, gates saturated or not.
#include "tapestry/ops/gradcheck_cases.h"
#include "tapestry/ops/rnn_cells.h"

namespace tapestry::ops {

void add_rnn_cell_cases(GradcheckRegistry& reg) {
  using S = std::span<const Var>;
  auto gru = [](S x) { return gru_cell(x[0], x[1], x[2], x[3]); };
  auto lstm = [](S x) { return lstm_cell(x[0], x[1], x[2], x[3]); };
  reg.add(op_case("gru_cell", "batch 3, H = 4", {{{3, 12}}, {{3, 12}}, {{12}}, {{3, 4}}}, gru));
  reg.add(op_case("gru_cell", "batch 1, H = 1", {{{1, 3}}, {{1, 3}}, {{3}}, {{1, 1}}}, gru));
  reg.add(op_case("gru_cell", "wide pre-activations [-4,4]",
                  {{{2, 9}, -4, 4}, {{2, 9}, -4, 4}, {{9}}, {{2, 3}, -2, 2}}, gru));
  reg.add(op_case("lstm_cell", "batch 3, H = 4", {{{3, 16}}, {{3, 16}}, {{16}}, {{3, 4}}}, lstm));
  reg.add(op_case("lstm_cell", "batch 1, H = 1", {{{1, 4}}, {{1, 4}}, {{4}}, {{1, 1}}}, lstm));
  reg.add(op_case("lstm_cell", "wide pre-activations [-4,4]",
                  {{{2, 12}, -4, 4}, {{2, 12}, -4, 4}, {{12}}, {{2, 3}, -2, 2}}, lstm));
}

}  // namespace tapestry::ops
