// tapestry explain on a Transformer, run as a program: per-head tables, the finite-difference
// check of every head's inner tensors, JSON gradients against an ordinary backward pass, a saved
// model explained in float64, and the --arch check.
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "explain_run.h"
#include "page_check.h"
#include "tapestry/models/saved_model.h"
#include "tapestry/models/seq2seq.h"
#include "tapestry/ops/ops.h"

using namespace tapestry;
using nlohmann::json;
namespace fs = std::filesystem;
using namespace tapestry::testing;

TEST_CASE("explain --arch transformer: per-head tables, and every head's check passes",
          "[explain][explain_transformer]") {
  for (const char* step : {"0", "2", "3"}) {
    Run r = explain(fmt::format("--arch transformer --step {}", step));
    INFO(r.output);
    REQUIRE(r.status == 0);
    for (int l = 1; l <= 2; ++l)
      for (int h = 1; h <= 2; ++h) {
        CHECK_THAT(r.output, Catch::Contains(fmt::format(
                                 "decoder layer {}, masked self-attention, head {} of 2", l, h)));
        CHECK_THAT(r.output,
                   Catch::Contains(fmt::format(
                       "decoder layer {}, cross-attention over the source, head {} of 2", l, h)));
      }
    CHECK_THAT(r.output, Catch::Contains("dL/dq_t") && Catch::Contains("dL/dc_t") &&
                             Catch::Contains("In the last layer (2) the cross-attention"));
    std::istringstream lines(r.output);
    for (std::string line; std::getline(lines, line);) {
      INFO(line);
      CHECK(line.size() <= 100);
    }
  }
  // The check's numbers, from the JSON: every element of every head tensor, all below 1e-6.
  ExplainDir dir("explain_tf");
  json j = explain_json(dir, "--arch transformer --step 2");
  // 2 layers x 2 attentions x 2 heads x 6 tensors, every element: q (3,4), k and v (3,4 self;
  // 3,4 cross), scores and weights (3,3), context (3,4).
  CHECK(j["check"].size() == 2 * 2 * 2 * (4 * 12 + 2 * 9));
  double worst = 0;
  for (const auto& c : j["check"]) {
    CHECK(c["pass"].get<bool>());
    worst = std::max(worst, c["rel_error"].get<double>());
  }
  CHECK(worst < 1e-6);
  CHECK(j["worst_rel_error"].get<double>() == worst);
  // A causal decoder: at step t nothing reaches the self-attention's masked keys' scores.
  for (const auto& a : j["heads"]) {
    if (a["attention"] != "self") continue;
    const auto g = a["scores"]["grad"].get<std::vector<double>>();
    for (int i = 0; i < 3; ++i)
      for (int k = i + 1; k < 3; ++k) CHECK(g[static_cast<size_t>(i * 3 + k)] == 0);
  }
}

