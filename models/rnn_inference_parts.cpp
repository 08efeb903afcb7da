// A recurrent cell's step on raw buffers for RNN decoding, the arithmetic of the cell ops' rows.
#include "tapestry/models/rnn_inference_parts.h"

#include "tapestry/core/cpu_kernels.h"
#include "tapestry/ops/kernels.h"

namespace tapestry::models::detail {

void cell_step(nn::CellKind kind, int64_t hs, const CellWeights& w, const float* gx,
               int64_t gx_stride, const float* hw, const float* h, const float* c, float* h2,
               float* c2, int64_t n, Buffer& scratch) {
  switch (kind) {
    case nn::CellKind::gru: {
      float* gates = sized(scratch, 4 * hs);
      for (int64_t i = 0; i < n; ++i)
        ops::detail::gru_row(gx + i * gx_stride, hw + i * 3 * hs, w.b_hh, h + i * hs, gates,
                             gates + hs, gates + 2 * hs, gates + 3 * hs, h2 + i * hs, hs);
      return;
    }
    case nn::CellKind::lstm: {
      float* gates = sized(scratch, 4 * hs);
      for (int64_t i = 0; i < n; ++i)
        ops::detail::lstm_row(gx + i * gx_stride, hw + i * 4 * hs, w.b_hh, c + i * hs, gates,
                              c2 + i * hs, h2 + i * hs, hs);
      return;
    }
    case nn::CellKind::rnn: {
      float* pre = sized(scratch, n * hs);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < hs; ++j)
          pre[i * hs + j] = gx[i * gx_stride + j] + (hw[i * hs + j] + w.b_hh[j]);
      cpu::kernels().tanh(pre, h2, n * hs);
      return;
    }
  }
}

}  // namespace tapestry::models::detail
