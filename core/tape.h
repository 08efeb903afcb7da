// The tape: an append-only list of recorded nodes in topological order; backward is a reverse loop.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tapestry/core/deferred_grads.h"
#include "tapestry/core/tensor.h"

namespace tapestry {

class Tape;
struct Node;
class WeightPacks;

// An op's backward: reads node.grad (dy) and accumulates (+=) into its inputs' gradients.
using BackwardFn = void (*)(Tape& tape, const Node& node);

// A differentiable op as the tape knows it. Every OpDef registers itself at start-up so the
// gradient-check registry can prove that no op is left unchecked.
struct OpDef {
  const char* name;
  BackwardFn backward;  // nullptr for leaves
  const char* math;     // the op and its derivative in one line, for explain
  // The op writes infinities on purpose (masked_fill's fill value, log_softmax's -inf at masked
  // positions), so anomaly mode does not take an infinity in its value for a fault (a NaN still
  // is).
  bool infinite_by_design = false;
};

struct OpRegistrar {
  explicit OpRegistrar(const OpDef& op);
};
// Every registered differentiable op (leaves excluded), in registration order.
const std::vector<const OpDef*>& all_ops();

// Defines `const OpDef var` and registers it; an optional last argument sets infinite_by_design.
#define TAPESTRY_OP(var, name, backward, math, ...)                             \
  const ::tapestry::OpDef var{name, backward, math __VA_OPT__(, ) __VA_ARGS__}; \
  static const ::tapestry::OpRegistrar var##_registrar {                        \
    var                                                                         \
  }

extern const OpDef kLeafOp;   // a leaf whose gradient is kept on the tape
extern const OpDef kParamOp;  // a leaf whose gradient accumulates into a parameter's grad

struct Node {
  const OpDef* op = nullptr;
  Tensor value;
  Tensor grad;  // defined once a gradient reaches the node (or bound to a parameter's grad)
  uint32_t in_begin = 0, saved_begin = 0, attr_begin = 0, attr_count = 0;
  uint16_t in_count = 0, saved_count = 0;
  uint16_t region = 0;
  double scalar[2] = {0, 0};  // scalar attributes (scale factor, exponent, fill value, ...)
};

// A value flowing through a computation: a tensor plus, when it needs a gradient, the tape node
// that produced it. A Var made from a bare Tensor is a constant.
class Var {
 public:
  Var() = default;
  Var(Tensor value) : value_(std::move(value)) {}  // NOLINT: constants convert implicitly
  Var(Tensor value, Tape* tape, int32_t node)
      : value_(std::move(value)), tape_(tape), node_(node) {}

  const Tensor& value() const { return value_; }
  const Shape& shape() const { return value_.shape(); }
  DType dtype() const { return value_.dtype(); }
  int ndim() const { return value_.ndim(); }
  int64_t dim(int axis) const { return value_.dim(axis); }
  int64_t numel() const { return value_.numel(); }
  bool requires_grad() const { return node_ >= 0; }
  Tape* tape() const { return tape_; }
  int32_t node() const { return node_; }

 private:
  Tensor value_;
  Tape* tape_ = nullptr;
  int32_t node_ = -1;
};

// Tape::backward's options.
struct BackwardOptions {
  bool retain_graph = false;  // allow another backward on this recording
};

class Tape {
 public:
  Tape();
  Tape(const Tape&) = delete;
  Tape& operator=(const Tape&) = delete;

  // ---- leaves
  // A leaf whose gradient is collected on the tape (read it with grad()).
  Var leaf(Tensor value);
  // A leaf whose gradient accumulates into `grad` (same shape and dtype), e.g. a parameter's.
  Var bind(Tensor value, Tensor grad);

  // ---- recording (used by ops)
  bool recording() const { return no_grad_depth_ == 0; }
  // Appends a node; inputs that need no gradient are stored as -1.
  int32_t record(const OpDef& op, Tensor value, std::initializer_list<const Var*> inputs);
  int32_t record(const OpDef& op, Tensor value, std::span<const Var> inputs);
  // Saves a tensor for backward; all saves for a node come right after its record().
  void save(int32_t node, Tensor t);
  void save_attrs(int32_t node, std::span<const int64_t> attrs);
  void save_attrs(int32_t node, std::span<const int32_t> attrs);
  void set_scalars(int32_t node, double s0, double s1 = 0);
  Var output(int32_t node) { return Var(nodes_[node].value, this, node); }

  // ---- backward
  // Backpropagates from a one-element loss (seed 1). Leaves and parameters accumulate (+=), so a
  // second backward on the same recording would add the same gradients again: it throws TapeError
  // instead, unless the one before it passed retain_graph (as PyTorch's retain_graph=True).
  // clear() and a new recording start afresh.
  void backward(const Var& loss, BackwardOptions options = {});
  // Backpropagates from y with seed gradient dy (same shape as y).
  void backward(const Var& y, const Tensor& dy, BackwardOptions options = {});
  // Gradient that reached v (undefined if none did).
  Tensor grad(const Var& v) const;
  // Keep every node's gradient after backward (for inspection); otherwise gradients of inner
  // nodes are released as soon as their backward has run.
  void set_keep_grads(bool keep) { keep_grads_ = keep; }

