// Typed exceptions: every error names the op (or file) and the offending shapes or values.
#pragma once

#include <stdexcept>
#include <string>

namespace tapestry {

// Base of every error Tapestry throws on bad input.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Shapes that do not fit the op, e.g. "matmul: shapes (2,3) and (4,5): inner dimensions 3 != 4".
class ShapeError : public Error {
 public:
  using Error::Error;
};

// An index outside its range (gather, slice, axis).
class IndexError : public Error {
 public:
  using Error::Error;
};

// Operands of different dtypes, or a dtype an operation does not support.
class DTypeError : public Error {
 public:
  using Error::Error;
};

// A bad argument value (probability outside [0,1), empty list, ...).
class ValueError : public Error {
 public:
  using Error::Error;
};

// Backward was asked for something the tape cannot do (non-scalar loss without a seed, ...).
class TapeError : public Error {
 public:
  using Error::Error;
};

// Anomaly mode (Tape::set_detect_anomaly) found a NaN or an infinity in an op's forward value or in
// a gradient its backward computed; the message names the op, its node, region and label, and
// every input's shape and range.
class AnomalyError : public Error {
 public:
  using Error::Error;
};

}  // namespace tapestry
