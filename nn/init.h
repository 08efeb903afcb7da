// Seeded initialisation helpers: uniform, normal, Xavier/Glorot, orthogonal.
#pragma once

#include "tapestry/core/random.h"

namespace tapestry::nn::init {

void uniform(Tensor& w, double lo, double hi, Rng& rng);
void normal(Tensor& w, double mean, double stddev, Rng& rng);
// U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)), fans as PyTorch computes them for a
// weight of shape (out, in, ...).
void xavier_uniform(Tensor& w, Rng& rng, double gain = 1.0);
// N(0, gain^2 * 2 / (fan_in + fan_out))
void xavier_normal(Tensor& w, Rng& rng, double gain = 1.0);
// A (semi-)orthogonal matrix (rows orthonormal if rows <= cols, else columns), from the QR
// factorisation of a Gaussian matrix with R's diagonal made positive (as PyTorch does).
void orthogonal(Tensor& w, Rng& rng, double gain = 1.0);

}  // namespace tapestry::nn::init
