// Learning-rate schedules: StepLR (decay every few epochs), ReduceLROnPlateau (decay on stall) and
// InverseSqrtLR (the Transformer's warm-up, per update).
#pragma once

#include <cstdint>
#include <limits>

#include "tapestry/nn/optim.h"

namespace tapestry::nn {

// torch.optim.lr_scheduler.StepLR in closed form: after e calls to step(),
// lr = base_lr * gamma^(e / step_size) (integer division), base_lr being the lr at construction.
class StepLR {
 public:
  // Throws ValueError unless step_size >= 1 and gamma > 0 and finite.
  StepLR(Optimizer& opt, int step_size, double gamma);
  // Call once at the end of each epoch.
  void step();
  int epoch() const { return epoch_; }
  double base_lr() const { return base_lr_; }

 private:
  Optimizer& opt_;
  int step_size_;
  double gamma_, base_lr_;
  int epoch_ = 0;
};

// torch.optim.lr_scheduler.ReduceLROnPlateau with mode "min", threshold_mode "rel" and no
// cooldown. A metric improves when it is below best * (1 - threshold). Once more than `patience`
// epochs in a row fail to improve (so with patience 2, the third bad epoch), the lr becomes
// max(lr * factor, min_lr) and the count restarts. A NaN metric counts as a bad epoch.
class ReduceLROnPlateau {
 public:
  // Throws ValueError unless 0 < factor < 1, patience >= 0, 0 <= threshold < 1 and
  // min_lr >= 0.
  explicit ReduceLROnPlateau(Optimizer& opt, double factor = 0.1, int patience = 10,
                             double threshold = 1e-4, double min_lr = 0);
  // Call once per epoch with that epoch's metric (lower is better); returns whether it lowered
  // the lr (false once the lr has reached min_lr).
  bool step(double metric);
  double best() const { return best_; }
  int num_bad_epochs() const { return bad_epochs_; }

 private:
  Optimizer& opt_;
  double factor_;
  int patience_;
  double threshold_, min_lr_;
  double best_ = std::numeric_limits<double>::infinity();
  int bad_epochs_ = 0;
};

// The Transformer's schedule (Vaswani et al. 2017, eq. 3), per optimizer update: update s
// (counted from 1) takes lr = peak * min(s / warmup, sqrt(warmup / s)), peak being the lr at
// construction, so the lr rises linearly to peak at update `warmup`, then decays as 1/sqrt(s).
// Vaswani's d^-0.5 min(s^-0.5, s warmup^-1.5) is peak = d^-0.5 warmup^-0.5. fairseq's
// inverse_sqrt gives the same values one update later (its first update takes warmup_init_lr, 0).
// The update number comes from the optimizer's steps(), so once a checkpoint's optimizer state is
// loaded the schedule continues where the run stopped; construct the schedule before loading it,
// since the state's lr is the last update's, not the peak.
class InverseSqrtLR {
 public:
  // Throws ValueError unless warmup >= 1.
  InverseSqrtLR(Optimizer& opt, int64_t warmup);
  // Call before every optimizer update: sets the lr of update opt.steps() + 1, the one about to be
  // taken (a skipped update leaves steps() as it was, so calling again sets the same lr).
  void step();
  // The lr of update s >= 1.
  double lr_at(int64_t s) const;
  int64_t warmup() const { return warmup_; }
  double peak() const { return peak_; }

 private:
  Optimizer& opt_;
  int64_t warmup_;
  double peak_;
};

}  // namespace tapestry::nn
