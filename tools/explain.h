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
#include "tapestry/models/preprocess.h"
#include "tapestry/models/seq2seq.h"
#include "tapestry/models/vocab.h"

namespace tapestry::cli {

struct ExplainNode {
  int32_t index = 0;
  int step = -1;  // the decoder step that recorded it; -1 before the first step, and parameters
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
  int64_t step = 0;                          // t
  std::vector<std::string> target_sentence;  // the teacher-forced target, without <eos>
  std::string previous = "<bos>";            // the gold previous target token fed to the step
  std::string target;  // y*: the token the loss scores (<eos> after the last word)
  int32_t target_id = 0;
  double loss = 0;                                  // L_t = -log p(y*)
  std::vector<std::pair<std::string, double>> top;  // the most likely next words, with p
  std::vector<std::string> story;                   // what the numbers say, in sentences
  std::vector<ExplainNode> nodes;                   // in tape order
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
inline constexpr const char* kScoresName = "e (scores)";
inline constexpr const char* kWeightsName = "a (weights)";
inline constexpr const char* kContextName = "c (context)";

struct CheckOptions {
  double eps = 1e-3;         // step of the fourth-order central difference
  double tolerance = 1e-6;   // largest relative error that passes
  int64_t max_elements = 0;  // per tensor; 0 checks every element
};

// A model, its vocabularies and the source to explain. The model runs in float64.
struct ExplainModel {
  std::unique_ptr<models::Seq2Seq> model;
  models::Vocab src, tgt;
  models::Preprocess preprocess;       // how text becomes tokens (a trained model's own)
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

// The target sentence to teacher-force when none is given: the reference, or with none the
// model's own greedy translation.
std::vector<std::string> explain_target(ExplainModel& m);

// Records the encoder, the attention's memory, the decoder's start and steps 0..t teacher-forced
// on `target` (step k is fed <bos> or the target's word k-1), step t's output layer and its loss
// L_t = -log softmax(z_t)[y*_t] (y*_t the target's word t, or <eos> at t = T) on a tape that keeps
// every gradient; runs backward; gathers the tape; checks against central differences every
// attention parameter, the encoder states and this step's scores, weights and context. Throws
// ValueError naming a target word outside the vocabulary (listing it) or a step outside [0, T].
Explanation explain_step(ExplainModel& m, const std::vector<std::string>& target, int64_t step,
                         const CheckOptions& check);

// The step told in sentences written from its values (tools/explain_story.cpp).
std::vector<std::string> step_story(const Explanation& e);

// ---- every step of a sentence (tools/explain_steps.cpp)

// What the steps of one sentence show together: where each step attended, and how the gradient
// reaching each encoder state h_j is the sum of what every step sent back to it.
struct AcrossSteps {
  std::vector<std::string> source;
  std::vector<std::string> written;           // y*_t, one per step (<eos> last)
  std::vector<double> losses;                 // L_t
  std::vector<std::vector<double>> weights;   // [t][j] a_j at step t (empty for `none`)
  std::vector<std::vector<double>> dh_norms;  // [t][j] |dL_t/dh_j|
  std::vector<double> total_norms;            // [j] |sum_t dL_t/dh_j|
  // The largest |sum_t dL_t/dh_j - dL/dh_j| over every element, where dL/dh_j comes from one
  // backward pass of the sentence's loss L = sum_t L_t.
  double sum_difference = 0;
  std::vector<std::string> story;
};
// dL/dh_j of the whole sentence's loss L = sum_t L_t, teacher-forced on `target`, from one
// ordinary backward pass: (S,K) row-major.
// The source sentence as a batch of one (no target yet). Throws ValueError when it has no words.
models::Batch source_batch(const ExplainModel& m);
std::vector<double> sentence_keys_gradient(ExplainModel& m, const std::vector<std::string>& target);
AcrossSteps across_steps(const std::vector<Explanation>& steps,
                         const std::vector<double>& sentence_dh);
// The same from its parts, for any architecture: per step t the word written, L_t, the weights
// over the source (or none) and dL_t/dh (S,K) of the states the attention reads (empty where
// no gradient reached them), and dL/dh of the whole sentence's loss. `states` names their gradient
// in the story ("Each h_j's gradient").
AcrossSteps across_sentence(std::vector<std::string> source, std::vector<std::string> written,
                            std::vector<double> losses, std::vector<std::vector<double>> weights,
                            const std::vector<std::vector<double>>& step_grads,
                            const std::vector<double>& sentence_grad, const std::string& states);
std::string render_across_text(const AcrossSteps& a, bool tables);
std::string across_json(const AcrossSteps& a);

// The chain through attention, recomputed from e's nodes and parameters (needs e.focus).
std::vector<ChainStep> attention_chain(const Explanation& e);

// ---- renderers (tools/explain_*.cpp)

struct TextOptions {
  int64_t full_max = 16;                               // tensors up to this size print every value
  std::vector<std::string> groups;                     // region prefixes to show (empty: all)
  bool forward = true, backward = true, check = true;  // the tables and the check
  bool check_rows = true;  // the check's row per element, or only its verdict
};
std::string render_text(const Explanation& e, const TextOptions& o);
std::string render_json(const Explanation& e);
// DOT through the graph drawer: regions folded (at most 40 boxes) except the groups to show.
std::string render_dot(const Explanation& e, const TextOptions& o);
// How the drawer shows a step: the groups to show open, each earlier step folded into one box.
DrawOptions explain_draw_options(const Explanation& e, const TextOptions& o);
// The explanation as the drawer's plain data (edge labels: the gradient norm sent back).
DrawGraph explain_graph(const Explanation& e);
// One step's section of that page (tools/explain_html.cpp).
std::string html_step_section(const Explanation& e, const TextOptions& o);
// One self-contained page for one or more steps of a sentence (a stepper goes from one to the
// next), with the maps across them when `across` is given (--step all).
std::string render_html(const std::vector<Explanation>& steps, const AcrossSteps* across,
                        const TextOptions& o);

// The math of each group of an RNN attention model's graph (the encoder, the attention's parts,
// the decoder, the loss), written for configuration c, a source of src_len tokens and decoder
// step `step`: group name -> text (tools/explain_equations.cpp).
std::map<std::string, std::string> group_equations(const models::Seq2SeqConfig& c, int64_t src_len,
                                                   int64_t step);
// A vocabulary's first 40 tokens, space-separated, and how many it has where that is more.
std::string vocab_list(const models::Vocab& v);
// Refuses a teacher-forced target with a word outside `tgt` (or a special one), or a step
// outside the sentence (its words make steps 0 .. words, the last writing <eos>): one line
// naming the word and the vocabulary, or the step and the range.
void check_teacher_forced(const models::Vocab& tgt, std::span<const std::string> target,
                          int64_t step);

// ---- shared by the renderers

// Words of `text` filled into lines of at most 100 characters, the first after `first`, the rest
// after `next`.
std::vector<std::string> wrap(const std::string& text, const std::string& first,
                              const std::string& next);
// "(1,3,4)"
std::string shape_text(std::span<const int64_t> shape);
// 4 significant digits, compact ("0.1235", "-1.2e-05" style via %.4g).
std::string num(double v);
// At most 8 characters, for a heatmap's cell: 3 significant digits between 0.001 and 999, else a
// mantissa of 2 and a short exponent ("-1.2e-12"; 1 digit beyond 1e+-99).
std::string cell_num(double v);
// min / max / mean / norm of a large tensor, one line.
std::string summary_text(std::span<const double> v);
// The Euclidean norm.
double norm(std::span<const double> v);
// The node at index i of e's tape, or nullptr where i is -1 (a focus node the variant lacks) or
// out of range.
inline const ExplainNode* node_at(const Explanation& e, int32_t i) {
  return i >= 0 && static_cast<size_t>(i) < e.nodes.size() ? &e.nodes[static_cast<size_t>(i)]
                                                           : nullptr;
}
// Words joined by single spaces.
std::string joined(const std::vector<std::string>& words);
// Whether a node is drawn with its step: the explained step's own nodes, and those recorded before
// the first step (the encoder, the attention's keys, the decoder's start) or read by every step
// (parameters); the earlier steps' nodes are left out of tables.
inline bool shown(const ExplainNode& n, const Explanation& e) {
  return n.step < 0 || n.step == e.step;
}
// Whether a node belongs to one of the groups (region prefixes); every node if groups is empty.
bool in_groups(const std::string& region, std::span<const std::string> groups);
// The group heading of a region ("attention.scores"), "(no region)" for the empty one.
std::string region_title(const std::string& region);
// A flat row-major index as "[i,j,k]".
std::string element_text(const std::vector<int64_t>& shape, int64_t flat);
// A parameter's path without the leading "encoder." or "decoder." ("attention.W").
std::string short_param(const std::string& name);

}  // namespace tapestry::cli
