// The tape: recording, reverse-mode backward, gradient buffers and regions.
#include "tapestry/core/tape.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>

#include "tapestry/core/memory.h"

namespace tapestry {

namespace {
// Built on first use so registration from any translation unit's static initialiser is safe.
std::vector<const OpDef*>& op_registry() {
  static auto* ops = new std::vector<const OpDef*>();
  return *ops;
}
}  // namespace

const std::vector<const OpDef*>& all_ops() {
  return op_registry();
}

OpRegistrar::OpRegistrar(const OpDef& op) {
  op_registry().push_back(&op);
}

namespace {
// Epochs are unique across all tapes, so (tape, epoch) never repeats even when a new tape
// reuses the address of one destroyed earlier.
uint64_t next_epoch() {
  static std::atomic<uint64_t> counter{0};
  return ++counter;
}
}  // namespace

const OpDef kLeafOp{"leaf", nullptr, "x (input)"};
const OpDef kParamOp{"param", nullptr, "w (parameter)"};

Tape::Tape() : epoch_(next_epoch()) {
  regions_.emplace_back("");
  nodes_.reserve(1024);
  edges_.reserve(2048);
  saved_.reserve(1024);
}

int32_t Tape::append(const OpDef& op, Tensor value) {
  Node& n = nodes_.emplace_back();
  n.op = &op;
  n.value = std::move(value);
  n.in_begin = static_cast<uint32_t>(edges_.size());
  n.saved_begin = static_cast<uint32_t>(saved_.size());
  n.attr_begin = static_cast<uint32_t>(attrs_.size());
  n.region = region_stack_.empty() ? 0 : region_stack_.back();
  return static_cast<int32_t>(nodes_.size() - 1);
}

void Tape::add_input(const Var& v) {
  if (v.requires_grad() && v.tape() != this)
    throw TapeError(
        fmt::format("{}: an input was recorded on another tape", nodes_.back().op->name));
  edges_.push_back(v.requires_grad() ? v.node() : -1);
  ++nodes_.back().in_count;
}

Var Tape::leaf(Tensor value) {
  if (!recording()) return Var(std::move(value));
  int32_t id = append(kLeafOp, std::move(value));
  return output(id);
}

Var Tape::bind(Tensor value, Tensor grad) {
  if (!recording()) return Var(std::move(value));
  if (grad.shape() != value.shape() || grad.dtype() != value.dtype())
    throw ShapeError(fmt::format("bind: gradient {} {} does not match value {} {}",
                                 grad.shape().str(), dtype_name(grad.dtype()), value.shape().str(),
                                 dtype_name(value.dtype())));
  int32_t id = append(kParamOp, std::move(value));
  nodes_[id].grad = std::move(grad);
  return output(id);
}

int32_t Tape::record(const OpDef& op, Tensor value, std::initializer_list<const Var*> inputs) {
  if (detect_anomaly_) [[unlikely]]
    check_forward(op, value, std::span<const Var* const>(inputs.begin(), inputs.size()));
  int32_t id = append(op, std::move(value));
  for (const Var* v : inputs) add_input(*v);
  if (record_hook_) [[unlikely]]
    record_hook_(id, nodes_[id].value);
  return id;
}

int32_t Tape::record(const OpDef& op, Tensor value, std::span<const Var> inputs) {
  if (inputs.size() > UINT16_MAX)
    throw TapeError(fmt::format("{}: {} inputs, at most {}", op.name, inputs.size(), UINT16_MAX));
  if (detect_anomaly_) [[unlikely]] {
    std::vector<const Var*> ptrs;
    for (const Var& v : inputs) ptrs.push_back(&v);
    check_forward(op, value, ptrs);
  }
  int32_t id = append(op, std::move(value));
  for (const Var& v : inputs) add_input(v);
  if (record_hook_) [[unlikely]]
    record_hook_(id, nodes_[id].value);
  return id;
}

void Tape::save(int32_t node, Tensor t) {
  Node& n = nodes_[node];
  if (node != static_cast<int32_t>(nodes_.size()) - 1 ||
      n.saved_begin + n.saved_count != saved_.size())
    throw TapeError(fmt::format("tape: save for node {} ({}) after a later node was recorded", node,
                                n.op->name));
  saved_.push_back(std::move(t));
  ++n.saved_count;
}

template <class I>
void Tape::append_attrs(int32_t node, std::span<const I> attrs) {
  Node& n = nodes_[node];
  if (node != static_cast<int32_t>(nodes_.size()) - 1 ||
      n.attr_begin + n.attr_count != attrs_.size())
    throw TapeError(fmt::format("tape: attributes for node {} ({}) after a later node was recorded",
                                node, n.op->name));
  attrs_.insert(attrs_.end(), attrs.begin(), attrs.end());
  n.attr_count += static_cast<uint32_t>(attrs.size());
}

void Tape::save_attrs(int32_t node, std::span<const int64_t> attrs) {
  append_attrs(node, attrs);
}
void Tape::save_attrs(int32_t node, std::span<const int32_t> attrs) {
  append_attrs(node, attrs);
}

void Tape::set_scalars(int32_t node, double s0, double s1) {
  nodes_[node].scalar[0] = s0;
  nodes_[node].scalar[1] = s1;
}

Tensor* Tape::input_grad(const Node& n, int k) {
  int32_t id = edges_[n.in_begin + k];
  if (id < 0) return nullptr;
  Node& in = nodes_[id];
  if (!in.grad.defined()) in.grad = Tensor::zeros(in.value.shape(), in.value.dtype());
  return &in.grad;
}

Tensor* Tape::input_grad_to_write(const Node& n, int k, bool* first) {
  *first = false;
  const int32_t id = edges_[n.in_begin + k];
  if (id < 0) return nullptr;
  Node& in = nodes_[id];
  if (in.grad.defined()) return &in.grad;
  // The same node twice among n's inputs (x * x): its second share would be added to the first
  // before the first was stored.
  for (int e = 0; e < n.in_count; ++e)
    if (e != k && edges_[n.in_begin + e] == id) return input_grad(n, k);
  in.grad = Tensor::empty(in.value.shape(), in.value.dtype());
  *first = true;
  return &in.grad;
}

bool Tape::defer_product(const Node& n, int k, DType dtype, const void* u, int64_t p, const void* v,
                         int64_t q, int64_t rows) {
  if (!defer_grads_ || detect_anomaly_) return false;
  Tensor* grad = input_grad(n, k);
  if (grad) deferred_.stage(edges_[n.in_begin + k], grad, dtype, u, p, v, q, rows);
  return true;
}

void Tape::backward(const Var& loss, BackwardOptions options) {
  if (loss.numel() != 1)
    throw TapeError(
        fmt::format("backward: the loss has shape {}; give a seed gradient for a non-scalar output",
                    loss.shape().str()));
  backward(loss, Tensor::full(loss.shape(), 1.0, loss.dtype()), options);
}

void Tape::backward(const Var& y, const Tensor& dy, BackwardOptions options) {
  if (backward_spent_)
    throw TapeError(
        "backward: this recording has already run backward, and a second one would add every "
        "gradient again; call tape.clear() and record the step anew, or pass {.retain_graph = "
        "true} to the backward before this one to run it twice on purpose");
  if (y.tape() != this || y.node() < 0)
    throw TapeError(
        "backward: the output was not recorded on this tape (nothing it depends on needs a "
        "gradient)");
  if (dy.shape() != y.shape() || dy.dtype() != y.dtype())
    throw ShapeError(fmt::format("backward: seed gradient {} {} does not match output {} {}",
                                 dy.shape().str(), dtype_name(dy.dtype()), y.shape().str(),
                                 dtype_name(y.dtype())));
  // Spent from here on: a backward that throws part way has added some gradients already.
  backward_spent_ = true;
  // Inner nodes start from zero so a second backward on the same tape adds only its own share to
  // the leaves (which accumulate, as parameters do).
  for (Node& n : nodes_)
    if (n.op->backward) n.grad = Tensor();
  Node& out = nodes_[y.node()];
  if (!out.grad.defined()) out.grad = Tensor::zeros(y.shape(), y.dtype());
  Tensor seed = out.grad;  // accumulate dy into the output's gradient
  dispatch(dy.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* g = seed.template data<T>();
    const T* d = dy.template data<T>();
    for (int64_t i = 0; i < dy.numel(); ++i) g[i] += d[i];
  });
  deferred_.clear();
  for (int32_t i = y.node(); i >= 0; --i) {
    Node& n = nodes_[i];
    if (!n.op->backward || !n.grad.defined()) continue;
    if (deferred_.pending()) deferred_.flush(i);  // this node's gradient is complete only now
    n.op->backward(*this, n);
    if (detect_anomaly_) [[unlikely]]
      check_backward(n);
    if (!keep_grads_) n.grad = Tensor();
  }
  deferred_.flush_all();  // the leaves' (parameters') gradients
  backward_spent_ = !options.retain_graph;
}

