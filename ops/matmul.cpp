// Matrix products: the packed kernel (core/packed.h) for float32 weights, BLAS for the rest.
#include "tapestry/ops/matmul.h"

#include "tapestry/core/blas.h"
#include "tapestry/core/cpu_kernels.h"
#include "tapestry/core/gemm_profile.h"
#include "tapestry/core/packed.h"
#include "tapestry/ops/kernels.h"

namespace tapestry::ops {

namespace {

// The geometry of one product, resolved from the shapes and transpose flags.
struct Gemm {
  int64_t batch = 1;  // number of (M,K)x(K,N) products
  int64_t m, n, k;
  int64_t a_rows, a_cols, b_rows, b_cols;  // stored matrix sizes
  int64_t a_stride, b_stride;              // elements between batches (b_stride 0: shared b)
  bool ta, tb;
};

Gemm resolve(const Shape& a, const Shape& b, bool ta, bool tb) {
  auto fail = [&](const std::string& why) {
    return ShapeError(fmt::format("matmul: shapes {}{} and {}{}: {}", a.str(), ta ? "^T" : "",
                                  b.str(), tb ? "^T" : "", why));
  };
  bool ok = (a.ndim() == 2 && b.ndim() == 2) || (a.ndim() == 3 && (b.ndim() == 3 || b.ndim() == 2));
  if (!ok) throw fail("expected (M,K)x(K,N), (B,M,K)x(B,K,N) or (B,M,K)x(K,N)");
  Gemm g;
  g.ta = ta;
  g.tb = tb;
  g.a_rows = a[a.ndim() - 2];
  g.a_cols = a[a.ndim() - 1];
  g.b_rows = b[b.ndim() - 2];
  g.b_cols = b[b.ndim() - 1];
  g.m = ta ? g.a_cols : g.a_rows;
  g.k = ta ? g.a_rows : g.a_cols;
  int64_t kb = tb ? g.b_cols : g.b_rows;
  g.n = tb ? g.b_rows : g.b_cols;
  if (g.k != kb) throw fail(fmt::format("inner dimensions differ ({} vs {})", g.k, kb));
  if (a.ndim() == 3) {
    g.batch = a[0];
    if (b.ndim() == 3 && b[0] != a[0])
      throw fail(fmt::format("batch sizes differ ({} vs {})", a[0], b[0]));
  }
  g.a_stride = g.a_rows * g.a_cols;
  g.b_stride = b.ndim() == 3 ? g.b_rows * g.b_cols : 0;
  return g;
}

// c_i = alpha * op(a_i) op(b_i) + beta * c_i for every batch i. When b is shared and a is not
// transposed, the batches stack into one taller product, which BLAS runs faster.
template <class T>
void batched_gemm(const Gemm& g, const T* a, const T* b, T* c, T beta) {
  if (g.b_stride == 0 && !g.ta) {
    blas::gemm(false, g.tb, g.batch * g.m, g.n, g.k, T(1), a, g.a_cols, b, g.b_cols, beta, c, g.n);
    return;
  }
  for (int64_t i = 0; i < g.batch; ++i)
    blas::gemm(g.ta, g.tb, g.m, g.n, g.k, T(1), a + i * g.a_stride, g.a_cols, b + i * g.b_stride,
               g.b_cols, beta, c + i * g.m * g.n, g.n);
}

// The attribute of a matmul or affine node whose weight was read through its pack (a
// parameter's).
constexpr int64_t kPackedB = 1;

// Which products hand their weight's gradient to the tape to multiply with the other steps' rows
// (Tape::defer_product). A per-step product of 32 rows reads and writes the whole gradient for
// little arithmetic: deferring saves that where the gradient does not stay in cache from one step
// to the next (medium's decoder W_hh, 1536 x 512 floats, 3 MB), and saves the call overhead of
// products of very few rows (tiny's single row). Staging costs copies of every row, though, and a
// gradient of a few hundred KB stays in L2 between steps: small (16 rows a step, gradients up to
// 196 KB) trained 8.12 -> 7.50 ms a step without deferring on the AMD EPYC Zen 4 of the README,
// while tiny and medium were 7% and 2% slower without it. One of 640 rows (a whole batch's) gains
// nothing either way.
constexpr int64_t kDeferRows = 256;       // products of at least this many rows never defer
constexpr int64_t kDeferFewRows = 8;      // products of fewer rows always do
constexpr int64_t kDeferBytes = 1 << 20;  // in between, gradients of at least this size do
bool defer_worth_it(int64_t rows, int64_t p, int64_t q, DType dtype) {
  if (rows >= kDeferRows) return false;
  return rows < kDeferFewRows || p * q * static_cast<int64_t>(dtype_size(dtype)) >= kDeferBytes;
}

// The tensor whose packs serve the product's weight operand b (called `name` in op's messages):
// b itself, or the weight of which `source` says b is a copy of the columns [col0, col0 + k), b
// being (N,K) and read as b^T (`fits`). Throws DTypeError or ShapeError naming both unless b can
// be that copy.
const Tensor& pack_weight(const char* op, const char* name, const Tensor& b, PackSource source,
                          bool fits, int64_t n, int64_t k) {
  if (!source.weight) {
    if (source.row0 != 0)
      throw ShapeError(fmt::format("{}: rows {}.. of {} {} name no weight", op, source.row0, name,
                                   b.shape().str()));
    return b;
  }
  const Tensor& weight = *source.weight;
  if (weight.dtype() != b.dtype())
    throw DTypeError(fmt::format("{}: {} {} {} is not a copy of the weight {} {} it names", op,
                                 name, dtype_name(b.dtype()), b.shape().str(),
                                 dtype_name(weight.dtype()), weight.shape().str()));
  if (weight.ndim() != 2 || !fits || source.row0 < 0 || source.row0 + n > weight.dim(0) ||
      source.col0 < 0 || source.col0 + k > weight.dim(1))
    throw ShapeError(
        fmt::format("{}: {} {} is not rows {}.. and columns {}.. of the weight {} it names", op,
                    name, b.shape().str(), source.row0, source.col0, weight.shape().str()));
  return weight;
}

// A weight whose pack products of one recording read at least this many times is read at every
// time step (Tape::pack_reads).
constexpr int64_t kPerStepReads = 4;
// dx = dy W of a product whose forward pass read W's pack goes through the pack of W^T for fewer
// rows than kPackedDxRows, if the weight is read at every time step (a pack made once serves
// them all) or the product has at least kPackedDxMinRows rows (enough work to pay for a pack made
// for one or two reads); otherwise through BLAS. Measured one product at a time on one core of
// the AVX2-only Zen 4, the pack's making included: a `small` Transformer's dx (120 or 240 rows,
// W 128-384 x 128-256) 1.07-1.17x faster than BLAS; a `tiny` one's 10 rows 0.66x (its W is
// read once); 640 rows of `medium` 0.96-1.02x.
constexpr int64_t kPackedDxRows = 256;
constexpr int64_t kPackedDxMinRows = 64;

}  // namespace

// ---------------------------------------------------------------------------------------------
// matmul
// y = op(a) op(b);  d op(a) += dy op(b)^T;  d op(b) += op(a)^T dy
// With the transposes folded into BLAS flags (all beta = 1, so gradients accumulate):
//   da += dy op(b)^T     (no trans_a)      da += op(b) dy^T    (trans_a)
//   db += op(a)^T dy     (no trans_b)      db += dy^T op(a)    (trans_b)
void matmul_backward(Tape& tape, const Node& n) {
  const Tensor& a = tape.saved(n, 0);
  const Tensor& b = tape.saved(n, 1);
  const Gemm g = resolve(a.shape(), b.shape(), n.scalar[0] != 0, n.scalar[1] != 0);
  bool first;
  Tensor* da = tape.input_grad_to_write(n, 0, &first);
  Tensor* db = tape.input_grad(n, 1);
  dispatch(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    const T* dy = n.grad.data<T>();
    const int64_t y_stride = g.m * g.n;
    // da (R,K) += dy (R,N) b (N,K) through the pack of b^T when the forward pass read b's pack
    // (only float32 products are packed): per-timestep products of a few rows run faster there.
    WeightPacks* packs = tape.weight_packs();
    const auto attrs = tape.attrs(n);
    const float beta = first ? 0.0f : 1.0f;  // da's first share is stored
    if (da && packs && attrs.size() == 2 && attrs[0] == kPackedB) {
      const PackView b_transposed{attrs[1], g.k, true};  // b^T, of the weight saved third
      if constexpr (std::is_same_v<T, float>)
        gemm_packed(g.batch * g.m, g.n, dy, g.n, packs->get(tape.saved(n, 2), b_transposed), beta,
                    da->data<float>(), g.a_cols);
    } else if (da) {
      T* d = da->data<T>();
      if (g.b_stride == 0 && !g.ta) {  // stacked batches: one product
        blas::gemm(false, !g.tb, g.batch * g.m, g.k, g.n, T(1), dy, g.n, pb, g.b_cols, T(beta), d,
                   g.a_cols);
      } else {
        for (int64_t i = 0; i < g.batch; ++i) {
          const T* bi = pb + i * g.b_stride;
          const T* dyi = dy + i * y_stride;
          T* dai = d + i * g.a_stride;
          if (!g.ta)
            blas::gemm(false, !g.tb, g.m, g.k, g.n, T(1), dyi, g.n, bi, g.b_cols, T(beta), dai,
                       g.a_cols);
          else
            blas::gemm(g.tb, true, g.k, g.m, g.n, T(1), bi, g.b_cols, dyi, g.n, T(beta), dai,
                       g.a_cols);
        }
      }
    }
    // A shared b's gradient of a few rows (a weight read at every time step) is left to the
    // tape, which multiplies the rows of all the steps at once (core/deferred_grads.h).
    const int64_t rows = g.batch * g.m;
    if (db && g.b_stride == 0 && !g.ta && defer_worth_it(rows, g.k, g.n, a.dtype()) &&
        (g.tb ? tape.defer_product(n, 1, a.dtype(), dy, g.n, pa, g.k, rows)    // db += dy^T a
              : tape.defer_product(n, 1, a.dtype(), pa, g.k, dy, g.n, rows)))  // db += a^T dy
      db = nullptr;
    if (db) {
      T* d = db->data<T>();
      if (g.b_stride == 0 && !g.ta) {  // shared b: its gradient sums over the stacked batches
        if (!g.tb)
          blas::gemm(true, false, g.k, g.n, g.batch * g.m, T(1), pa, g.a_cols, dy, g.n, T(1), d,
                     g.b_cols);
        else
          blas::gemm(true, false, g.n, g.k, g.batch * g.m, T(1), dy, g.n, pa, g.a_cols, T(1), d,
                     g.b_cols);
      } else {
        for (int64_t i = 0; i < g.batch; ++i) {
          const T* ai = pa + i * g.a_stride;
          const T* dyi = dy + i * y_stride;
          T* dbi = d + i * g.b_stride;
          if (!g.tb)
            blas::gemm(!g.ta, false, g.k, g.n, g.m, T(1), ai, g.a_cols, dyi, g.n, T(1), dbi,
                       g.b_cols);
          else
            blas::gemm(true, g.ta, g.n, g.k, g.m, T(1), dyi, g.n, ai, g.a_cols, T(1), dbi,
                       g.b_cols);
        }
      }
    }
  });
}
TAPESTRY_OP(kMatmul, "matmul", matmul_backward, "y = a b;  da += dy b^T;  db += a^T dy");