  // ---- anomaly mode (off by default; costs one test per op when off). When on, every op's forward
  // value and every gradient its backward computes are checked as they are made: the first NaN or
  // infinity throws AnomalyError naming the op, its node, region and label, and every input's
  // shape and range (min, max and the count of NaN and infinite values). PyTorch's
  // detect_anomaly checks backward outputs for NaN; this checks forward values too, and
  // infinities. Nothing is recorded for an op whose value fails the check. A gradient buffer is
  // checked whole after each op that adds to it, so a NaN already in a parameter's gradient
  // (never zeroed) is blamed on the first op that adds to it.
  void set_detect_anomaly(bool on) { detect_anomaly_ = on; }
  bool detect_anomaly() const { return detect_anomaly_; }

  // ---- a hook on recorded values, for finite differences of inner nodes (tapestry explain): it
  // is called with each node's index and value as an op records it, before the op returns the
  // value, and may replace the value (with a perturbed copy, say), which is what later ops read.
  // Empty by default (one untaken branch per op).
  using RecordHook = std::function<void(int32_t node, Tensor& value)>;
  void set_record_hook(RecordHook hook) { record_hook_ = std::move(hook); }

  // ---- packed weights (core/packed.h) for the products of this recording, or null. The owner
  // promises the weights stay unchanged while they are set; clear() leaves them set.
  void set_weight_packs(WeightPacks* packs) { weight_packs_ = packs; }
  WeightPacks* weight_packs() const { return weight_packs_; }
  // How many products of this recording have read a pack of the weight whose storage is `key`,
  // columns from col0: count_pack_read adds one and returns the new count. A weight read at every
  // time step is read many times, one a whole batch multiplies once; each shard has its own tape,
  // so the count does not depend on the other shards or on the cores.
  int64_t count_pack_read(const void* key, int64_t col0);
  int64_t pack_reads(const void* key, int64_t col0) const;

  // ---- deferred weight gradients (core/deferred_grads.h). An op's backward may hand over a
  // product of a few rows into input k's gradient, grad (P,Q) += u (R,P)^T v (R,Q); the tape runs
  // all the products staged for one gradient as one, before the backward of the node that holds
  // it (for a leaf, at the end of backward). Returns false, having staged nothing, when deferring
  // is off (set_defer_grads(false), or anomaly mode, which checks each gradient as an op makes
  // it); the op then runs the product itself. On by default.
  bool defer_product(const Node& n, int k, DType dtype, const void* u, int64_t p, const void* v,
                     int64_t q, int64_t rows);
  void set_defer_grads(bool on) { defer_grads_ = on; }
  bool defer_grads() const { return defer_grads_; }
  const DeferredGrads& deferred_grads() const { return deferred_; }

  // Drops every node; memory returns to the pool, capacity is kept for the next step.
  void clear();
  // Changes at every clear() and is unique across tapes.
  uint64_t epoch() const { return epoch_; }

  // ---- bindings of long-lived tensors (parameters) to leaves of this recording
  // The leaf recorded for `key` since the last clear(), or -1. A parameter read at every time
  // step is one leaf, and the cache lives on the tape, so tapes on other threads never share it.
  int32_t find_binding(const void* key) const;
  void add_binding(const void* key, int32_t node);
  // Where the gradient of a tensor bound with `grad` goes: the buffer registered for `grad`'s
  // storage by redirect_grads, else `grad` itself. Data-parallel workers redirect parameter
  // gradients into private buffers this way, and their sum is added up after backward.
  Tensor grad_destination(const Tensor& grad) const;
  // (parameter gradient, private buffer) pairs, same shapes and dtypes; empty to stop redirecting.
  void redirect_grads(std::vector<std::pair<Tensor, Tensor>> pairs);
  bool redirecting() const { return !redirects_.empty(); }

  // ---- inspection and backward helpers
  size_t size() const { return nodes_.size(); }
  const Node& node(size_t i) const { return nodes_[i]; }
  std::span<const int32_t> inputs(const Node& n) const {
    return {edges_.data() + n.in_begin, n.in_count};
  }
  const Tensor& saved(const Node& n, int k) const { return saved_[n.saved_begin + k]; }
  std::span<const int64_t> attrs(const Node& n) const {
    return {attrs_.data() + n.attr_begin, n.attr_count};
  }
  // The gradient buffer of input k of n, zero-initialised on first use; nullptr if that input
  // needs no gradient (a constant).
  Tensor* input_grad(const Node& n, int k);
  // input_grad for a backward that writes every element of that gradient: where no op has
  // reached the gradient yet (and k is n's only edge to that node), it is allocated unzeroed and
  // *first is set, and the backward stores its share instead of adding it (the first of several
  // shares needs no zeros to add to). The tiny Transformer's step spent 2% zeroing such buffers.
  Tensor* input_grad_to_write(const Node& n, int k, bool* first);

