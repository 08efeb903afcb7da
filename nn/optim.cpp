// Optimizers: argument checks, state save/restore and the SGD and Adam(W) update loops.
#include "tapestry/nn/optim.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>

#include "tapestry/core/cpu_kernels.h"
#include "tapestry/core/parallel.h"

namespace tapestry::nn {

namespace {
bool finite_nonneg(double x) {
  return x >= 0 && std::isfinite(x);
}
}  // namespace

Optimizer::Optimizer(std::vector<Parameter*> params, double lr, std::string name)
    : params_(std::move(params)), lr_(lr), name_(std::move(name)) {
  if (params_.empty()) throw ValueError(fmt::format("{}: empty parameter list", name_));
  for (size_t i = 0; i < params_.size(); ++i)
    if (!params_[i] || !params_[i]->value.defined())
      throw ValueError(
          fmt::format("{}: parameter {} is {}", name_, i, params_[i] ? "undefined" : "null"));
  // A parameter listed twice would be updated twice per step with two sets of state.
  std::vector<Parameter*> sorted = params_;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
    throw ValueError(fmt::format("{}: a parameter appears more than once in the list", name_));
  require(finite_nonneg(lr), "lr", ">= 0 and finite", lr);
}

void Optimizer::require(bool ok, const char* what, const char* rule, double value) const {
  if (!ok) throw ValueError(fmt::format("{}: {} must be {}, got {}", name_, what, rule, value));
}

void Optimizer::zero_grad() {
  for (Parameter* p : params_) p->grad.zero();
}

void Optimizer::set_lr(double lr) {
  require(finite_nonneg(lr), "lr", ">= 0 and finite", lr);
  lr_ = lr;
}

void Optimizer::step(double grad_scale) {
  require(finite_nonneg(grad_scale), "grad_scale", ">= 0 and finite", grad_scale);
  for (size_t i = 0; i < params_.size(); ++i) {
    const Parameter& p = *params_[i];
    auto fits = [&](const Tensor& t) {
      return t.defined() && t.shape() == p.value.shape() && t.dtype() == p.value.dtype();
    };
    if (!fits(p.grad))
      throw ValueError(fmt::format("{}: parameter {} is {} {} but its gradient is {} {}", name_, i,
                                   p.value.shape().str(), dtype_name(p.value.dtype()),
                                   p.grad.shape().str(), dtype_name(p.grad.dtype())));
    if (!slots_.empty())
      for (size_t k = 0; k < slot_names_.size(); ++k)
        if (!fits(slot(k, i)))
          throw ValueError(fmt::format("{}: parameter {} changed to {} {} after its state was made",
                                       name_, i, p.value.shape().str(),
                                       dtype_name(p.value.dtype())));
  }
  ++steps_;
  update(grad_scale);
}

bool Optimizer::ensure_slots() {
  if (!slots_.empty() || slot_names_.empty()) return false;
  slots_.reserve(slot_names_.size() * params_.size());
  for (size_t k = 0; k < slot_names_.size(); ++k)
    for (Parameter* p : params_)
      slots_.push_back(Tensor::zeros(p->value.shape(), p->value.dtype()));
  return true;
}

OptimizerState Optimizer::state() const {
  OptimizerState out;
  out.emplace_back("step", Tensor::scalar(static_cast<double>(steps_), DType::f64));
  // The lr is state, not configuration: schedules change it during training.
  out.emplace_back("lr", Tensor::scalar(lr_, DType::f64));
  for (size_t k = 0; k < slot_names_.size() && !slots_.empty(); ++k)
    for (size_t i = 0; i < params_.size(); ++i)
      out.emplace_back(fmt::format("{}.{}.{}", name_, slot_names_[k], i),
                       slots_[k * params_.size() + i]);
  return out;
}

void Optimizer::load_state(const OptimizerState& state) {
  auto fail = [&](const std::string& why) {
    return ValueError(fmt::format("{}: load_state: {}", name_, why));
  };
  const size_t n = params_.size();
  const Tensor* step = nullptr;
  const Tensor* lr = nullptr;
  std::vector<const Tensor*> slots(slot_names_.size() * n, nullptr);

  // Where an entry named "<name>.<slot>.<i>" goes, or nullptr if no such entry is expected.
  auto slot_for = [&](const std::string& key) -> const Tensor** {
    const std::string prefix = name_ + ".";
    if (key.rfind(prefix, 0) != 0) return nullptr;
    for (size_t k = 0; k < slot_names_.size(); ++k) {
      const std::string head = prefix + slot_names_[k] + ".";
      if (key.rfind(head, 0) != 0) continue;
      size_t i = 0;
      const char* first = key.data() + head.size();
      const char* last = key.data() + key.size();
      auto [end, ec] = std::from_chars(first, last, i);
      if (ec != std::errc() || end != last || first == last || i >= n) return nullptr;
      return &slots[k * n + i];
    }
    return nullptr;
  };
  for (const auto& [key, t] : state) {
    const Tensor** dst = key == "step" ? &step : key == "lr" ? &lr : slot_for(key);
    if (!dst)
      throw fail(fmt::format("unexpected entry '{}' (this optimizer has {} parameters)", key, n));
    if (*dst) throw fail(fmt::format("entry '{}' appears twice", key));
    if (!t.defined()) throw fail(fmt::format("entry '{}' is an undefined tensor", key));
    *dst = &t;
  }

  auto scalar = [&](const Tensor* t, const char* key) {
    if (!t) throw fail(fmt::format("missing entry '{}'", key));
    if (t->numel() != 1)
      throw fail(
          fmt::format("entry '{}' has shape {}, expected one element", key, t->shape().str()));
    return t->item();
  };
  const double step_value = scalar(step, "step");
  const double lr_value = scalar(lr, "lr");
  // 2^53: beyond it a double no longer counts steps exactly (and could overflow int64_t).
  if (!(step_value >= 0 && step_value <= 0x1p53) || step_value != std::floor(step_value))
    throw fail(fmt::format("entry 'step' is {}, expected a whole number >= 0", step_value));
  if (!finite_nonneg(lr_value))
    throw fail(fmt::format("entry 'lr' is {}, expected >= 0 and finite", lr_value));

  // Slot entries come all together or, before the first step, not at all.
  const size_t present = slots.size() - std::count(slots.begin(), slots.end(), nullptr);
  if (present > 0 || step_value > 0) {
    for (size_t j = 0; j < slots.size(); ++j) {
      const std::string key = fmt::format("{}.{}.{}", name_, slot_names_[j / n], j % n);
      if (!slots[j]) throw fail(fmt::format("missing entry '{}'", key));
      const Shape& want = params_[j % n]->value.shape();
      if (slots[j]->shape() != want)
        throw fail(fmt::format("entry '{}' has shape {} but parameter {} has shape {}", key,
                               slots[j]->shape().str(), j % n, want.str()));
    }
  }

  // Everything checked: now change the optimizer.
  steps_ = static_cast<int64_t>(step_value);
  lr_ = lr_value;
  if (present == 0) {
    slots_.clear();
    return;
  }
  ensure_slots();
  for (size_t j = 0; j < slots.size(); ++j) {
    const Tensor& src = *slots[j];
    if (src.dtype() == slots_[j].dtype())
      slots_[j].copy_from(src);
    else
      slots_[j].copy_from(src.to(slots_[j].dtype()));
  }
}

// ---------------------------------------------------------------------------------------------
// SGD

SGD::SGD(std::vector<Parameter*> params, double lr, double momentum, double weight_decay,
         bool nesterov)
    : Optimizer(std::move(params), lr, "sgd"),
      momentum_(momentum),
      weight_decay_(weight_decay),
      nesterov_(nesterov) {
  require(finite_nonneg(momentum), "momentum", ">= 0 and finite", momentum);
  require(finite_nonneg(weight_decay), "weight_decay", ">= 0 and finite", weight_decay);
  require(!nesterov || momentum > 0, "momentum", "> 0 with nesterov", momentum);
  if (momentum != 0) declare_slots({"momentum_buffer"});
}

void SGD::update(double scale) {
  // PyTorch starts the buffer as a copy of the first gradient, not as momentum * 0 + g.
  const bool first = momentum_ != 0 && ensure_slots();
  for (size_t i = 0; i < params().size(); ++i) {
    Parameter& p = *params()[i];
    Tensor* buf_tensor = momentum_ != 0 ? &slot(0, i) : nullptr;
    dispatch(p.value.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T lr = static_cast<T>(this->lr()), mom = static_cast<T>(momentum_),
              wd = static_cast<T>(weight_decay_), gs = static_cast<T>(scale);
      T* x = p.value.data<T>();
      T* dx = p.grad.data<T>();
      T* buf = buf_tensor ? buf_tensor->data<T>() : nullptr;
      const bool zero = zero_grads_on_step();
      for (int64_t j = 0, m = p.numel(); j < m; ++j) {
        T g = gs * dx[j];
        if (zero) dx[j] = T(0);
        if (wd != 0) g += wd * x[j];
        if (buf) {
          buf[j] = first ? g : mom * buf[j] + g;
          g = nesterov_ ? g + mom * buf[j] : buf[j];
        }
        x[j] -= lr * g;
      }
    });
  }
}

