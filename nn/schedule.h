// Learning-rate schedules: StepLR (decay every few epochs) and ReduceLROnPlateau (decay on stall).
#pragma once

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

}  // namespace tapestry::nn
