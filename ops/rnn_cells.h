// Fused recurrent cell gates: one op for a GRU step's and one for an LSTM step's elementwise work
// after the two matrix products, tested equal to the composed ops they replace.
#pragma once

#include "tapestry/core/tape.h"

namespace tapestry::ops {

// A GRU step from gx = x W_ih^T + b_ih (B,3H), hw = h W_hh^T (B,3H), b_hh (3H) and h (B,H):
//   gh = hw + b_hh;  r = s(gx_r + gh_r);  z = s(gx_z + gh_z);  n = tanh(gx_n + r gh_n)
//   h' = (1 - z) n + z h                                               -> (B,H)
// Throws ShapeError naming every shape unless they fit.
Var gru_cell(const Var& gx, const Var& hw, const Var& b_hh, const Var& h);

// An LSTM step from gx (B,4H), hw = h W_hh^T (B,4H), b_hh (4H) and c (B,H), gates i, f, g, o:
//   a = gx + hw + b_hh;  i, f, o = s(a_i, a_f, a_o);  u = tanh(a_g)
//   c' = f c + i u;  h' = o tanh(c')                                   -> (2,B,H): [h'; c']
// Slicing the result along axis 0 gives h' and c' as views. Throws ShapeError as above.
Var lstm_cell(const Var& gx, const Var& hw, const Var& b_hh, const Var& c);

}  // namespace tapestry::ops
