// Learning-rate schedules: epoch counting, the plateau test and the warm-up's closed form.
#include "tapestry/nn/schedule.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace tapestry::nn {

StepLR::StepLR(Optimizer& opt, int step_size, double gamma)
    : opt_(opt), step_size_(step_size), gamma_(gamma), base_lr_(opt.lr()) {
  if (step_size < 1)
    throw ValueError(fmt::format("StepLR: step_size must be >= 1, got {}", step_size));
  if (!(gamma > 0 && std::isfinite(gamma)))
    throw ValueError(fmt::format("StepLR: gamma must be > 0 and finite, got {}", gamma));
}

void StepLR::step() {
  ++epoch_;
  opt_.set_lr(base_lr_ * std::pow(gamma_, epoch_ / step_size_));
}

ReduceLROnPlateau::ReduceLROnPlateau(Optimizer& opt, double factor, int patience, double threshold,
                                     double min_lr)
    : opt_(opt), factor_(factor), patience_(patience), threshold_(threshold), min_lr_(min_lr) {
  auto fail = [](const char* what, const char* rule, double value) {
    return ValueError(fmt::format("ReduceLROnPlateau: {} must be {}, got {}", what, rule, value));
  };
  if (!(factor > 0 && factor < 1)) throw fail("factor", "in (0, 1)", factor);
  if (patience < 0) throw fail("patience", ">= 0", patience);
  if (!(threshold >= 0 && threshold < 1)) throw fail("threshold", "in [0, 1)", threshold);
  if (!(min_lr >= 0 && std::isfinite(min_lr))) throw fail("min_lr", ">= 0", min_lr);
}

bool ReduceLROnPlateau::step(double metric) {
  if (metric < best_ * (1 - threshold_)) {
    best_ = metric;
    bad_epochs_ = 0;
    return false;
  }
  if (++bad_epochs_ <= patience_) return false;
  bad_epochs_ = 0;
  const double old_lr = opt_.lr();
  const double new_lr = std::max(old_lr * factor_, min_lr_);
  // PyTorch's eps (1e-8): a change smaller than this is not worth making (the lr is at min_lr).
  if (old_lr - new_lr <= 1e-8) return false;
  opt_.set_lr(new_lr);
  return true;
}

InverseSqrtLR::InverseSqrtLR(Optimizer& opt, int64_t warmup)
    : opt_(opt), warmup_(warmup), peak_(opt.lr()) {
  if (warmup < 1)
    throw ValueError(fmt::format("InverseSqrtLR: warmup must be >= 1, got {}", warmup));
}

double InverseSqrtLR::lr_at(int64_t s) const {
  const auto step = static_cast<double>(s), warmup = static_cast<double>(warmup_);
  // At s = warmup both branches are exactly peak: s / warmup is 1, and so is its square root.
  return s < warmup_ ? peak_ * (step / warmup) : peak_ * std::sqrt(warmup / step);
}

void InverseSqrtLR::step() {
  opt_.set_lr(lr_at(opt_.steps() + 1));
}

}  // namespace tapestry::nn
