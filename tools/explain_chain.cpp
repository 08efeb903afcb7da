// The chain rule through one attention step, link by link, each gradient recomputed by hand (plain
// loops over the recorded values) beside the one the tape's backward produced.
#include <fmt/format.h>

#include <cmath>

#include "tools/explain.h"

namespace tapestry::cli {

namespace {

using Vec = std::vector<double>;

// The explanation's nodes and parameters by role; every loop below is over a batch of one.
class Chain {
 public:
  explicit Chain(const Explanation& e) : e_(e) {}

  const ExplainNode* node(int32_t i) const {
    return i >= 0 && static_cast<size_t>(i) < e_.nodes.size() ? &e_.nodes[i] : nullptr;
  }
  const ExplainParameter* param(const std::string& short_name) const {
    for (const auto& p : e_.parameters)
      if (p.name == "decoder.attention." + short_name) return &p;
    return nullptr;
  }
  // The first node of `op` in `region` recorded by the explained step.
  const ExplainNode* find(const std::string& region, const std::string& op) const {
    for (const auto& n : e_.nodes)
      if (n.step == e_.step && n.region == region && n.op == op) return &n;
    return nullptr;
  }
  // A parameter's or h_j's gradient on the tape, where it is this step's share alone: at step 0.
  // Later, the tape's total also holds what reached it through the earlier steps (the query
  // s_(t-1) depends on their contexts), and the by-hand value is this step's share only.
  Vec total(const Vec& tape) const { return e_.step == 0 ? tape : Vec(); }
  std::string share(std::string formula) const {
    return e_.step == 0 ? formula : formula + "  [this step's share]";
  }
  void add(std::string formula, std::vector<int64_t> shape, Vec tape, Vec by_hand = {}) {
    steps_.push_back({std::move(formula), std::move(shape), std::move(tape), std::move(by_hand)});
  }
  std::vector<ChainStep> take() { return std::move(steps_); }