Var matmul(const Var& a, const Var& b, bool trans_a, bool trans_b, WeightPacks* packs,
           PackSource source) {
  detail::same_dtype("matmul", a, b);
  const Gemm g = resolve(a.shape(), b.shape(), trans_a, trans_b);
  const Tensor& weight = pack_weight("matmul", "b", b.value(), source,
                                     trans_b && b.ndim() == 2 && source.row0 == 0, g.n, g.k);
  Shape out = a.ndim() == 3 ? Shape{g.batch, g.m, g.n} : Shape{g.m, g.n};
  Tensor y = Tensor::empty(out, a.dtype());
  const int64_t rows = g.batch * g.m;  // with b shared and a not transposed, one stacked product
  // The pack's product writes all the weight's rows: b must be all of them, not the first few.
  const bool packed = packs && packed_kernel_available() && a.dtype() == DType::f32 &&
                      g.b_stride == 0 && !g.ta && g.tb && rows >= 1 && g.n == weight.dim(0);
  if (packed) {
    gemm_packed(rows, g.k, a.value().data<float>(), g.k,
                packs->get(weight, {source.col0, g.k, false}), 0.0f, y.data<float>(), g.n);
  } else {
    dispatch(a.dtype(), [&](auto tag) {
      using T = decltype(tag);
      batched_gemm<T>(g, a.value().data<T>(), b.value().data<T>(), y.data<T>(), T(0));
    });
  }
  Tape* tape = recording_tape({&a, &b});
  if (!tape) return Var(std::move(y));
  int32_t id = tape->record(kMatmul, std::move(y), {&a, &b});
  tape->save(id, a.value());
  tape->save(id, b.value());
  tape->set_scalars(id, trans_a, trans_b);
  // b is a weight with a pack: the backward pass reads the pack of b's transpose too, made
  // from the same weight.
  if (packed) {
    tape->save(id, weight);
    const int64_t attrs[2] = {kPackedB, source.col0};
    tape->save_attrs(id, attrs);
  }
  return tape->output(id);
}