TEST_CASE("explain --arch transformer: JSON gradients equal an ordinary backward of L_t",
          "[explain][explain_transformer]") {
  // The reference is the training path over the whole teacher-forced sentence with every target
  // but step t's masked (<pad>), so the loss is L_t; explain stops the decoder's input at t.
  ExplainDir dir("explain_tf");
  for (const char* norm : {"", " --dec-layers 3 --heads 4"}) {
    json all = explain_json(dir, fmt::format("--arch transformer --step all{}", norm));
    REQUIRE(all["steps"].size() == 4);  // le chat noir <eos>
    for (const json& j : all["steps"]) {
      const auto t = j["step"].get<int64_t>();
      INFO("step " << t << norm);
      models::Seq2SeqConfig config = models::Seq2SeqConfig::from_json(j["config"].dump());
      models::Seq2Seq model(config, DType::f64);
      model.eval();
      const models::Batch batch = step_batch(j);  // every target but step t's masked: L_t
      {
        Tape tape;
        Var loss = model.loss(tape, batch);
        tape.backward(loss);
        CHECK(std::abs(loss.value().item() - j["loss"].get<double>()) < 1e-12);
        auto named = model.named_parameters();
        REQUIRE(named.size() == j["parameters"].size());
        for (const auto& [name, p] : named) {
          INFO(name);
          CHECK(max_abs_diff(p->grad.to_vector(),
                             j["parameters"].at(name)["grad"].get<std::vector<double>>()) < 1e-12);
        }
      }
      // Every head's inner tensors over the whole sentence: rows 0..t as explain gives them,
      // and no gradient in the rows after t.
      model.zero_grad();
      Tape tape;
      tape.set_keep_grads(true);
      Rng rng(0);
      models::TransformerModel& tf = model.transformer();
      models::TransformerModel::Weights w;
      const auto memory = tf.encode(tape, batch, rng, &w);
      const Var h = tf.decode(tape, memory, batch, rng, &w);
      const Var z = tf.logits(tape, ops::reshape(h, {batch.tgt_len, config.d_model}));  // (T,V)
      tape.backward(ops::cross_entropy(z, batch.tgt_out, models::Vocab::kPad));
      for (const json& a : j["heads"]) {
        const auto l = a["layer"].get<size_t>();
        const bool cross = a["attention"] == "cross";
        const auto head = a["head"].get<int64_t>();
        INFO("layer " << l << (cross ? " cross" : " self") << " head " << head);
        const auto& parts = cross ? w.decoder[l].cross_parts : w.decoder[l].self_parts;
        const Var& weights = cross ? w.decoder[l].cross : w.decoder[l].self;
        const std::pair<const char*, const Var*> items[] = {
            {"q", &parts.q},           {"k", &parts.k},       {"v", &parts.v},
            {"scores", &parts.scores}, {"weights", &weights}, {"context", &parts.context}};
        for (const auto& [what, var] : items) {
          INFO(what);
          const int64_t rows = var->dim(var->ndim() - 2), cols = var->dim(var->ndim() - 1);
          const std::vector<double> value = var->value().to_vector();
          const std::vector<double> grad = tape.grad(*var).to_vector();
          const auto jv = a[what]["value"].get<std::vector<double>>();
          const auto jg = a[what]["grad"].get<std::vector<double>>();
          const auto jrows = a[what]["shape"][0].get<int64_t>();
          const auto jcols = a[what]["shape"][1].get<int64_t>();
          // Keys (k, v of cross-attention; the self-attention's columns) may be fewer in explain.
          REQUIRE(jrows <= rows);
          REQUIRE(jcols <= cols);
          double dv = 0, dg = 0, after = 0;
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t c = 0; c < cols; ++c) {
              const auto at = static_cast<size_t>((head * rows + r) * cols + c);
              if (r < jrows && c < jcols) {
                const auto jat = static_cast<size_t>(r * jcols + c);
                dv = std::max(dv, std::abs(value[at] - jv[jat]));
                dg = std::max(dg, std::abs(grad[at] - jg[jat]));
              } else if (r >= jrows) {  // (the masked weights' gradients are v_j . dL/dc_i)
                after = std::max(after, std::abs(grad[at]));
              }
            }
          CHECK(dv < 1e-12);
          CHECK(dg < 1e-12);
          CHECK(after == 0);
        }
      }
    }
    // Across the sentence: the steps' gradients at the encoder's output add up to one backward
    // pass of L = sum_t L_t, here the training loss over the whole sentence (a mean) times T.
    const json& across = all["across"];
    INFO("across" << norm);
    CHECK(across["sum_difference"].get<double>() < 1e-12);
    REQUIRE(across["losses"].size() == all["steps"].size());
    for (size_t t = 0; t < across["losses"].size(); ++t) {
      CHECK(across["losses"][t].get<double>() == all["steps"][t]["loss"].get<double>());
      double sum = 0;
      for (const auto& w : across["weights"][t]) sum += w.get<double>();
      CHECK(std::abs(sum - 1) < 1e-12);  // the heads' mean of distributions
    }
    const json& j = all["steps"][0];
    models::Seq2SeqConfig config = models::Seq2SeqConfig::from_json(j["config"].dump());
    models::Seq2Seq model(config, DType::f64);
    model.eval();
    const models::Batch batch = sentence_batch(j);
    Tape tape;
    tape.set_keep_grads(true);
    Rng rng(0);
    models::TransformerModel& tf = model.transformer();
    const auto memory = tf.encode(tape, batch, rng);
    const Var h = tf.decode(tape, memory, batch, rng);
    const Var z = tf.logits(tape, ops::reshape(h, {batch.tgt_len, config.d_model}));
    tape.backward(ops::scale(ops::cross_entropy(z, batch.tgt_out, models::Vocab::kPad),
                             static_cast<double>(batch.tgt_len)));
    const std::vector<double> g = tape.grad(memory.states).to_vector();
    REQUIRE(across["total_norms"].size() == static_cast<size_t>(batch.src_len));
    for (int64_t s = 0; s < batch.src_len; ++s) {
      double n2 = 0;
      for (int64_t k = 0; k < config.d_model; ++k)
        n2 += g[static_cast<size_t>(s * config.d_model + k)] *
              g[static_cast<size_t>(s * config.d_model + k)];
      CHECK(std::abs(std::sqrt(n2) - across["total_norms"][static_cast<size_t>(s)].get<double>()) <
            1e-12);
    }
  }
}

