// Weight gradients of per-time-step products, gathered in backward and multiplied at once.
#include "tapestry/core/deferred_grads.h"

#include <fmt/format.h>

#include "tapestry/core/blas.h"
#include "tapestry/core/errors.h"

namespace tapestry {

void DeferredGrads::stage(int32_t owner, Tensor* grad, DType dtype, const void* u, int64_t p,
                          const void* v, int64_t q, int64_t rows) {
  if (grad->dtype() != dtype || grad->ndim() != 2 || grad->dim(0) != p || grad->dim(1) != q)
    throw ShapeError(fmt::format("deferred gradient: a ({},{}) product into a gradient {} {}", p, q,
                                 grad->shape().str(), dtype_name(grad->dtype())));
  if (rows <= 0) return;
  Entry* e = nullptr;
  for (size_t i = 0; i < used_ && !e; ++i)
    if (entries_[i].grad == grad) e = &entries_[i];
  if (!e) {
    if (used_ == entries_.size()) entries_.emplace_back();
    e = &entries_[used_++];
    e->owner = owner;
    e->grad = grad;
    e->rows = 0;
    e->u.clear();
    e->v.clear();
  }
  if (e->rows == 0) ++pending_;
  const size_t size = dtype_size(dtype);
  const auto* bu = static_cast<const std::byte*>(u);
  const auto* bv = static_cast<const std::byte*>(v);
  e->u.insert(e->u.end(), bu, bu + rows * p * size);
  e->v.insert(e->v.end(), bv, bv + rows * q * size);
  e->rows += rows;
  ++staged_;
}

// grad (P,Q) += U (R,P)^T V (R,Q): one product over every staged row.
void DeferredGrads::run(Entry& e) {
  if (e.rows == 0) return;
  const int64_t p = e.grad->dim(0), q = e.grad->dim(1);
  if (e.grad->dtype() == DType::f32)
    blas::gemm(true, false, p, q, e.rows, 1.0f, reinterpret_cast<const float*>(e.u.data()), p,
               reinterpret_cast<const float*>(e.v.data()), q, 1.0f, e.grad->data<float>(), q);
  else
    blas::gemm(true, false, p, q, e.rows, 1.0, reinterpret_cast<const double*>(e.u.data()), p,
               reinterpret_cast<const double*>(e.v.data()), q, 1.0, e.grad->data<double>(), q);
  e.rows = 0;
  e.u.clear();
  e.v.clear();
  --pending_;
}

void DeferredGrads::flush(int32_t owner) {
  for (size_t i = 0; i < used_ && pending_ > 0; ++i)
    if (entries_[i].owner == owner) run(entries_[i]);
}

void DeferredGrads::flush_all() {
  for (size_t i = 0; i < used_ && pending_ > 0; ++i) run(entries_[i]);
  used_ = 0;
}

void DeferredGrads::clear() {
  for (size_t i = 0; i < used_; ++i) {
    entries_[i].rows = 0;
    entries_[i].u.clear();
    entries_[i].v.clear();
  }
  used_ = 0;
  pending_ = 0;
  staged_ = 0;
}

}  // namespace tapestry