// ---------------------------------------------------------------------------------------------
// affine
// y = x W^T + b;  dx += dy W;  dW += dy^T x;  db += sum_rows dy
// One op rather than matmul then add: the product without its bias is never kept (at the output
// layer it is as big as the logits). x (...,K) is read as R = numel/K rows. Saved: x and W,
// alive anyway, and where W was read through a pack the weight it was packed from (the attrs:
// kPackedB and its first column), whose pack of W^T backward may read.
namespace {
// The rows of an (N,K) or (B,S,K) input: N, or B*S (also when K = 0).
int64_t leading_rows(const Shape& s) {
  return s.ndim() == 3 ? s[0] * s[1] : s[0];
}
}  // namespace

void affine_backward(Tape& tape, const Node& n) {
  const Tensor& x = tape.saved(n, 0);
  const Tensor& w = tape.saved(n, 1);
  bool first;
  Tensor *dx = tape.input_grad_to_write(n, 0, &first), *dw = tape.input_grad(n, 1),
         *db = tape.input_grad(n, 2);
  const int64_t out = w.dim(0), k = w.dim(1), rows = leading_rows(x.shape());
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* dy = n.grad.data<T>();
    // Where the forward pass read W's pack, the pack of W^T (see kPackedDxRows): made once a
    // step and read at every time step by a recurrence's few rows, or once or twice (one per
    // shard) by a Transformer layer's product of a batch of rows.
    const auto attrs = tape.attrs(n);
    WeightPacks* packs = tape.weight_packs();
    const bool packed =
        dx && packs && attrs.size() == 2 && attrs[0] == kPackedB && rows < kPackedDxRows &&
        (rows >= kPackedDxMinRows ||
         tape.pack_reads(tape.saved(n, 2).data<float>(), attrs[1]) >= kPerStepReads);
    if (packed) {  // (R,out) x (out,K) -> (R,K), W^T packed from the weight saved third
      if constexpr (std::is_same_v<T, float>)
        gemm_packed(rows, out, dy, out, packs->get(tape.saved(n, 2), {attrs[1], k, true}),
                    first ? 0.0f : 1.0f, dx->data<float>(), k);
    } else if (dx) {
      blas::gemm(false, false, rows, k, out, T(1), dy, out, w.data<T>(), k, T(first ? 0 : 1),
                 dx->data<T>(), k);
    }
    if (dw && defer_worth_it(rows, out, k, x.dtype()) &&
        tape.defer_product(n, 1, x.dtype(), dy, out, x.data<T>(), k, rows))
      dw = nullptr;  // a per-step product's rows, multiplied with the other steps' by the tape
    if (dw)          // (R,out)^T x (R,K) -> (out,K)
      blas::gemm(true, false, out, k, rows, T(1), dy, out, x.data<T>(), k, T(1), dw->data<T>(), k);
    if (db) {
      T* d = db->data<T>();
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < out; ++j) d[j] += dy[r * out + j];
    }
  });
}
TAPESTRY_OP(kAffine, "affine", affine_backward,
            "y = x W^T + b;  dx += dy W;  dW += dy^T x;  db += sum_rows dy");

