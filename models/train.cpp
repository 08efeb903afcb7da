// Training: one reused tape, the optimizer, clipping and the epoch loop.
#include "tapestry/models/train.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>

#include "tapestry/core/parallel.h"
#include "tapestry/nn/clip.h"

namespace tapestry::models {

void TrainOptions::validate() const {
  auto require = [](bool ok, const std::string& what) {
    if (!ok) throw ValueError("training: " + what);
  };
  require(batch_size >= 1, fmt::format("batch size must be at least 1, got {}", batch_size));
  require(optimizer == "adam" || optimizer == "adamw" || optimizer == "sgd",
          fmt::format("unknown optimizer '{}' (valid: adam, adamw, sgd)", optimizer));
  require(lr > 0 && std::isfinite(lr), fmt::format("lr must be positive, got {}", lr));
  require(clip >= 0, fmt::format("clip must be 0 (off) or positive, got {}", clip));
  require(teacher_forcing >= 0 && teacher_forcing <= 1,
          fmt::format("teacher forcing must be in [0, 1], got {}", teacher_forcing));
  require(shards >= 1 && shards <= 64, fmt::format("shards must be 1 to 64, got {}", shards));
  require(schedule == "none" || schedule == "step" || schedule == "plateau" || schedule == "noam",
          fmt::format("unknown schedule '{}' (valid: none, step, plateau, noam)", schedule));
  require(warmup >= 1, fmt::format("warmup must be at least 1 update, got {}", warmup));
  require(adam_beta2 >= 0 && adam_beta2 < 1,
          fmt::format("adam beta2 must be in [0, 1), got {}", adam_beta2));
  require(adam_eps > 0 && std::isfinite(adam_eps),
          fmt::format("adam eps must be positive, got {}", adam_eps));
  require(label_smoothing >= 0 && label_smoothing < 1,
          fmt::format("label smoothing must be in [0, 1), got {}", label_smoothing));
}

Trainer::Trainer(Seq2Seq& model, const TrainOptions& options)
    : model_(model), options_(options), params_(model.parameters()) {
  options_.validate();
  if (options_.optimizer == "sgd")
    optimizer_ =
        std::make_unique<nn::SGD>(params_, options_.lr, options_.momentum, options_.weight_decay);
  else if (options_.optimizer == "adamw")
    optimizer_ = std::make_unique<nn::AdamW>(params_, options_.lr, 0.9, options_.adam_beta2,
                                             options_.adam_eps, options_.weight_decay);
  else
    optimizer_ = std::make_unique<nn::Adam>(params_, options_.lr, 0.9, options_.adam_beta2,
                                            options_.adam_eps, options_.weight_decay);
  optimizer_->set_zero_grads_on_step(true);  // step() below zeroes what shard 0 would
  if (options_.schedule == "step")
    step_lr_ = std::make_unique<nn::StepLR>(*optimizer_, options_.step_size, options_.gamma);
  else if (options_.schedule == "plateau")
    plateau_ =
        std::make_unique<nn::ReduceLROnPlateau>(*optimizer_, options_.gamma, options_.patience);
  else if (options_.schedule == "noam")
    inverse_sqrt_ = std::make_unique<nn::InverseSqrtLR>(*optimizer_, options_.warmup);
}

namespace {

// y += x, and x = 0 while its line is in the cache (a memset at the shard's next step would read
// and write it all again).
template <class T>
void move_into(T* __restrict y, T* __restrict x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    y[i] += x[i];
    x[i] = T(0);
  }
}

}  // namespace

double Trainer::shard_step(int k, const Batch& part, double scale, uint64_t seed) {
  Tape& tape = *tapes_[static_cast<size_t>(k)];
  tape.clear();
  // Beside the other shards zeroing their own buffers; the optimizer zeroed them as it read them
  // unless the last step was skipped or did not get that far.
  if (k == 0 && !grads_zeroed_) optimizer_->zero_grad();
  if (k == 0) grads_zeroed_ = false;
  if (k > 0) {
    if (!sinks_zero_[static_cast<size_t>(k)])
      for (auto& [grad, buffer] : sinks_[static_cast<size_t>(k)]) buffer.zero();
    sinks_zero_[static_cast<size_t>(k)] = 0;
    if (!tape.redirecting()) tape.redirect_grads(sinks_[static_cast<size_t>(k)]);
  }
  Rng rng(seed);
  Var loss = model_.loss(tape, part, options_.teacher_forcing, &rng, options_.label_smoothing);
  tape.backward(loss, Tensor::full({}, scale, loss.dtype()));
  const double value = loss.value().item() * scale;
  tape.clear();
  return value;
}

