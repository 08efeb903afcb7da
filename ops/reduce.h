// Reductions: sum and mean over any set of axes, max along one axis.
#pragma once

#include <initializer_list>
#include <span>

#include "tapestry/core/tape.h"

namespace tapestry::ops {

// y = the sum of x over `axes` (negative axes count from the end). The reduced axes are dropped,
// or kept with size 1 when `keepdim`. An empty axis list reduces nothing. Throws IndexError naming
// the shape for an axis out of range or given twice.
Var sum(const Var& x, std::span<const int> axes, bool keepdim = false);
Var sum(const Var& x, std::initializer_list<int> axes, bool keepdim = false);
// The sum of every element: shape ().
Var sum(const Var& x);

// y = the mean of x over `axes`: sum / (number of elements reduced). Same rules as sum; the mean
// over zero elements is NaN.
Var mean(const Var& x, std::span<const int> axes, bool keepdim = false);
Var mean(const Var& x, std::initializer_list<int> axes, bool keepdim = false);
Var mean(const Var& x);

// y = the largest value of x along `axis`; the gradient flows to the first maximum only. NaN
// propagates (a NaN is the maximum). Throws ShapeError when the axis is empty.
Var max(const Var& x, int axis, bool keepdim = false);

}  // namespace tapestry::ops