Tensor Tape::grad(const Var& v) const {
  if (v.tape() != this || v.node() < 0) return Tensor();
  return nodes_[v.node()].grad;
}

int32_t Tape::find_binding(const void* key) const {
  for (const auto& [k, node] : bindings_)
    if (k == key) return node;
  return -1;
}

void Tape::add_binding(const void* key, int32_t node) {
  bindings_.emplace_back(key, node);
}

Tensor Tape::grad_destination(const Tensor& grad) const {
  for (const auto& [from, to] : redirects_)
    if (from.shares_storage(grad)) return to;
  return grad;
}

void Tape::redirect_grads(std::vector<std::pair<Tensor, Tensor>> pairs) {
  for (const auto& [from, to] : pairs)
    if (from.shape() != to.shape() || from.dtype() != to.dtype())
      throw ShapeError(fmt::format("redirect_grads: buffer {} {} does not match gradient {} {}",
                                   to.shape().str(), dtype_name(to.dtype()), from.shape().str(),
                                   dtype_name(from.dtype())));
  redirects_ = std::move(pairs);
}

void Tape::clear() {
  bindings_.clear();
  nodes_.clear();
  edges_.clear();
  saved_.clear();
  attrs_.clear();
  region_stack_.clear();
  labels_.clear();
  deferred_.clear();
  pack_reads_.clear();
  backward_spent_ = false;
  epoch_ = next_epoch();
  mark_memory_step();
}