TEST_CASE("explain: a saved float32 transformer is explained in float64, and --arch is checked",
          "[explain][explain_transformer]") {
  ExplainDir dir("explain_tf");
  models::Seq2SeqConfig c;
  c.arch = models::Arch::transformer;
  models::Vocab src, tgt;
  for (const char* w : {"the", "black", "cat", "dog"}) src.add(w);
  for (const char* w : {"le", "chat", "noir", "chien"}) tgt.add(w);
  c.src_vocab = src.size();
  c.tgt_vocab = tgt.size();
  c.d_model = 16;
  c.heads = 4;
  c.ffn = 32;
  c.enc_layers = 2;
  c.dec_layers = 2;
  models::Seq2Seq model(c);  // float32, as training saves it
  const std::string path = dir.file("model.safetensors");
  models::save_model(path, model, src, tgt, models::Preprocess{});

  json j = explain_json(
      dir, fmt::format("--model '{}' --source 'the grey cat' --target 'le chat' --step 1", path));
  CHECK(j["source"] == json({"the", "<unk>", "cat"}));
  CHECK(j["heads"].size() == 2 * 2 * 4);
  // The 8 elements of largest gradient of each head tensor, all passing.
  // Per head, self-attention at t = 1: q, k, v, context (2,4), scores and weights (2,2); cross:
  // q, context (2,4), k and v (3,4) (8 of 12), scores and weights (2,3).
  CHECK(j["check"].size() == 2 * 4 * ((4 * 8 + 2 * 4) + (4 * 8 + 2 * 6)));
  for (const auto& ch : j["check"]) CHECK(ch["pass"].get<bool>());
  Run text =
      explain(fmt::format("--model '{}' --source 'the cat' --arch transformer --step all "
                          "--quiet-tables",
                          path));
  INFO(text.output);
  CHECK(text.status == 0);
  CHECK_THAT(text.output, Catch::Contains("The finite-difference check agrees on all"));

  Run wrong = explain(fmt::format("--model '{}' --source 'the cat' --arch rnn", path));
  CHECK(wrong.status == 2);
  CHECK_THAT(wrong.output,
             Catch::Contains("--arch rnn, but the model") && Catch::Contains("is a transformer"));
  // The target's words and the step are checked as for an RNN, with the same lines.
  Run word = explain(fmt::format("--model '{}' --source 'the cat' --target 'le chats'", path));
  CHECK(word.status == 2);
  CHECK_THAT(word.output, Catch::Contains("'chats' is not in the target vocabulary") &&
                              Catch::Contains("le chat noir chien"));
  Run step = explain(fmt::format("--model '{}' --source 'the cat' --target le --step 2", path));
  CHECK(step.status == 2);
  CHECK_THAT(step.output, Catch::Contains("step 2 is outside the sentence: its 1 target words "
                                          "make steps 0 to 1"));
  Run tiny_flag = explain("--arch transformer --hidden 8");
  CHECK(tiny_flag.status == 2);
  CHECK_THAT(tiny_flag.output, Catch::Contains("--hidden describes the tiny RNN model"));
  Run dot = explain("--arch transformer --format dot");
  CHECK(dot.status == 2);
}

TEST_CASE("explain --arch transformer --format html: a page that loads without console errors",
          "[explain][explain_transformer]") {
  ExplainDir dir("explain_tf");
  const std::string out = dir.file("explain.html");
  Run r = explain(fmt::format("--arch transformer --step all --format html --out '{}'", out));
  INFO(r.output);
  REQUIRE(r.status == 0);
  const std::string page = slurp(out);
  CHECK(page.find("<section class=\"step\"") != std::string::npos);
  CHECK(page.find("Decoder layer 2: cross-attention over the source") != std::string::npos);
  tapestry::testing::check_self_contained(page);
  if (tapestry::testing::have_chromium()) {
    const auto b = tapestry::testing::load_in_chromium(out);
    CHECK(b.console.empty());
    CHECK(b.dom.find("data-current=\"0\"") != std::string::npos);
  }
}
