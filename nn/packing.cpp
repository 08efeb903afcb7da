// Packing and unpacking the real positions of a padded batch, each one gather.
#include "tapestry/nn/packing.h"

#include <fmt/format.h>

#include <algorithm>

#include "tapestry/ops/index.h"
#include "tapestry/ops/shape_ops.h"

namespace tapestry::nn {

void Packing::assign(std::span<const int64_t> lengths, int64_t length) {
  b = static_cast<int64_t>(lengths.size());
  l = length;
  rows.clear();
  slots.clear();
  for (int64_t r = 0; r < b; ++r) {
    const int64_t real = std::clamp<int64_t>(lengths[static_cast<size_t>(r)], 0, l);
    const auto first = static_cast<int32_t>(rows.size());
    for (int64_t j = 0; j < real; ++j) {
      slots.push_back(static_cast<int32_t>(rows.size()));
      rows.push_back(static_cast<int32_t>(r * l + j));
    }
    // Padding reads the row's first real position; a row without any reads packed row 0.
    slots.insert(slots.end(), static_cast<size_t>(l - real), real > 0 ? first : 0);
  }
}

Tensor Packing::valid(DType dtype) const {
  Tensor v = Tensor::zeros({b, l}, dtype);
  dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* out = v.data<T>();
    for (int32_t r : rows) out[r] = T(1);
  });
  return v;
}

Var pack(const Var& x, const Packing& p) {
  if (x.ndim() != 3 || x.dim(0) != p.b || x.dim(1) != p.l)
    throw ShapeError(fmt::format("pack: input {} does not fit the packing's (B,L,*) = ({},{},*)",
                                 x.shape().str(), p.b, p.l));
  return ops::gather(ops::reshape(x, {p.b * p.l, x.dim(2)}), p.rows);
}

Var unpack(const Var& x, const Packing& p) {
  if (p.n() == 0)
    throw ValueError(fmt::format("unpack: the packing of ({},{}) has no real positions", p.b, p.l));
  if (x.ndim() != 2 || x.dim(0) != p.n())
    throw ShapeError(fmt::format("unpack: input {} does not fit the packing's (N,*) = ({},*)",
                                 x.shape().str(), p.n()));
  return ops::gather(x, p.slots, Shape{p.b, p.l});
}

}  // namespace tapestry::nn
