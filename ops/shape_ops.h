// Shape ops: reshape, permute and transpose, concat, stack, slice and split.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <vector>

#include "tapestry/core/tape.h"

namespace tapestry::ops {

// y = x with a new shape of the same element count; a view sharing x's storage (no copy).
// Throws ShapeError naming both shapes when the counts differ.
Var reshape(const Var& x, const Shape& shape);
// As above, but one dimension may be -1: it is inferred from the element count.
Var reshape(const Var& x, std::span<const int64_t> dims);
Var reshape(const Var& x, std::initializer_list<int64_t> dims);

// y = x with its axes reordered: axis i of y is axis perm[i] of x (a copy). Negative entries
// count from the end; perm must name every axis once.
Var permute(const Var& x, std::span<const int> perm);
Var permute(const Var& x, std::initializer_list<int> perm);
// y = x with axes a and b swapped (a permute).
Var transpose(const Var& x, int a, int b);

// y = the inputs joined along an existing axis; they must agree on every other dimension, and
// pieces of size 0 along the axis are allowed.
Var concat(std::span<const Var> xs, int axis);
Var concat(std::initializer_list<Var> xs, int axis);
// y = the inputs, all of one shape, joined along a new axis (axis may be -1 .. ndim).
Var stack(std::span<const Var> xs, int axis);
Var stack(std::initializer_list<Var> xs, int axis);

// y = x[..., start : start + length, ...] along `axis`. A view when the slice is one contiguous
// block (every axis before `axis` has size 1), a copy otherwise. Throws IndexError naming the
// range and the shape when the range does not fit.
Var slice(const Var& x, int axis, int64_t start, int64_t length);
// The consecutive slices of x along `axis` with the given sizes, which must sum to its length.
std::vector<Var> split(const Var& x, std::span<const int64_t> sizes, int axis);
std::vector<Var> split(const Var& x, std::initializer_list<int64_t> sizes, int axis);

}  // namespace tapestry::ops
