// RNN decoding without ops: the encoder, the attention and the decoder's steps on raw float32
// buffers, calling the ops' own kernels in the ops' order, so every value is the same bits as
// decoding through the ops (tests/test_decode.cpp holds the two equal), without a tensor, a
// shape check or a pool visit per op.
#pragma once

#include <memory>

#include "tapestry/models/seq2seq.h"
#include "tapestry/models/stepper.h"

namespace tapestry::models {

// Whether the raw path covers this model: a float32 RNN with the fused attention kernels and
// attention none, bahdanau, dot, scaled-dot or general, on a CPU with the packed product kernel
// (its weights are read through the tape's weight packs). Other models (concat, cosine and the
// local variants) decode through the ops.
bool rnn_inference_supported(const Seq2Seq& model);

// The raw path's stepper, reading the weights' packs from tape.weight_packs() at every start();
// the tape records nothing. Decoding one sentence (a batch of one row), it also reads the first
// encoder cells' and the first decoder cell's input projections of embedded tokens from tables
// it keeps per token id, made as each id is first seen and dropped when the packs' generation
// changes (WeightPacks::generation): a caller that changes the weights (any of them, embeddings
// and biases too) must invalidate the packs, as for the packs themselves.
// Throws ValueError if !rnn_inference_supported(model).
std::unique_ptr<Stepper> make_rnn_inference_stepper(Seq2Seq& model, Tape& tape);

}  // namespace tapestry::models