int64_t Tape::count_pack_read(const void* key, int64_t col0) {
  for (PackReads& r : pack_reads_)
    if (r.key == key && r.col0 == col0) return ++r.count;
  pack_reads_.push_back({key, col0, 1});
  return 1;
}

int64_t Tape::pack_reads(const void* key, int64_t col0) const {
  for (const PackReads& r : pack_reads_)
    if (r.key == key && r.col0 == col0) return r.count;
  return 0;
}

void Tape::push_region(std::string_view name) {
  uint16_t id = 0;
  for (; id < regions_.size(); ++id)
    if (regions_[id] == name) break;
  if (id == regions_.size()) regions_.emplace_back(name);
  region_stack_.push_back(id);
}

void Tape::pop_region() {
  if (!region_stack_.empty()) region_stack_.pop_back();
}

void Tape::set_label(int32_t node, std::string label) {
  if (node < 0 || static_cast<size_t>(node) >= nodes_.size())
    throw IndexError(
        fmt::format("tape: cannot label node {}: the tape has {} nodes", node, nodes_.size()));
  labels_[node] = std::move(label);
}

const std::string& Tape::label(int32_t node) const {
  static const std::string kNone;
  auto it = labels_.find(node);
  return it == labels_.end() ? kNone : it->second;
}

void Tape::set_tensor_names(std::vector<std::pair<std::string, Tensor>> names) {
  tensor_names_ = std::move(names);
}

std::string Tape::display_name(int32_t node) const {
  if (const std::string& l = label(node); !l.empty()) return l;
  const Node& n = nodes_[static_cast<size_t>(node)];
  if (n.op->backward) return "";
  for (const auto& [name, t] : tensor_names_)
    if (t.defined() && n.value.shares_storage(t)) return name;
  return "";
}

// ---------------------------------------------------------------------------------------------
// Anomaly mode

namespace {

struct Finiteness {
  int64_t nan = 0, pos_inf = 0, neg_inf = 0;
  double min = 0, max = 0;  // over the finite values
  bool any_finite = false;
};

Finiteness finiteness(const Tensor& t) {
  Finiteness f;
  dispatch(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* p = t.data<T>();
    for (int64_t i = 0, n = t.numel(); i < n; ++i) {
      const double v = p[i];
      if (std::isnan(v)) {
        ++f.nan;
      } else if (std::isinf(v)) {
        ++(v > 0 ? f.pos_inf : f.neg_inf);
      } else if (!f.any_finite) {
        f.min = f.max = v;
        f.any_finite = true;
      } else {
        f.min = std::min(f.min, v);
        f.max = std::max(f.max, v);
      }
    }
  });
  return f;
}