 private:
  const Explanation& e_;
  std::vector<ChainStep> steps_;
};

Vec grad_or_zero(const ExplainNode& n) {
  return n.grad.empty() ? Vec(n.value.size(), 0.0) : n.grad;
}

}  // namespace

std::vector<ChainStep> attention_chain(const Explanation& e) {
  Chain ch(e);
  const FocusNodes& f = e.focus;
  const ExplainNode* z = ch.node(f.logits);
  if (!z) return {};

  // The loss: dL/dz = softmax(z) - onehot(y*).
  {
    Vec p(z->value.size());
    double mx = z->value[0], sum = 0;
    for (double v : z->value) mx = std::max(mx, v);
    for (size_t i = 0; i < p.size(); ++i) sum += p[i] = std::exp(z->value[i] - mx);
    for (size_t i = 0; i < p.size(); ++i) p[i] /= sum;
    p[static_cast<size_t>(e.target_id)] -= 1;
    ch.add("dL/dz = softmax(z) - onehot(y*)", z->shape, grad_or_zero(*z), p);
  }
  const ExplainNode* c = ch.node(f.context);
  const ExplainNode* a = ch.node(f.weights);
  const ExplainNode* y = ch.node(f.softmax);
  const ExplainNode* ev = ch.node(f.scores);
  const ExplainNode* h = ch.node(f.keys);
  const ExplainNode* s = ch.node(f.query);
  if (!c || !a || !y || !ev || !h || !s) return ch.take();  // `none`: no attention to walk
  const Vec dc = grad_or_zero(*c);
  ch.add("dL/dc  (back from the decoder and output layer)", c->shape, dc);

  const auto S = static_cast<size_t>(h->shape[1]), K = static_cast<size_t>(h->shape[2]);
  const auto Hq = static_cast<size_t>(s->shape[1]);
  const Vec& hv = h->value;
  const Vec& sv = s->value;

  // Through the weighted sum c = sum_j a_j h_j: to the weights, and to the values h_j.
  Vec da(S, 0.0), dh_context(S * K);
  for (size_t j = 0; j < S; ++j)
    for (size_t k = 0; k < K; ++k) {
      da[j] += dc[k] * hv[j * K + k];
      dh_context[j * K + k] = a->value[j] * dc[k];
    }
  ch.add("dL/da_j = dL/dc . h_j", a->shape, grad_or_zero(*a), da);
  if (y != a)
    ch.add("dL/dy_j = dL/da_j g_j  (y = softmax(e), g the Gaussian)", y->shape, grad_or_zero(*y));

  // Through the softmax Jacobian: dy_i/de_j = y_i (delta_ij - y_j).
  const Vec dy = grad_or_zero(*y);
  double inner = 0;
  for (size_t j = 0; j < S; ++j) inner += y->value[j] * dy[j];
  Vec de(S);
  for (size_t j = 0; j < S; ++j) de[j] = y->value[j] * (dy[j] - inner);
  ch.add("dL/de_j = y_j (dL/dy_j - sum_k y_k dL/dy_k)" + std::string(y == a ? "  (y = a)" : ""),
         ev->shape, grad_or_zero(*ev), de);

  // Through the scores to the parameters, and to h_j by the second path.
  Vec dh = dh_context;
  bool dh_known = true;
  const std::string& kind = e.attention;
  if (kind == "bahdanau" || kind == "concat") {
    const ExplainNode* t = ch.find("attention.scores", "tanh");
    const ExplainNode* pre = t ? ch.node(t->inputs[0]) : nullptr;
    const ExplainParameter* v = ch.param("v");
    const ExplainParameter* w = ch.param("W");
    if (!t || !pre || !v || !w) return ch.take();
    const size_t A = v->value.size();
    Vec dv(A, 0.0), dp(S * A);
    for (size_t j = 0; j < S; ++j)
      for (size_t i = 0; i < A; ++i) {
        const double tj = t->value[j * A + i];
        dv[i] += de[j] * tj;
        dp[j * A + i] = de[j] * v->value[i] * (1 - tj * tj);
      }
    ch.add(ch.share("dL/dv = sum_j dL/de_j t_j  (t_j = tanh(p_j), p_j its input)"), v->shape,
           ch.total(v->grad), dv);
    ch.add("dL/dp_j = dL/de_j v * (1 - t_j^2)  (through tanh)", pre->shape, grad_or_zero(*pre), dp);
    if (kind == "bahdanau") {
      const ExplainParameter* b = ch.param("b");
      const ExplainParameter* u = ch.param("U");
      if (!b || !u) return ch.take();
      Vec db(A, 0.0), dw(A * Hq, 0.0), du(A * K, 0.0);
      for (size_t j = 0; j < S; ++j)
        for (size_t i = 0; i < A; ++i) {
          db[i] += dp[j * A + i];
          for (size_t q = 0; q < Hq; ++q) dw[i * Hq + q] += dp[j * A + i] * sv[q];
          for (size_t k = 0; k < K; ++k) du[i * K + k] += dp[j * A + i] * hv[j * K + k];
        }
      for (size_t j = 0; j < S; ++j)
        for (size_t k = 0; k < K; ++k)
          for (size_t i = 0; i < A; ++i) dh[j * K + k] += u->value[i * K + k] * dp[j * A + i];
      ch.add(ch.share("dL/db = sum_j dL/dp_j"), b->shape, ch.total(b->grad), db);
      ch.add(ch.share("dL/dW = sum_j dL/dp_j s^T"), w->shape, ch.total(w->grad), dw);
      ch.add(ch.share("dL/dU = sum_j dL/dp_j h_j^T"), u->shape, ch.total(u->grad), du);
      ch.add(ch.share("dL/dh_j = a_j dL/dc + U^T dL/dp_j  (the context's path + the scores')"),
             h->shape, ch.total(grad_or_zero(*h)), dh);
    } else {
      const size_t cols = Hq + K;
      Vec dw(A * cols, 0.0);
      for (size_t j = 0; j < S; ++j)
        for (size_t i = 0; i < A; ++i) {
          for (size_t q = 0; q < Hq; ++q) dw[i * cols + q] += dp[j * A + i] * sv[q];
          for (size_t k = 0; k < K; ++k) {
            dw[i * cols + Hq + k] += dp[j * A + i] * hv[j * K + k];
            dh[j * K + k] += w->value[i * cols + Hq + k] * dp[j * A + i];
          }
        }
      ch.add(ch.share("dL/dW = sum_j dL/dp_j [s; h_j]^T"), w->shape, ch.total(w->grad), dw);
      ch.add(ch.share("dL/dh_j = a_j dL/dc + W_h^T dL/dp_j  (the context's path + the scores')"),
             h->shape, ch.total(grad_or_zero(*h)), dh);
    }
    return ch.take();
  }
  if (kind == "dot" || kind == "scaled-dot") {
    const double scale = kind == "dot" ? 1.0 : 1.0 / std::sqrt(static_cast<double>(K));
    for (size_t j = 0; j < S; ++j)
      for (size_t k = 0; k < K; ++k) dh[j * K + k] += de[j] * scale * sv[k];
    ch.add(ch.share(kind == "dot"
                        ? "dL/dh_j = a_j dL/dc + dL/de_j s  (the context's path + the scores')"
                        : "dL/dh_j = a_j dL/dc + dL/de_j s / sqrt(K)  (context + scores)"),
           h->shape, ch.total(grad_or_zero(*h)), dh);
    return ch.take();
  }
  if (kind == "general" || kind == "local-m" || kind == "local-p") {
    const ExplainParameter* w = ch.param("W");
    if (!w) return ch.take();
    // e_j = (s W) . h_j: dW = s^T (sum_j dL/de_j h_j), dh_j += dL/de_j (s W).
    Vec sum_h(K, 0.0), sw(K, 0.0), dw(Hq * K);
    for (size_t j = 0; j < S; ++j)
      for (size_t k = 0; k < K; ++k) sum_h[k] += de[j] * hv[j * K + k];
    for (size_t q = 0; q < Hq; ++q)
      for (size_t k = 0; k < K; ++k) {
        dw[q * K + k] = sv[q] * sum_h[k];
        sw[k] += sv[q] * w->value[q * K + k];
      }
    for (size_t j = 0; j < S; ++j)
      for (size_t k = 0; k < K; ++k) dh[j * K + k] += de[j] * sw[k];
    ch.add(ch.share("dL/dW = s^T sum_j dL/de_j h_j"), w->shape, ch.total(w->grad), dw);
    ch.add(ch.share("dL/dh_j = a_j dL/dc + dL/de_j (s W)  (the context's path + the scores')"),
           h->shape, ch.total(grad_or_zero(*h)), dh);
    return ch.take();
  }
  if (kind == "cosine") {
    const ExplainParameter* beta = ch.param("beta");
    if (!beta) return ch.take();
    double dbeta = 0;
    for (size_t j = 0; j < S; ++j) dbeta += de[j] * ev->value[j] / beta->value[0];
    ch.add(ch.share("dL/dbeta = sum_j dL/de_j cos(s, h_j)"), beta->shape, ch.total(beta->grad),
           {dbeta});
    dh_known = false;
  }
  if (!dh_known)
    ch.add("dL/dh_j (a_j dL/dc is the context's share; the rest comes through the scores)",
           h->shape, grad_or_zero(*h));
  return ch.take();
}

}  // namespace tapestry::cli
