// The tape: recording, reverse-mode backward, gradient buffers and regions.
#include "tapestry/core/tape.h"

#include <fmt/format.h>

#include <atomic>

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
  int32_t id = append(op, std::move(value));
  for (const Var* v : inputs) add_input(*v);
  return id;
}

int32_t Tape::record(const OpDef& op, Tensor value, std::span<const Var> inputs) {
  if (inputs.size() > UINT16_MAX)
    throw TapeError(fmt::format("{}: {} inputs, at most {}", op.name, inputs.size(), UINT16_MAX));
  int32_t id = append(op, std::move(value));
  for (const Var& v : inputs) add_input(v);
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

void Tape::backward(const Var& loss) {
  if (loss.numel() != 1)
    throw TapeError(
        fmt::format("backward: the loss has shape {}; give a seed gradient for a non-scalar output",
                    loss.shape().str()));
  backward(loss, Tensor::full(loss.shape(), 1.0, loss.dtype()));
}

void Tape::backward(const Var& y, const Tensor& dy) {
  if (y.tape() != this || y.node() < 0)
    throw TapeError(
        "backward: the output was not recorded on this tape (nothing it depends on needs a "
        "gradient)");
  if (dy.shape() != y.shape() || dy.dtype() != y.dtype())
    throw ShapeError(fmt::format("backward: seed gradient {} {} does not match output {} {}",
                                 dy.shape().str(), dtype_name(dy.dtype()), y.shape().str(),
                                 dtype_name(y.dtype())));
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
  for (int32_t i = y.node(); i >= 0; --i) {
    Node& n = nodes_[i];
    if (!n.op->backward || !n.grad.defined()) continue;
    n.op->backward(*this, n);
    if (!keep_grads_) n.grad = Tensor();
  }
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
  epoch_ = next_epoch();
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
