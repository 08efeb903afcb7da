// Explain: one decoder step of an attention model recorded on a tape and gathered into plain data
// (every node's value and gradient, and the gradient each node passes to each of its inputs), with
// the attention's gradients checked against finite differences; renderers turn it into text, JSON,
// Graphviz DOT or an HTML page.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tapestry/core/graph_draw.h"
#include "tapestry/models/seq2seq.h"
#include "tapestry/models/vocab.h"

namespace tapestry::cli {

struct ExplainNode {
  int32_t index = 0;
  std::string op, region, label;  // label: a parameter's path or a symbol ("a", "c", "h_j")
  std::string math;               // the op's equation and derivative (OpDef::math)
  std::vector<int32_t> inputs;    // node indices; -1 for a constant input
  // Per input: the norm of the gradient this node's backward adds to it, or -1 where nothing
  // flows (a constant input, or no gradient reached this node). When one node is an input twice
  // (x * x) both edges carry their combined share.
  std::vector<double> passed;
  std::vector<int64_t> shape;
  std::vector<double> value;
  std::vector<double> grad;  // dL/d(node); empty when no gradient reached the node
};

struct ExplainParameter {
  std::string name;  // "decoder.attention.W"
  std::vector<int64_t> shape;
  std::vector<double> value, grad;
  bool attention = false;  // belongs to the attention layer (and is checked)
  int32_t node = -1;       // its leaf on the tape; -1 if this step does not read it
};

// One element of a checked tensor: the tape's gradient against a finite difference.
struct ExplainCheck {
  std::string tensor;  // a parameter's path, or kKeysName / kSummaryName
  std::vector<int64_t> shape;
  int64_t index = 0;  // flat, row-major
  double analytic = 0, numeric = 0;
  double rel_error = 0;  // |analytic - numeric| / the tensor's largest |gradient|
  bool pass = false;
};

// The nodes the renderers single out; -1 where absent (`none` has no scores or weights).
struct FocusNodes {
  int32_t keys = -1;       // h_j (1,S,K)
  int32_t summary = -1;    // the encoder's final state (1,K)
  int32_t query = -1;      // s: the decoder state attention reads (1,H)
  int32_t scores = -1;     // e (1,S): the softmax's input
  int32_t softmax = -1;    // softmax(e) (1,S); the weights themselves except for the local variants
  int32_t weights = -1;    // a (1,S)
  int32_t context = -1;    // c (1,K)
  int32_t logits = -1;     // z (1,V)
  int32_t loss = -1;       // L ()
  int32_t keys_proj = -1;  // U h_j (bahdanau), W_h h_j (concat), |h_j| (cosine)
};

// One link of the chain rule through attention: the gradient the tape computed beside the same
// quantity recomputed by hand (tools/explain_chain.cpp) from the values of neighbouring nodes.
struct ChainStep {
  std::string formula;  // "dL/da_j = dL/dc . h_j"
  std::vector<int64_t> shape;
  std::vector<double> tape;     // empty where the tape holds no such single value
  std::vector<double> by_hand;  // empty where not recomputed
};

struct Explanation {
  std::string model;        // Seq2SeqConfig::summary()
  std::string config_json;  // Seq2SeqConfig::to_json()
  std::string attention, decoder, cell;
  std::vector<std::string> source;  // the source tokens
  std::vector<std::string> src_vocab, tgt_vocab;
  std::string previous = "<bos>";  // the gold previous target token fed to the step
  std::string target;              // y*: the token the loss scores
  int32_t target_id = 0;
  double loss = 0;
  std::vector<ExplainNode> nodes;  // in tape order
  std::vector<ExplainParameter> parameters;
  std::map<std::string, std::string> equations;  // region -> what it computes, written out
  FocusNodes focus;
  std::vector<ChainStep> chain;  // from dL/dz down to the attention's parameters and h_j
  // The finite-difference check.
  std::vector<ExplainCheck> checks;
  double eps = 0, tolerance = 0;
  int64_t check_max = 0;  // elements checked per tensor (0: all)
};

inline constexpr const char* kKeysName = "h (encoder states)";
inline constexpr const char* kSummaryName = "encoder summary";

struct CheckOptions {
  double eps = 1e-3;         // step of the fourth-order central difference
  double tolerance = 1e-6;   // largest relative error that passes
  int64_t max_elements = 0;  // per tensor; 0 checks every element
};

// A model, its vocabularies and the source to explain. The model runs in float64.
struct ExplainModel {
  std::unique_ptr<models::Seq2Seq> model;
  models::Vocab src, tgt;
  std::vector<std::string> source;     // tokens
  std::vector<std::string> reference;  // the reference translation's tokens, if known
};

// A freshly initialised model whose vocabularies are exactly the source's and the reference's
// words. `shape` gives sizes and variants (its vocabulary sizes are replaced). Throws ValueError
// for an empty source or reference, and for a config that does not validate.
ExplainModel tiny_model(const models::Seq2SeqConfig& shape, std::vector<std::string> source,
                        std::vector<std::string> reference);

// A trained model (a run directory or a .safetensors file) copied into float64, with `source`
// tokenised by its preprocessing. Throws Error for a file that does not load, ValueError for a
// source with no tokens.
ExplainModel trained_model(const std::string& path, const std::string& source);

// Records encoder, attention memory, decoder start and one decoder step fed <bos>, the output
// layer and L = -log softmax(z)[target] on a tape that keeps every gradient; runs backward;
// gathers the tape; checks every attention parameter (and the encoder states) against central
// differences. `target` empty means the reference's first word, or with no reference the model's
// own prediction. Throws ValueError naming the target and listing the vocabulary when the target
// is not in it.
Explanation explain_step(ExplainModel& m, const std::string& target, const CheckOptions& check);

// The chain through attention, recomputed from e's nodes and parameters (needs e.focus).
std::vector<ChainStep> attention_chain(const Explanation& e);

// ---- renderers (tools/explain_*.cpp)

struct TextOptions {
  int64_t full_max = 16;            // tensors up to this size print every value
  std::vector<std::string> groups;  // region prefixes to show (empty: all)
  bool forward = true, backward = true, check = true;
};
std::string render_text(const Explanation& e, const TextOptions& o);
std::string render_json(const Explanation& e);
// DOT through the graph drawer: regions folded (at most 40 boxes) except the groups to show.
std::string render_dot(const Explanation& e, const TextOptions& o);
// The explanation as the drawer's plain data (edge labels: the gradient norm sent back).
DrawGraph explain_graph(const Explanation& e);
std::string render_html(const Explanation& e, const TextOptions& o);

// ---- shared by the renderers

// "(1,3,4)"
std::string shape_text(std::span<const int64_t> shape);
// 4 significant digits, compact ("0.1235", "-1.2e-05" style via %.4g).
std::string num(double v);
// min / max / mean / norm of a large tensor, one line.
std::string summary_text(std::span<const double> v);
// The Euclidean norm.
double norm(std::span<const double> v);
// Whether a node belongs to one of the groups (region prefixes); every node if groups is empty.
bool in_groups(const std::string& region, std::span<const std::string> groups);
// The group heading of a region ("attention.scores"), "(no region)" for the empty one.
std::string region_title(const std::string& region);
// A flat row-major index as "[i,j,k]".
std::string element_text(const std::vector<int64_t>& shape, int64_t flat);
// A parameter's path without the leading "encoder." or "decoder." ("attention.W").
std::string short_param(const std::string& name);

}  // namespace tapestry::cli
