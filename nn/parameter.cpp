// Parameter: binding to a tape, cached by the tape for the rest of the recording.
#include "tapestry/nn/parameter.h"

namespace tapestry::nn {

Var Parameter::var(Tape& tape) {
  if (!tape.recording()) return Var(value);
  if (const int32_t id = tape.find_binding(this); id >= 0) return tape.output(id);
  Var v = tape.bind(value, tape.grad_destination(grad));
  tape.add_binding(this, v.node());
  return v;
}

}  // namespace tapestry::nn