// ---------------------------------------------------------------------------------------------
// Adam and AdamW

namespace {

using loops::AdamScalars;

// Adam's update on n elements (core/vector_loops.h): in float through the kernels in use.
template <class T>
void adam_step(T* x, T* dx, T* m, T* v, int64_t n, const AdamScalars<T>& k) {
  if constexpr (std::is_same_v<T, float>)
    cpu::kernels().adam_update(x, dx, m, v, n, k);
  else
    loops::adam_update(x, dx, m, v, n, k);
}

}  // namespace

Adam::Adam(std::vector<Parameter*> params, double lr, double beta1, double beta2, double eps,
           double weight_decay)
    : Adam(std::move(params), lr, beta1, beta2, eps, weight_decay, false, "adam") {}

Adam::Adam(std::vector<Parameter*> params, double lr, double beta1, double beta2, double eps,
           double weight_decay, bool decoupled, std::string name)
    : Optimizer(std::move(params), lr, std::move(name)),
      beta1_(beta1),
      beta2_(beta2),
      eps_(eps),
      weight_decay_(weight_decay),
      decoupled_(decoupled) {
  require(beta1 >= 0 && beta1 < 1, "beta1", "in [0, 1)", beta1);
  require(beta2 >= 0 && beta2 < 1, "beta2", "in [0, 1)", beta2);
  require(finite_nonneg(eps), "eps", ">= 0 and finite", eps);
  require(finite_nonneg(weight_decay), "weight_decay", ">= 0 and finite", weight_decay);
  declare_slots({"m", "v"});
}

