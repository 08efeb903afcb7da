// tapestry explain: backprop through attention, value by value, at any decoder step of a tiny
// fresh model or a trained one, checked against finite differences.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string_view>

#include "tapestry/core/file_io.h"
#include "tapestry/models/tasks.h"
#include "tapestry/models/text_input.h"
#include "tools/cli.h"
#include "tools/explain.h"
#include "tools/explain_transformer.h"
#include "tools/flags.h"
#include "tools/text_files.h"

namespace tapestry::cli {

namespace {

constexpr const char* kAbout =
    "Runs a decoder step of an attention model on a tape that keeps every gradient and prints,\n"
    "after the story of the step in words: (1) the forward pass as recorded, one line per node\n"
    "(index, op, inputs, shape, values), grouped under the step each belongs to (encoder, scores,\n"
    "softmax, context, decoder, output, loss) with that step's equation; (2) the backward pass in\n"
    "reverse tape order: the gradient reaching each node and the share it passes to each input,\n"
    "down to the attention's parameters and the encoder states, then the chain through attention\n"
    "recomputed by hand; (3) a check of every attention parameter, the encoder states and the\n"
    "step's scores, weights and context: the tape's gradient beside a fourth-order central\n"
    "difference and their relative error.\n\n"
    "By default the model is tiny and freshly initialised (hidden 4, embeddings 3, float64), its\n"
    "vocabularies the words of --source and --reference; --model explains a trained model instead\n"
    "(widened to float64). The decoder is teacher-forced on --target (the reference, or the "
    "model's\n"
    "own greedy translation); step t is fed the target's word t-1 (<bos> at t = 0) and scored on\n"
    "its word t (<eos> after the last), L_t = -log p(y*_t). --step all explains every step and\n"
    "how each encoder state's gradient is the sum of what every step sent back to it; --format\n"
    "html makes it a page with a stepper over the steps.\n\n"
    "A Transformer (--arch transformer, or a trained one: its arch is read from the model) is\n"
    "explained per decoder layer and head: the masked self-attention and the cross-attention's\n"
    "q, k, v, scores, weights and context at position t, each with its gradient dL_t/dx, all\n"
    "checked against finite differences (text, json or html).\n\n"
    "Exits with status 1 if any finite-difference check fails.\n\n"
    "examples:\n"
    "  tapestry explain\n"
    "  tapestry explain --attention general --decoder luong --cell lstm --groups attention,loss\n"
    "  tapestry explain --step all --format html --out explain.html\n"
    "  tapestry explain --format dot | dot -Tsvg > tape.svg\n"
    "  tapestry explain --arch transformer --step 2\n"
    "  tapestry explain --model runs/demo-grammar --source \"the old dog sees a cat\" --step all "
    "\\\n"
    "      --quiet-tables";

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  for (std::string& item : split_commas(s))
    if (!item.empty()) out.push_back(std::move(item));
  return out;
}

// A sentence given with --`name`: refused when blank (rather than replaced by the default, as an
// absent one is) or not text (invalid UTF-8, a control character).
void check_sentence(const Flags& f, const char* name, const std::string& value) {
  if (!f.given(name)) return;
  if (value.find_first_not_of(" \t\n\r\v\f") == std::string::npos)
    throw UsageError{fmt::format("--{} '{}' has no words: give a sentence{}", name, value,
                                 std::string_view(name) == "source"
                                     ? " (or leave out --source for the tiny model's default)"
                                     : "")};
  if (const std::string why = models::text_problem(value); !why.empty())
    throw UsageError{fmt::format("--{}: {}", name, why)};
}

// Prints `text` (or writes it atomically to `out`) and returns explain's exit status: 1 if any of
// the steps' finite-difference checks failed (their count on stderr), else 0.
template <class Step>
int write_and_count_failures(const std::string& text, const std::string& out,
                             const std::vector<Step>& steps) {
  if (out.empty()) {
    fmt::print("{}", text);
  } else {
    write_file_atomic(out, text);
  }
  size_t failed = 0, checked = 0;
  for (const auto& s : steps)
    for (const auto& c : s.checks) {
      failed += c.pass ? 0 : 1;
      ++checked;
    }
  if (failed)
    fmt::print(stderr, "explain: {} of {} finite-difference checks failed\n", failed, checked);
  return failed ? 1 : 0;
}

// explain for a Transformer: per decoder layer and head, as text, JSON or a page.
int explain_transformer(ExplainModel& m, const std::string& target, bool all_steps, int64_t step,
                        const std::string& format, const std::string& out, bool quiet_tables,
                        int64_t full, const std::string& groups, const CheckOptions& check) {
  if (format == "dot")
    throw UsageError{
        "--format dot draws an RNN step's tape; a transformer's is text, json or html"};
  if (!groups.empty())
    throw UsageError{
        "--groups picks an RNN step's regions; a transformer is shown per layer and "
        "head"};
  std::vector<TransformerExplanation> steps;
  try {
    const std::vector<std::string> sentence =
        target.empty() ? explain_target(m) : m.preprocess.tokenize_target(target);
    if (!target.empty() && sentence.empty())
      throw ValueError(fmt::format("explain: the target '{}' has no words", target));
    const int64_t last = all_steps ? static_cast<int64_t>(sentence.size()) : step;
    for (int64_t t = all_steps ? 0 : step; t <= last; ++t)
      steps.push_back(explain_transformer_step(m, sentence, t, check));
  } catch (const ValueError& err) {
    std::string what = err.what();
    if (what.rfind("explain: ", 0) == 0) what = what.substr(9);
    throw UsageError{what};
  }
  AcrossSteps across;
  if (all_steps)
    across =
        transformer_across(steps, transformer_sentence_gradient(m, steps.front().target_sentence));
  TextOptions o;
  o.full_max = full;
  if (quiet_tables) o.forward = o.backward = o.check_rows = false;
  std::string text;
  if (format == "text") {
    for (size_t i = 0; i < steps.size(); ++i)
      text += (i ? "\n" + std::string(100, '=') + "\n" : "") + render_transformer_text(steps[i], o);
    if (all_steps) text += render_across_text(across, !quiet_tables);
  }
  if (format == "json") {
    if (!all_steps) {
      text = render_transformer_json(steps.front());
    } else {
      std::string items;
      for (size_t i = 0; i < steps.size(); ++i)
        items += (i ? ",\n" : "") + render_transformer_json(steps[i]);
      text = "{\"steps\": [\n" + items + "],\n\"across\": " + across_json(across) + "}\n";
    }
  }
  if (format == "html") text = render_transformer_html(steps, all_steps ? &across : nullptr);
  return write_and_count_failures(text, out, steps);
}

}  // namespace