Var affine(const Var& x, const Var& w, const Var& b, WeightPacks* packs, PackSource source) {
  const bool bias = b.value().defined();
  if (bias)
    check_same_dtype("affine", {&x.value(), &w.value(), &b.value()});
  else
    detail::same_dtype("affine", x, w);
  if ((x.ndim() != 2 && x.ndim() != 3) || w.ndim() != 2 || x.shape().back() != w.dim(1) ||
      (bias && (b.ndim() != 1 || b.dim(0) != w.dim(0))))
    throw ShapeError(fmt::format(
        "affine: input {}, weight {} and bias {} do not fit: expected (N,K) or (B,S,K), (M,K) "
        "and (M)",
        x.shape().str(), w.shape().str(), bias ? b.shape().str() : "none"));
  const int64_t out = w.dim(0), k = w.dim(1), rows = leading_rows(x.shape());
  const Tensor& weight = pack_weight("affine", "W", w.value(), source, true, out, k);
  Shape shape = x.shape();
  shape = x.ndim() == 3 ? Shape{shape[0], shape[1], out} : Shape{shape[0], out};
  Tensor y = Tensor::empty(shape, x.dtype());
  // One row too (decoding one sentence): the packed kernel's one-row path, 8 panels at a time,
  // beats the matrix-vector kernel on the unpacked weight (tiny decoding 32.0 -> 28.4 us), and a
  // row's result is then the same bits alone as in a batch.
  // A block of the weight's rows (whole panels only) reads the whole weight's pack.
  const bool all_rows = source.row0 == 0 && out == weight.dim(0);
  const bool packed = packs && packed_kernel_available() && x.dtype() == DType::f32 && rows >= 1 &&
                      whole_panels(source.row0, out, weight.dim(0));
  // A few rows against a weight read once since it last changed are multiplied by it in place,
  // with the bits its pack would give (a Transformer's layers in a training step: `tiny`'s 10
  // rows).
  const auto few_rows = packed ? cpu::few_rows_kernel(rows, k) : nullptr;
  const PackedMatrix* pack = nullptr;
  if (few_rows)
    pack = packs->get_unless_read_once(weight, {source.col0, k, false}, out);
  else if (packed)
    pack = &packs->get(weight, {source.col0, k, false});
  const bool in_place = few_rows && !pack;
  const float* bias_data = bias && packed ? b.value().data<float>() : nullptr;
  if (in_place) {
    blas::GemmTimer timer('N', 'W', rows, out, k);
    few_rows(rows, out, k, x.value().data<float>(), k,
             weight.data<float>() + source.row0 * weight.dim(1) + source.col0, weight.dim(1), 0.0f,
             bias_data, y.data<float>(), out);
  } else if (packed) {
    gemm_packed_rows(rows, k, x.value().data<float>(), k, *pack, source.row0, out, 0.0f,
                     y.data<float>(), out, bias_data);
  } else {
    dispatch(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      T* py = y.data<T>();
      blas::gemm(false, true, rows, out, k, T(1), x.value().data<T>(), k, w.value().data<T>(), k,
                 T(0), py, out);
      if (!bias) return;
      const T* pb = b.value().data<T>();
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < out; ++j) py[r * out + j] += pb[j];
    });
  }
  Tape* tape = recording_tape({&x, &w, &b});
  if (!tape) return Var(std::move(y));
  // Backward reads the pack of W^T only for all of W's rows (a block's dx, and dx of a weight
  // multiplied in place, go through BLAS).
  const bool transposed_pack = packed && !in_place && all_rows;
  if (transposed_pack) tape->count_pack_read(weight.data<float>(), source.col0);
  const int32_t id = tape->record(kAffine, std::move(y), {&x, &w, &b});
  tape->save(id, x.value());
  tape->save(id, w.value());
  if (transposed_pack) {  // as matmul: backward may read the pack of W^T, made from the same weight
    tape->save(id, weight);
    const int64_t attrs[2] = {kPackedB, source.col0};
    tape->save_attrs(id, attrs);
  }
  return tape->output(id);
}

}  // namespace tapestry::ops
