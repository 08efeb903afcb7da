// Parameter: binding to a tape, cached per tape epoch.
#include "nn/parameter.h"

namespace tapestry::nn {

Var Parameter::var(Tape& tape) {
  if (!tape.recording()) return Var(value);
  if (tape_ != &tape || epoch_ != tape.epoch() || !bound_.requires_grad()) {
    bound_ = tape.bind(value, grad);
    tape_ = &tape;
    epoch_ = tape.epoch();
  }
  return bound_;
}

}  // namespace tapestry::nn
