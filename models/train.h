// Training: the optimizer step (forward, backward, clip, update) and epochs over shuffled batches.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "tapestry/core/packed.h"
#include "tapestry/models/batch.h"
#include "tapestry/models/seq2seq.h"
#include "tapestry/nn/optim.h"
#include "tapestry/nn/schedule.h"

namespace tapestry::models {

struct TrainOptions {
  int64_t batch_size = 64;
  std::string optimizer = "adam";  // adam, adamw or sgd
  double lr = 1e-3;
  double weight_decay = 0;
  double momentum = 0.9;  // sgd only
  double clip = 1.0;      // global gradient norm; 0: no clipping
  double teacher_forcing = 1.0;
  double adam_beta2 = 0.999;  // adam and adamw (Transformer recipes: 0.98)
  double adam_eps = 1e-8;     // adam and adamw (Transformer recipes: 1e-9)
  // none, step (lr *= gamma every step_size epochs), plateau, or noam (per update: a linear
  // warm-up to lr over `warmup` updates, then lr * sqrt(warmup / update); nn::InverseSqrtLR)
  std::string schedule = "none";
  int step_size = 5;
  double gamma = 0.5;     // step and plateau decay factor
  int patience = 1;       // plateau: epochs without improvement before a decay
  int64_t warmup = 4000;  // noam: updates of linear warm-up
  // The share of the target distribution spread evenly over the vocabulary (0: none), for the
  // model's loss (ops::cross_entropy's label_smoothing).
  double label_smoothing = 0;
  uint64_t seed = 1;  // batch order
  // Each batch is cut into this many shards of rows, trained in parallel (one per core, see
  // core/parallel.h) and their gradients summed in shard order: the result does not depend on how
  // many cores there are.
  int64_t shards = 2;
  // Anomaly mode on every shard's tape (Tape::set_detect_anomaly): the first op whose value or
  // gradient holds a NaN or an infinity stops training with an AnomalyError naming the epoch, the
  // step, the op and its inputs, instead of the step being skipped.
  bool detect_anomaly = false;
  // Throws ValueError naming the option and listing valid values.
  void validate() const;
};

// What on_step sees after every step of an epoch.
struct StepProgress {
  int64_t step = 0, steps = 0;  // within the epoch: done and total
  double loss = 0;              // this step's loss
  double mean_loss = 0;         // the epoch's token-weighted mean so far
  int64_t tokens = 0;           // target tokens so far this epoch
  double seconds = 0;           // since the epoch started
};

struct EpochResult {
  double loss = 0;  // token-weighted mean training loss
  int64_t steps = 0, tokens = 0, skipped = 0;
  bool stopped = false;  // on_step asked to stop before the end
  double seconds = 0;
  double grad_norm = 0;  // mean pre-clip gradient norm
};

class Trainer {
 public:
  Trainer(Seq2Seq& model, const TrainOptions& options);

  // forward, backward, clip, update; returns the loss. A step whose gradient norm is not finite
  // changes nothing and is counted as skipped.
  double step(const Batch& batch);
  // One pass over `pairs` in shuffled, length-bucketed batches. The batch order and the model's
  // random draws (dropout, teacher forcing) are seeded from (seed, epoch), so a run resumed at an
  // epoch boundary continues exactly as an uninterrupted one. on_step may return false to stop
  // the epoch early (a time limit).
  EpochResult epoch(std::span<const EncodedPair> pairs, int64_t epoch,
                    const std::function<bool(const StepProgress&)>& on_step = {});
  // Call after each epoch with the validation loss: advances the step and plateau schedules (noam
  // advances with every update, in step()).
  void end_epoch(double valid_loss);

  nn::Optimizer& optimizer() { return *optimizer_; }
  int64_t steps() const { return optimizer_->steps(); }
  double last_grad_norm() const { return last_norm_; }

 private:
  // Forward and backward of one shard on its own tape; returns its share of the batch loss.
  double shard_step(int k, const Batch& part, double scale, uint64_t seed);

  Seq2Seq& model_;
  TrainOptions options_;
  std::vector<nn::Parameter*> params_;
  std::vector<std::unique_ptr<Tape>> tapes_;  // one per shard
  WeightPacks packs_;  // the weights packed for the forward products, shared by the shards
  std::vector<std::vector<std::pair<Tensor, Tensor>>> sinks_;  // shard k > 0: (grad, buffer)
  // Shard k's buffers are all zero: fresh, or emptied by the last reduce as it read them. A
  // shard's step clears its own entry, so an interrupted step leaves its buffers to be zeroed.
  std::vector<uint8_t> sinks_zero_;
  std::vector<Batch> parts_;     // this step's shards, their lists reused from step to step
  std::vector<uint64_t> seeds_;  // each shard's random draws
  std::vector<double> losses_;
  std::unique_ptr<nn::Optimizer> optimizer_;
  std::unique_ptr<nn::StepLR> step_lr_;
  std::unique_ptr<nn::ReduceLROnPlateau> plateau_;
  std::unique_ptr<nn::InverseSqrtLR> inverse_sqrt_;
  double last_norm_ = 0;
  bool last_skipped_ = false;
  bool grads_zeroed_ = false;  // the optimizer's last step zeroed the gradients
};

}  // namespace tapestry::models