// "(2,3) min -1 max 2.5, 1 NaN"
std::string range_text(const Tensor& t) {
  if (!t.defined()) return "(undefined)";
  const Finiteness f = finiteness(t);
  std::string s = t.shape().str();
  if (f.any_finite) s += fmt::format(" min {:.4g} max {:.4g}", f.min, f.max);
  if (f.nan) s += fmt::format(", {} NaN", f.nan);
  if (f.pos_inf) s += fmt::format(", {} +inf", f.pos_inf);
  if (f.neg_inf) s += fmt::format(", {} -inf", f.neg_inf);
  if (t.numel() == 0) s += " (empty)";
  return s;
}

}  // namespace

void Tape::check_forward(const OpDef& op, const Tensor& value,
                         std::span<const Var* const> inputs) const {
  const Finiteness f = finiteness(value);
  const bool inf_fault = (f.pos_inf || f.neg_inf) && !op.infinite_by_design;
  if (!f.nan && !inf_fault) return;
  std::string where = fmt::format("node #{}", nodes_.size());
  if (!region_stack_.empty() && region_stack_.back() != 0)
    where += fmt::format(", region '{}'", regions_[region_stack_.back()]);
  std::string ins;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Var& v = *inputs[k];
    std::string from = "a constant";
    if (v.requires_grad() && v.tape() == this) {
      const int32_t id = v.node();
      from = fmt::format("#{} {}", id, nodes_[id].op->name);
      if (std::string l = display_name(id); !l.empty()) from += " '" + l + "'";
    }
    ins += fmt::format("{}input {} ({}): {}", k ? "; " : "", k, from, range_text(v.value()));
  }
  throw AnomalyError(fmt::format("anomaly: the forward value of {} ({}) holds {}: {}; {}", op.name,
                                 where, f.nan ? "NaN" : "an infinity", range_text(value),
                                 ins.empty() ? "no inputs" : ins));
}

void Tape::check_backward(const Node& n) const {
  const auto ins = inputs(n);
  for (size_t k = 0; k < ins.size(); ++k) {
    if (ins[k] < 0) continue;
    const Tensor& g = nodes_[ins[k]].grad;
    if (!g.defined()) continue;
    const Finiteness f = finiteness(g);
    if (!f.nan && !f.pos_inf && !f.neg_inf) continue;
    const auto id = static_cast<int32_t>(&n - nodes_.data());
    std::string where = fmt::format("node #{}", id);
    if (n.region != 0) where += fmt::format(", region '{}'", regions_[n.region]);
    if (const std::string& l = label(id); !l.empty()) where += fmt::format(", label '{}'", l);
    std::string values;
    for (size_t j = 0; j < ins.size(); ++j) {
      if (ins[j] < 0) {
        values += fmt::format("; input {}: a constant", j);
        continue;
      }
      const Node& in = nodes_[ins[j]];
      std::string name = fmt::format("#{} {}", ins[j], in.op->name);
      if (std::string l = display_name(ins[j]); !l.empty()) name += " '" + l + "'";
      values += fmt::format("; input {} ({}): {}", j, name, range_text(in.value));
    }
    throw AnomalyError(fmt::format(
        "anomaly: the backward of {} ({}) gave input {} a gradient holding {}: {}; its output's "
        "gradient: {}{}",
        n.op->name, where, k, f.nan ? "NaN" : "an infinity", range_text(g), range_text(n.grad),
        values));
  }
}

Tape* recording_tape(std::initializer_list<const Var*> inputs) {
  for (const Var* v : inputs)
    if (v->requires_grad() && v->tape()->recording()) return v->tape();
  return nullptr;
}

Tape* recording_tape(std::span<const Var> inputs) {
  for (const Var& v : inputs)
    if (v.requires_grad() && v.tape()->recording()) return v.tape();
  return nullptr;
}

}  // namespace tapestry