void Adam::update(double scale) {
  ensure_slots();
  // Scalars in double, as PyTorch computes them in Python floats, then applied in T.
  const double t = static_cast<double>(steps());
  const double bc1 = 1 - std::pow(beta1_, t), bc2 = 1 - std::pow(beta2_, t);
  // lr (m / bc1) / (sqrt(v / bc2) + eps) = step_size m / (sqrt(v) + eps_hat), multiplying above
  // below by sqrt(bc2): the folded constants in double, so only the element loop is in T.
  const double step_size = lr() * std::sqrt(bc2) / bc1, eps_hat = eps_ * std::sqrt(bc2);
  const double l2 = decoupled_ ? 0 : weight_decay_;
  const double shrink = decoupled_ && weight_decay_ != 0 ? 1 - lr() * weight_decay_ : 1;
  // Elementwise, so each parameter split in halves on two cores gives the same result as one
  // pass; one parallel job per half for all parameters, so small ones cost no extra hand-off.
  // The halves depend on the element count alone, not on whether they run on two cores: a
  // vector kernel may round its blocks otherwise than the tail past the last whole block.
  int64_t elements = 0;
  for (const Parameter* p : params()) elements += p->numel();
  const int halves = elements >= kParallelMinElements ? 2 : 1;
  parallel_run_if(parameter_pass_parallel(elements), halves, [&](int h) {
    for (size_t i = 0; i < params().size(); ++i) {
      Parameter& p = *params()[i];
      dispatch(p.value.dtype(), [&](auto tag) {
        using T = decltype(tag);
        AdamScalars<T> k;
        k.b1 = static_cast<T>(beta1_), k.b2 = static_cast<T>(beta2_);
        k.c1 = static_cast<T>(1 - beta1_), k.c2 = static_cast<T>(1 - beta2_);
        k.wd = static_cast<T>(l2), k.keep = static_cast<T>(shrink);
        k.step = static_cast<T>(step_size), k.eps_hat = static_cast<T>(eps_hat);
        k.scale = static_cast<T>(scale), k.zero_grad = zero_grads_on_step();
        const int64_t n = p.numel();
        const int64_t begin = n * h / halves, end = n * (h + 1) / halves;
        adam_step(p.value.data<T>() + begin, p.grad.data<T>() + begin, slot(0, i).data<T>() + begin,
                  slot(1, i).data<T>() + begin, end - begin, k);
      });
    }
  });
}

AdamW::AdamW(std::vector<Parameter*> params, double lr, double beta1, double beta2, double eps,
             double weight_decay)
    : Adam(std::move(params), lr, beta1, beta2, eps, weight_decay, true, "adamw") {}

}  // namespace tapestry::nn