int cmd_explain(const Args& args) {
  std::string model_path, attention = "bahdanau", decoder = "bahdanau", cell = "gru";
  int64_t hidden = 4, emb = 3, attn_size = 0, window = 1, layers = 1, seed = 1;
  bool bidirectional = false, deep_output = true;
  std::string source, reference, target, step_flag = "0", format = "text", out, groups;
  bool quiet_tables = false;
  int64_t full = 16, check_max = -1;
  double eps = 1e-3;
  std::string arch;
  int64_t d_model = 8, heads = 2, ffn = 16, enc_layers = 1, dec_layers = 2;

  Flags f("tapestry explain [options]", kAbout);
  f.section("model");
  f.add("model", &model_path, "a trained model: a run directory or a .safetensors file");
  f.add("arch", &arch,
        "the architecture: the tiny model's, or a check of a trained model's [rnn; with --model, "
        "the model's]",
        {"rnn", "transformer"});
  f.add("d-model", &d_model, "tiny transformer: width d", 2, 64);
  f.add("heads", &heads, "tiny transformer: attention heads (dividing d)", 1, 16);
  f.add("ffn", &ffn, "tiny transformer: feed-forward width", 1, 256);
  f.add("enc-layers", &enc_layers, "tiny transformer: encoder layers", 1, 4);
  f.add("dec-layers", &dec_layers, "tiny transformer: decoder layers", 1, 4);
  std::vector<std::string> kinds;
  for (auto k : nn::all_attention_kinds()) kinds.push_back(nn::attention_name(k));
  f.add("attention", &attention, "tiny model: attention variant", kinds);
  f.add("decoder", &decoder, "tiny model: decoder style", {"bahdanau", "luong"});
  f.add("cell", &cell, "tiny model: recurrent cell", {"rnn", "gru", "lstm"});
  f.add("hidden", &hidden, "tiny model: hidden size H", 1, 64);
  f.add("emb", &emb, "tiny model: embedding size", 1, 64);
  f.add("attn-size", &attn_size, "tiny model: additive attention's hidden size (0: H)", 0, 64);
  f.add("window", &window, "tiny model: local attention's half width D", 1, 100);
  f.add("layers", &layers, "tiny model: encoder and decoder layers", 1, 4);
  f.add_switch("bidirectional", &bidirectional,
               "tiny model: bidirectional encoder (K = 2H; not for dot, scaled-dot, cosine)");
  f.add_switch("deep-output", &deep_output,
               "tiny model, Bahdanau decoder: the output layer reads [s; c; E y] (else s)");
  f.add("seed", &seed, "tiny model: initialisation seed", 0, 1 << 30);
  f.section("input");
  f.add("source", &source,
        "the source sentence [tiny model: 'the black cat'; required with --model]");
  f.add("reference", &reference,
        "tiny model: the target sentence, whose words make the target vocabulary [the grammar "
        "task's translation of the source]");
  f.add("target", &target,
        "the target sentence, fed to the decoder word by word (teacher forcing) [the reference; "
        "with --model, the model's own greedy translation]");
  f.add("step", &step_flag,
        "the decoder step to explain: t = 0..T (step t writes the target's word t, step T "
        "writes <eos>), or all [0]");
  f.section("output");
  f.add("format", &format, "what to print", {"text", "json", "dot", "html"});
  f.add("out", &out, "write to this file instead of standard output");
  f.add("full", &full, "tensors of at most this many elements print every value (text, html)", 1,
        100000);
  f.add("groups", &groups,
        "text and html: only these groups, comma-separated region prefixes (e.g. "
        "attention,output,loss)");
  f.add_switch("quiet-tables", &quiet_tables,
               "text: only the story and the check's verdict, no tables");
  f.add("check-max", &check_max,
        "elements checked per tensor (-1: all for the tiny model, 8 with --model; 0: all)", -1,
        1 << 30);
  f.add("eps", &eps, "finite-difference step [1e-3; 1e-4 for a transformer]", 1e-8, 1e-1);
  if (!f.parse(args)) return 0;

  check_sentence(f, "source", source);
  check_sentence(f, "reference", reference);
  check_sentence(f, "target", target);
  if (!out.empty()) check_output_file("--out", out);

  int64_t step = 0;
  const bool all_steps = step_flag == "all";
  if (!all_steps) {
    constexpr const char* kStep = "a step number (0, 1, ...) or 'all'";
    step = parse_int("--step", step_flag, INT64_MIN, INT64_MAX, kStep);
    if (step < 0) throw UsageError{fmt::format("--step: '{}' is not {}", step_flag, kStep)};
  }
  if (all_steps && format == "dot")
    throw UsageError{
        "--format dot draws one step: give --step N (text, json and html take --step all)"};

  ExplainModel m;
  std::optional<models::Seq2SeqConfig> tiny;  // without --model: the tiny model to build
  constexpr const char* kRnnFlags[] = {"attention",     "decoder",    "cell",   "hidden",
                                       "emb",           "attn-size",  "window", "layers",
                                       "bidirectional", "deep-output"};
  constexpr const char* kTransformerFlags[] = {"d-model", "heads", "ffn", "enc-layers",
                                               "dec-layers"};
  if (!model_path.empty()) {
    for (const char* tiny : {"attention", "decoder", "cell", "hidden", "emb", "attn-size", "window",
                             "layers", "bidirectional", "deep-output", "seed", "reference",
                             "d-model", "heads", "ffn", "enc-layers", "dec-layers"})
      if (f.given(tiny))
        throw UsageError{fmt::format(
            "--{} describes the tiny model; a trained model (--model) brings its own", tiny)};
    if (source.empty()) throw UsageError{"--model needs --source, the sentence to explain"};
    m = trained_model(model_file(model_path), source);
    const std::string is = m.model->is_transformer() ? "transformer" : "rnn";
    if (!arch.empty() && arch != is)
      throw UsageError{fmt::format("--arch {}, but the model {} is {} ({})", arch, model_path,
                                   is == "rnn" ? "an RNN" : "a transformer",
                                   m.model->config().summary())};
    arch = is;
    if (check_max < 0) check_max = 8;
  } else if (arch == "transformer") {
    for (const char* rnn : kRnnFlags)
      if (f.given(rnn))
        throw UsageError{fmt::format(
            "--{} describes the tiny RNN model; the tiny transformer takes --d-model, --heads, "
            "--ffn, --enc-layers, --dec-layers",
            rnn)};
    models::Seq2SeqConfig c = tiny_transformer_config();
    c.d_model = d_model;
    c.heads = heads;
    c.ffn = ffn;
    c.enc_layers = static_cast<int>(enc_layers);
    c.dec_layers = static_cast<int>(dec_layers);
    c.seed = static_cast<uint64_t>(seed);
    if (d_model % heads != 0)
      throw UsageError{fmt::format("--heads {} does not divide --d-model {}", heads, d_model)};
    tiny = c;
  } else {
    for (const char* tf : kTransformerFlags)
      if (f.given(tf))
        throw UsageError{
            fmt::format("--{} describes the tiny transformer: add --arch transformer", tf)};
    models::Seq2SeqConfig c;
    c.attention = nn::parse_attention(attention);
    c.decoder = models::parse_decoder(decoder);
    c.cell = nn::parse_cell(cell);
    c.hidden = hidden;
    c.emb = emb;
    c.attn_size = attn_size;
    c.window = window;
    c.layers = static_cast<int>(layers);
    c.bidirectional = bidirectional;
    c.deep_output = deep_output;
    c.seed = static_cast<uint64_t>(seed);
    tiny = c;
  }
  if (tiny) {  // its vocabularies: the words of the source and of its reference
    if (source.empty()) source = "the black cat";
    std::vector<std::string> src = models::split_words(source), ref;
    if (!reference.empty()) {
      ref = models::split_words(reference);
    } else {
      try {
        ref = models::translate_grammar(src).tgt;
      } catch (const ValueError& e) {
        throw UsageError{fmt::format(
            "--source '{}' is not a sentence of the grammar task ({}); give its translation with "
            "--reference",
            source, e.what())};
      }
    }
    m = tiny_model(*tiny, src, ref);
    if (check_max < 0) check_max = 0;
  }
  CheckOptions check;
  check.eps = eps;
  check.max_elements = check_max;
  if (arch == "transformer") {
    if (!f.given("eps")) check.eps = 1e-4;  // fewer ReLU kinks crossed in a trained model
    return explain_transformer(m, target, all_steps, step, format, out, quiet_tables, full, groups,
                               check);
  }
  std::vector<Explanation> steps;
  try {
    const std::vector<std::string> sentence =
        target.empty() ? explain_target(m) : m.preprocess.tokenize_target(target);
    if (!target.empty() && sentence.empty())
      throw ValueError(fmt::format("explain: the target '{}' has no words", target));
    const int64_t last = all_steps ? static_cast<int64_t>(sentence.size()) : step;
    for (int64_t t = all_steps ? 0 : step; t <= last; ++t)
      steps.push_back(explain_step(m, sentence, t, check));
  } catch (const ValueError& err) {  // a target outside the vocabulary, a step outside the
                                     // sentence: the user's to fix
    std::string what = err.what();
    if (what.rfind("explain: ", 0) == 0) what = what.substr(9);
    throw UsageError{what};
  }
  const Explanation& e = steps.front();

  TextOptions o;
  o.full_max = full;
  o.groups = split_list(groups);
  for (const auto& g : o.groups) {
    std::vector<std::string> regions;
    bool found = false;
    for (const auto& n : e.nodes) {
      found = found || in_groups(n.region, std::span<const std::string>(&g, 1));
      if (!n.region.empty() && std::find(regions.begin(), regions.end(), n.region) == regions.end())
        regions.push_back(n.region);
    }
    if (!found) {
      std::string valid;
      for (const auto& r : regions) valid += (valid.empty() ? "" : ", ") + r;
      throw UsageError{fmt::format("--groups: no region starts with '{}' (regions: {})", g, valid)};
    }
  }
  AcrossSteps across;
  if (all_steps)
    across = across_steps(steps, sentence_keys_gradient(m, steps.front().target_sentence));
  if (quiet_tables) {
    o.forward = o.backward = false;
    o.check_rows = false;
  }
  std::string text;
  if (format == "text") {
    for (size_t i = 0; i < steps.size(); ++i)
      text += (i ? "\n" + std::string(100, '=') + "\n" : "") + render_text(steps[i], o);
  }
  if (format == "json") {
    if (!all_steps) {
      text = render_json(e);
    } else {
      std::string items;
      for (size_t i = 0; i < steps.size(); ++i) items += (i ? ",\n" : "") + render_json(steps[i]);
      text = "{\"steps\": [\n" + items + "],\n\"across\": " + across_json(across) + "}\n";
    }
  }
  if (format == "dot") text = render_dot(e, o);
  if (format == "html") text = render_html(steps, all_steps ? &across : nullptr, o);
  if (format == "text" && all_steps) text += render_across_text(across, !quiet_tables);
  return write_and_count_failures(text, out, steps);
}

}  // namespace tapestry::cli
