// Arithmetic ops with NumPy broadcasting: add, sub, mul, div, neg, scale, and their operators.
#pragma once

#include "tapestry/core/tape.h"

namespace tapestry::ops {

Var add(const Var& a, const Var& b);
Var sub(const Var& a, const Var& b);
Var mul(const Var& a, const Var& b);
Var div(const Var& a, const Var& b);
Var neg(const Var& x);
Var scale(const Var& x, double c);       // y = c * x
Var add_scalar(const Var& x, double c);  // y = x + c

}  // namespace tapestry::ops

namespace tapestry {
inline Var operator+(const Var& a, const Var& b) {
  return ops::add(a, b);
}
inline Var operator-(const Var& a, const Var& b) {
  return ops::sub(a, b);
}
inline Var operator*(const Var& a, const Var& b) {
  return ops::mul(a, b);
}
inline Var operator/(const Var& a, const Var& b) {
  return ops::div(a, b);
}
inline Var operator-(const Var& x) {
  return ops::neg(x);
}
inline Var operator*(const Var& x, double c) {
  return ops::scale(x, c);
}
inline Var operator*(double c, const Var& x) {
  return ops::scale(x, c);
}
inline Var operator/(const Var& x, double c) {
  return ops::scale(x, 1.0 / c);
}
inline Var operator+(const Var& x, double c) {
  return ops::add_scalar(x, c);
}
inline Var operator+(double c, const Var& x) {
  return ops::add_scalar(x, c);
}
inline Var operator-(const Var& x, double c) {
  return ops::add_scalar(x, -c);
}
inline Var operator-(double c, const Var& x) {
  return ops::add_scalar(ops::neg(x), c);
}
}  // namespace tapestry
