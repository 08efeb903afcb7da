// The public API in one include, installed as <tapestry/tapestry.h>: tensors, the tape, every op,
// the nn layers, optimizers and checkpoints, the gradient checker, the graph drawer, and the
// sequence-to-sequence models with their decoding, data and metrics.
#pragma once

// core: tensors, the tape, errors, random numbers, the gradient checker, the graph drawer.
#include "tapestry/core/errors.h"
#include "tapestry/core/file_io.h"
#include "tapestry/core/gradcheck.h"
#include "tapestry/core/graph_draw.h"
#include "tapestry/core/random.h"
#include "tapestry/core/shape.h"
#include "tapestry/core/tape.h"
#include "tapestry/core/tensor.h"

// ops: every differentiable op (ops::matmul, ops::tanh, ops::softmax, ...).
#include "tapestry/ops/ops.h"

// nn: modules and layers, optimizers, schedules, clipping, checkpoints.
#include "tapestry/nn/attention.h"
#include "tapestry/nn/checkpoint.h"
#include "tapestry/nn/clip.h"
#include "tapestry/nn/dropout.h"
#include "tapestry/nn/embedding.h"
#include "tapestry/nn/gradcheck_module.h"
#include "tapestry/nn/init.h"
#include "tapestry/nn/layer_norm.h"
#include "tapestry/nn/linear.h"
#include "tapestry/nn/module.h"
#include "tapestry/nn/multihead_attention.h"
#include "tapestry/nn/optim.h"
#include "tapestry/nn/packing.h"
#include "tapestry/nn/parameter.h"
#include "tapestry/nn/rnn.h"
#include "tapestry/nn/schedule.h"
#include "tapestry/nn/transformer.h"

// models: the attention seq2seq model, decoding, training, data, BLEU and the other metrics.
#include "tapestry/models/average.h"
#include "tapestry/models/batch.h"
#include "tapestry/models/bleu.h"
#include "tapestry/models/chrf.h"
#include "tapestry/models/config.h"
#include "tapestry/models/corpus.h"
#include "tapestry/models/decode.h"
#include "tapestry/models/evaluate.h"
#include "tapestry/models/metrics.h"
#include "tapestry/models/preprocess.h"
#include "tapestry/models/saved_model.h"
#include "tapestry/models/scores.h"
#include "tapestry/models/seq2seq.h"
#include "tapestry/models/subword.h"
#include "tapestry/models/tasks.h"
#include "tapestry/models/train.h"
#include "tapestry/models/transformer.h"
#include "tapestry/models/vocab.h"