  // ---- regions: labels for spans of recording ("encoder", "scores", ...)
  void push_region(std::string_view name);
  void pop_region();
  const std::string& region_name(uint16_t r) const { return regions_[r]; }

  // ---- labels: optional names for single nodes (a parameter's path, "h_j"), for inspection.
  // Kept in a map that stays empty unless set_label is called, so recording pays nothing for them.
  // set_label throws IndexError for a node outside the tape; label is "" for an unlabelled node.
  void set_label(int32_t node, std::string label);
  const std::string& label(int32_t node) const;

  // ---- names of long-lived tensors (parameters), for error messages and drawings: a leaf whose
  // value shares storage with a named tensor goes by that name (nn::name_parameters sets a
  // module's). Kept across clear(); looked up only when a message or a drawing asks.
  void set_tensor_names(std::vector<std::pair<std::string, Tensor>> names);
  // The node's label, else the name of the tensor a leaf holds, else "".
  std::string display_name(int32_t node) const;

 private:
  friend class NoGrad;
  int32_t append(const OpDef& op, Tensor value);
  // Anomaly mode's checks; they throw AnomalyError.
  void check_forward(const OpDef& op, const Tensor& value,
                     std::span<const Var* const> inputs) const;
  void check_backward(const Node& n) const;
  void add_input(const Var& v);
  template <class I>
  void append_attrs(int32_t node, std::span<const I> attrs);

  std::vector<Node> nodes_;
  std::vector<int32_t> edges_;
  std::vector<Tensor> saved_;
  std::vector<int64_t> attrs_;
  std::vector<std::string> regions_;
  std::vector<uint16_t> region_stack_;
  std::vector<std::pair<const void*, int32_t>> bindings_;
  std::vector<std::pair<Tensor, Tensor>> redirects_;
  std::unordered_map<int32_t, std::string> labels_;
  std::vector<std::pair<std::string, Tensor>> tensor_names_;
  int no_grad_depth_ = 0;
  uint64_t epoch_ = 0;
  bool keep_grads_ = false;
  bool detect_anomaly_ = false;
  bool defer_grads_ = true;
  DeferredGrads deferred_;
  RecordHook record_hook_;
  bool backward_spent_ = false;  // a backward ran without retain_graph since the last clear()
  WeightPacks* weight_packs_ = nullptr;
  struct PackReads {
    const void* key;
    int64_t col0, count;
  };
  std::vector<PackReads> pack_reads_;  // this recording's, a few weights: searched in order
};

// Scope in which ops on `tape` record nothing (inference).
class NoGrad {
 public:
  explicit NoGrad(Tape& tape) : tape_(tape) { ++tape_.no_grad_depth_; }
  ~NoGrad() { --tape_.no_grad_depth_; }
  NoGrad(const NoGrad&) = delete;
  NoGrad& operator=(const NoGrad&) = delete;

 private:
  Tape& tape_;
};

// Scope in which `tape` runs in anomaly mode (Tape::set_detect_anomaly); the previous mode returns
// at the end of the scope.
class DetectAnomaly {
 public:
  explicit DetectAnomaly(Tape& tape) : tape_(tape), before_(tape.detect_anomaly()) {
    tape_.set_detect_anomaly(true);
  }
  ~DetectAnomaly() { tape_.set_detect_anomaly(before_); }
  DetectAnomaly(const DetectAnomaly&) = delete;
  DetectAnomaly& operator=(const DetectAnomaly&) = delete;

 private:
  Tape& tape_;
  bool before_;
};

// Scope in which `tape` defers weight gradients or not (Tape::set_defer_grads); the previous
// setting returns at the end of the scope, also when an exception leaves it.
class DeferGrads {
 public:
  DeferGrads(Tape& tape, bool on) : tape_(tape), before_(tape.defer_grads()) {
    tape_.set_defer_grads(on);
  }
  ~DeferGrads() { tape_.set_defer_grads(before_); }
  DeferGrads(const DeferGrads&) = delete;
  DeferGrads& operator=(const DeferGrads&) = delete;

 private:
  Tape& tape_;
  bool before_;
};

// Scope that labels every node recorded inside it.
class Region {
 public:
  // Nothing to label while the tape records nothing (inference), so no lookup is paid then.
  Region(Tape& tape, std::string_view name) : tape_(tape), active_(tape.recording()) {
    if (active_) tape_.push_region(name);
  }
  ~Region() {
    if (active_) tape_.pop_region();
  }
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;

 private:
  Tape& tape_;
  bool active_;
};

// The tape to record on: that of the first input needing a gradient, if it is recording.
Tape* recording_tape(std::initializer_list<const Var*> inputs);
Tape* recording_tape(std::span<const Var> inputs);

}  // namespace tapestry