double Trainer::step(const Batch& batch) {
  model_.train();
  const auto shards = static_cast<int>(std::min<int64_t>(options_.shards, batch.size));
  while (tapes_.size() < static_cast<size_t>(shards)) {
    tapes_.push_back(std::make_unique<Tape>());
    tapes_.back()->set_weight_packs(&packs_);
    if (options_.detect_anomaly) {
      tapes_.back()->set_detect_anomaly(true);
      nn::name_parameters(*tapes_.back(), model_);
    }
    std::vector<std::pair<Tensor, Tensor>> sink;
    if (tapes_.size() > 1)
      for (auto* p : params_)
        sink.emplace_back(p->grad, Tensor::zeros(p->grad.shape(), p->grad.dtype()));
    sinks_.push_back(std::move(sink));
    sinks_zero_.push_back(1);
  }
  // Contiguous row ranges (rows of a batch have similar lengths), each shard's loss weighted by
  // its share of the batch's target tokens so the sum is the whole batch's mean.
  parts_.resize(static_cast<size_t>(shards));
  seeds_.resize(static_cast<size_t>(shards));
  losses_.resize(static_cast<size_t>(shards));
  for (int k = 0; k < shards; ++k) {
    const int64_t begin = batch.size * k / shards, end = batch.size * (k + 1) / shards;
    if (shards > 1) slice_rows_into(batch, begin, end - begin, parts_[k]);
    seeds_[k] = model_.rng().next_u64();
  }
  // The optimizer changed the weights since the last step: their packs are remade on first use.
  packs_.invalidate();
  const auto total = static_cast<double>(batch.target_tokens());
  parallel_run(shards, [&](int k) {
    const Batch& part = shards == 1 ? batch : parts_[k];
    const double share = static_cast<double>(part.target_tokens()) / total;
    losses_[k] = shard_step(k, part, share, seeds_[k]);
  });
  double value = 0;
  for (int k = 0; k < shards; ++k) value += losses_[k];
  // Clipping as clip_grad_norm clips, its factor applied by the optimizer as it reads each
  // gradient rather than in a pass of its own. The other shards' gradients are added into the
  // parameters' (shard 0 wrote there) in the same pass, range by range just before the norm reads
  // each range, in shard order whatever the core count, and the shards' buffers left zero for
  // their next step.
  if (shards > 1) {
    auto others = std::span(sinks_).subspan(1, static_cast<size_t>(shards - 1));
    const auto reduce = [](void* context, size_t i, int64_t begin, int64_t n) {
      for (auto& shard : *static_cast<decltype(others)*>(context)) {
        Tensor &grad = shard[i].first, &buffer = shard[i].second;
        dispatch(grad.dtype(), [&](auto tag) {
          using T = decltype(tag);
          move_into(grad.data<T>() + begin, buffer.data<T>() + begin, n);
        });
      }
    };
    last_norm_ = nn::grad_norm(params_, reduce, &others);
    for (int k = 1; k < shards; ++k) sinks_zero_[static_cast<size_t>(k)] = 1;
  } else {
    last_norm_ = nn::grad_norm(params_);
  }
  last_skipped_ = !std::isfinite(last_norm_);
  if (inverse_sqrt_) inverse_sqrt_->step();  // the lr of the update about to be taken
  if (!last_skipped_) {
    optimizer_->step(nn::clip_factor(last_norm_, options_.clip > 0 ? options_.clip : INFINITY));
    grads_zeroed_ = optimizer_->zero_grads_on_step();
  }
  return value;
}

namespace {
// A seed for (seed, epoch, stream) drawn through the generator, so nearby inputs diverge.
uint64_t derive_seed(uint64_t seed, int64_t epoch, uint64_t stream) {
  Rng rng(seed ^ (static_cast<uint64_t>(epoch) * 0x9E3779B97F4A7C15ull) ^ (stream << 56));
  return rng.next_u64();
}
}  // namespace

EpochResult Trainer::epoch(std::span<const EncodedPair> pairs, int64_t epoch,
                           const std::function<bool(const StepProgress&)>& on_step) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  EpochResult r;
  Rng batch_rng(derive_seed(options_.seed, epoch, 1));
  model_.rng() = Rng(derive_seed(model_.config().seed, epoch, 2));
  auto batches = make_batches(pairs, options_.batch_size, &batch_rng);
  double weighted = 0, norms = 0;
  for (size_t i = 0; i < batches.size(); ++i) {
    Batch batch = make_batch(pairs, batches[i]);
    double loss = 0;
    try {
      loss = step(batch);
    } catch (const AnomalyError& e) {
      throw AnomalyError(
          fmt::format("epoch {}, step {} of {}: {}", epoch, i + 1, batches.size(), e.what()));
    }
    const int64_t tokens = batch.target_tokens();
    if (last_skipped_) {
      ++r.skipped;
    } else {
      weighted += loss * static_cast<double>(tokens);
      r.tokens += tokens;
      norms += last_norm_;
    }
    ++r.steps;
    if (on_step) {
      StepProgress p;
      p.step = r.steps;
      p.steps = static_cast<int64_t>(batches.size());
      p.loss = loss;
      p.tokens = r.tokens;
      p.mean_loss = r.tokens > 0 ? weighted / static_cast<double>(r.tokens) : 0;
      p.seconds = std::chrono::duration<double>(clock::now() - start).count();
      if (!on_step(p)) {
        r.stopped = true;
        break;
      }
    }
  }
  r.loss = r.tokens > 0 ? weighted / static_cast<double>(r.tokens) : 0;
  r.grad_norm = r.steps > r.skipped ? norms / static_cast<double>(r.steps - r.skipped) : 0;
  r.seconds = std::chrono::duration<double>(clock::now() - start).count();
  return r;
}

void Trainer::end_epoch(double valid_loss) {
  if (step_lr_) step_lr_->step();
  if (plateau_) plateau_->step(valid_loss);
}

}  // namespace tapestry::models
