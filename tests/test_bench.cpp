// tapestry bench: the references' synthetic data rules, FLOP formulas and parameter counts (the RNN
// and the Transformer), and short runs of the command whose RESULT line carries every key the
// comparison script reads.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "shell_run.h"
#include "tapestry/core/packed.h"
#include "tapestry/models/seq2seq.h"
#include "tools/bench_data.h"
#include "torch_run.h"

using namespace tapestry;
using namespace tapestry::cli;
using models::Batch;
using models::Vocab;

namespace {

BenchShape custom_shape() {
  BenchShape s;
  s.vocab = 10, s.emb = 4, s.hidden = 5, s.attn = 6, s.batch = 64, s.src_len = 7, s.tgt_len = 5;
  return s;
}

// Checks one batch against the reference's make_batches rules; lo_s/lo_t are the shortest rows,
// computed by hand by the caller.
void check_batch(const Batch& b, const BenchShape& s, int64_t lo_s, int64_t lo_t) {
  REQUIRE(b.size == s.batch);
  REQUIRE(b.src_len == s.src_len);  // padded to the full S and T, as the reference's tensors
  REQUIRE(b.tgt_len == s.tgt_len);
  REQUIRE(b.src.size() == static_cast<size_t>(s.batch * s.src_len));
  REQUIRE(b.tgt_in.size() == static_cast<size_t>(s.batch * s.tgt_len));
  REQUIRE(b.tgt_out.size() == static_cast<size_t>(s.batch * s.tgt_len));
  REQUIRE(b.src_lengths.size() == static_cast<size_t>(s.batch));
  REQUIRE(b.tgt_lengths.size() == static_cast<size_t>(s.batch));
  int64_t tokens = 0;
  for (int64_t r = 0; r < s.batch; ++r) {
    const int64_t ns = b.src_lengths[r], nt = b.tgt_lengths[r];
    CHECK(ns >= lo_s);
    CHECK(ns <= s.src_len);
    CHECK(nt >= lo_t);
    CHECK(nt <= s.tgt_len);
    tokens += nt;
    for (int64_t j = 0; j < s.src_len; ++j) {
      const int32_t id = b.src[r * s.src_len + j];
      if (j < ns) {
        CHECK(id >= 3);
        CHECK(id < s.vocab);
      } else {
        CHECK(id == Vocab::kPad);
      }
    }
    for (int64_t t = 0; t < s.tgt_len; ++t) {
      const int32_t out = b.tgt_out[r * s.tgt_len + t], in = b.tgt_in[r * s.tgt_len + t];
      if (t < nt - 1) {  // a random body token
        CHECK(out >= 3);
        CHECK(out < s.vocab);
      } else if (t == nt - 1) {
        CHECK(out == Vocab::kEos);
      } else {
        CHECK(out == Vocab::kPad);
      }
      if (t == 0)
        CHECK(in == Vocab::kBos);
      else if (t < nt)
        CHECK(in == b.tgt_out[r * s.tgt_len + t - 1]);
      else
        CHECK(in == Vocab::kPad);
    }
  }
  CHECK(b.target_tokens() == tokens);
}

bool same(const Batch& a, const Batch& b) {
  return a.src == b.src && a.tgt_in == b.tgt_in && a.tgt_out == b.tgt_out &&
         a.src_lengths == b.src_lengths && a.tgt_lengths == b.tgt_lengths;
}

// The reference's parameter count from its layer shapes (torch_seq2seq.py, BahdanauSeq2Seq):
// src_emb and tgt_emb V*E each; nn.GRU 3H(E+H) + 6H per direction; bridge Linear(D,H) D*H + H;
// W_h Linear(D,A, no bias) D*A; W_s Linear(H,A) H*A + A; v Linear(A,1, no bias) A;
// GRUCell(E+D, H) 3H(E+D) + 3H*H + 6H; out Linear(H,V) H*V + V.
int64_t reference_params(int64_t V, int64_t E, int64_t H, int64_t A, int64_t d) {
  const int64_t D = d * H;
  return 2 * V * E + d * (3 * H * (E + H) + 6 * H) + (D * H + H) + D * A + (H * A + A) + A +
         (3 * H * (E + D) + 3 * H * H + 6 * H) + (H * V + V);
}

using Run = testing::CommandResult;

// Loads the reference's own model class from torch_seq2seq.py, gives it our weights (float64)
// and prints its loss and every parameter's gradient on our batch.
const char* kReferenceLoss = R"PY(
import importlib.util, json, sys, torch
spec = json.load(open(sys.argv[1]))
sys.argv = ["torch_seq2seq.py"]  # the module parses its arguments on import
loader = importlib.util.spec_from_file_location("reference", spec["reference"])
ref = importlib.util.module_from_spec(loader)
loader.loader.exec_module(ref)
m = ref.BahdanauSeq2Seq(spec["V"], spec["E"], spec["H"], spec["A"], spec["bidir"]).double()
m.load_state_dict({k: torch.tensor(v, dtype=torch.float64).reshape(spec["shapes"][k])
                   for k, v in spec["weights"].items()}, strict=True)
B, S, T = spec["B"], spec["S"], spec["T"]
loss = m(torch.tensor(spec["src"]).reshape(B, S), torch.tensor(spec["src_len"]),
         torch.tensor(spec["tgt_in"]).reshape(B, T), torch.tensor(spec["tgt_out"]).reshape(B, T))
loss.backward()
print(json.dumps({"loss": loss.item(),
                  "grads": {k: p.grad.flatten().tolist() for k, p in m.named_parameters()}}))
)PY";

// Our parameter names -> the reference's (BahdanauSeq2Seq's attributes).
std::string reference_name(const std::string& ours) {
  static const std::map<std::string, std::string> fixed = {
      {"encoder.embedding.weight", "src_emb.weight"},
      {"decoder.embedding.weight", "tgt_emb.weight"},
      {"decoder.bridge.weight", "bridge.weight"},
      {"decoder.bridge.bias", "bridge.bias"},
      {"decoder.attention.W", "W_s.weight"},
      {"decoder.attention.b", "W_s.bias"},
      {"decoder.attention.U", "W_h.weight"},
      {"decoder.attention.v", "v.weight"},
      {"decoder.out.weight", "out.weight"},
      {"decoder.out.bias", "out.bias"}};
  if (auto it = fixed.find(ours); it != fixed.end()) return it->second;
  if (ours.rfind("encoder.rnn.", 0) == 0) return "encoder." + ours.substr(12);
  if (ours.rfind("decoder.cells.0.", 0) == 0) return "cell." + ours.substr(16);
  return "unmapped:" + ours;
}

Run run_bench(const std::string& args) {
  return testing::run_command(
      fmt::format("'{}/tapestry' bench {} 2>&1", TAPESTRY_BINARY_DIR, args));
}

}  // namespace

TEST_CASE("the presets are the reference's", "[bench]") {
  // torch_seq2seq.py PRESETS (attn_dim defaults to hid)
  BenchShape t = bench_preset("tiny");
  CHECK(t.vocab == 32);
  CHECK(t.emb == 32);
  CHECK(t.hidden == 64);
  CHECK(t.attn == 64);
  CHECK(t.batch == 1);
  CHECK(t.src_len == 10);
  CHECK(t.tgt_len == 10);
  CHECK(t.warmup == 20);
  CHECK(t.iters == 200);
  CHECK(t.decode_iters == 200);
  BenchShape m = bench_preset("medium");
  CHECK(m.vocab == 8000);
  CHECK(m.hidden == 512);
  CHECK(m.batch == 64);
  CHECK(m.src_len == 20);
  CHECK(m.warmup == 2);
  CHECK(m.iters == 8);
  CHECK_THROWS_AS(bench_preset("huge"), ValueError);
  CHECK_THROWS_WITH(bench_preset("huge"), Catch::Matchers::Contains("tiny, small, medium"));
}

TEST_CASE("synthetic batches follow the reference's rules", "[bench]") {
  SECTION("tiny: lengths 7..10 (ceil(0.7*10) = 7)") {
    BenchShape s = bench_preset("tiny");
    Rng rng(0);
    auto pool = make_bench_batches(s, rng);
    REQUIRE(pool.size() == 8);
    for (const auto& b : pool) check_batch(b, s, 7, 7);
  }
  SECTION("small: lengths 11..15 (ceil(0.7*15) = ceil(10.5) = 11)") {
    BenchShape s = bench_preset("small");
    Rng rng(5);
    auto pool = make_bench_batches(s, rng);
    REQUIRE(pool.size() == 8);
    for (const auto& b : pool) check_batch(b, s, 11, 11);
  }
  SECTION("every allowed length and token occurs; T = 2 keeps the target floor of 2") {
    BenchShape s = custom_shape();  // S = 7 -> [5, 7]; T = 5 -> [4, 5]
    Rng rng(3);
    auto pool = make_bench_batches(s, rng);
    std::set<int64_t> src_lens, tgt_lens;
    std::set<int32_t> tokens;
    for (const auto& b : pool) {
      check_batch(b, s, 5, 4);
      src_lens.insert(b.src_lengths.begin(), b.src_lengths.end());
      tgt_lens.insert(b.tgt_lengths.begin(), b.tgt_lengths.end());
      for (int32_t id : b.src) tokens.insert(id);
    }
    // 512 rows: a missing value would mean a range off by one
    CHECK(src_lens == std::set<int64_t>{5, 6, 7});
    CHECK(tgt_lens == std::set<int64_t>{4, 5});
    CHECK(tokens == std::set<int32_t>{0, 3, 4, 5, 6, 7, 8, 9});

    s.tgt_len = 2;  // max(2, ceil(1.4)) = 2: every target is one token and <eos>
    s.min_len_frac = 0.0;
    s.src_len = 1;  // max(1, ceil(0)) = 1
    Rng rng2(4);
    for (const auto& b : make_bench_batches(s, rng2)) check_batch(b, s, 1, 2);
  }
  SECTION("the same seed gives the same pool, another seed another") {
    BenchShape s = bench_preset("small");
    Rng a(11), b(11), c(12);
    auto pa = make_bench_batches(s, a), pb = make_bench_batches(s, b),
         pc = make_bench_batches(s, c);
    for (size_t k = 0; k < pa.size(); ++k) {
      CHECK(same(pa[k], pb[k]));
      CHECK_FALSE(same(pa[k], pc[k]));
    }
    CHECK_FALSE(same(pa[0], pa[1]));  // the pool's batches differ from each other
  }
  SECTION("sizes the rules cannot fill are refused") {
    BenchShape s = custom_shape();
    s.vocab = 3;  // no token id left above the specials
    Rng rng(1);
    CHECK_THROWS_AS(make_bench_batches(s, rng), ValueError);
    s = custom_shape();
    s.tgt_len = 1;
    CHECK_THROWS_WITH(make_bench_batches(s, rng), Catch::Matchers::Contains("T=1"));
  }
}

TEST_CASE("the GEMM FLOP count is the reference's formula", "[bench]") {
  BenchShape s;
  s.emb = 2, s.hidden = 3, s.attn = 4, s.vocab = 5, s.batch = 2, s.src_len = 3, s.tgt_len = 2;
  SECTION("one direction, by hand") {
    // encoder 5 tokens * 1 * 6*3*(2+3) = 450; bridge 2*2*3*3 = 36; keys 2*3*2*3*4 = 144;
    // per position 2*3*4 + 2*3*4 + 2*3*3 + 6*3*(2+3+3) + 2*3*5 = 24+24+18+144+30 = 240, times
    // B*T = 4 -> 960; forward 1590, training 3 * 1590 = 4770
    GemmFlops f = train_gemm_flops(s, 5);
    CHECK(f.forward == 1590);
    CHECK(f.training == 4770);
  }
  SECTION("two directions, by hand") {
    // D = 6: encoder 5*2*6*3*5 = 900; bridge 2*2*6*3 = 72; keys 2*3*2*6*4 = 288;
    // per position 24 + 24 + 2*3*6 + 6*3*(2+6+3) + 30 = 24+24+36+198+30 = 312, times 4 -> 1248;
    // forward 2508, training 7524
    s.bidir = true;
    GemmFlops f = train_gemm_flops(s, 5);
    CHECK(f.forward == 2508);
    CHECK(f.training == 7524);
  }
  SECTION("medium agrees with the reference README's 58.55 GFLOP per step") {
    // The README's figure used its pool's real source tokens; the expected count is 64 rows of
    // mean length (14+20)/2 = 17, and each token more or less moves the total by 7.1 MFLOP.
    GemmFlops f = train_gemm_flops(bench_preset("medium"), 64 * 17);
    CHECK(f.training * 1e-9 == Approx(58.55).margin(0.03));
  }
}

TEST_CASE("the Transformer's computed work drops the padded positions' rows, by hand", "[bench]") {
  BenchShape s;
  s.arch = models::Arch::transformer;
  s.batch = 2, s.src_len = 3, s.tgt_len = 2, s.d_model = 2, s.ffn = 3, s.enc_layers = 1,
  s.dec_layers = 1, s.src_vocab = s.tgt_vocab = 5;
  // By hand: the encoder 2*6*(4d^2 + 2df) + 4BS^2 d = 336 + 144; the decoder 2*4*(6d^2 + 2df) +
  // 4*6*d^2 + 4BT^2 d + 4BTSd = 288 + 96 + 64 + 96; the output layer 2*4*dV = 80; times 3.
  const double reference = 3 * (336 + 144 + 288 + 96 + 64 + 96 + 80);
  CHECK(train_gemm_flops(s, 6).training == reference);
  CHECK(transformer_train_flops(s, 6, 4).training == reference);
  // One source and one target position fewer: per source position the encoder's 2(4d^2 + 2df) =
  // 2(16 + 12) = 56 and the decoder's memory keys and values 4d^2 = 16; per target position the
  // decoder's 2(6d^2 + 2df) = 2(24 + 12) = 72 and the output layer's 2dV = 20; times 3.
  CHECK(transformer_train_flops(s, 5, 3).training == reference - 3 * (56 + 16 + 72 + 20));
}

TEST_CASE("the bench model has the reference's parameter count", "[bench]") {
  // Expected values from the reference's layer shapes (reference_params); torch_seq2seq.py itself
  // prints params=66528, 105824, 504680, 661096 for tiny, tiny --bidir, small, small --bidir.
  struct Case {
    const char* preset;
    bool bidir;
    int64_t printed_by_reference;
  };
  for (const Case& c : {Case{"tiny", false, 66528}, Case{"tiny", true, 105824},
                        Case{"small", false, 504680}, Case{"small", true, 661096}}) {
    DYNAMIC_SECTION(c.preset << (c.bidir ? " bidirectional" : " unidirectional")) {
      BenchShape s = bench_preset(c.preset);
      s.bidir = c.bidir;
      const int64_t expected = reference_params(s.vocab, s.emb, s.hidden, s.attn, c.bidir ? 2 : 1);
      CHECK(expected == c.printed_by_reference);
      models::Seq2Seq model(bench_model_config(s, 0));
      CHECK(model.num_parameters() == expected);
    }
  }
}

TEST_CASE("tapestry bench prints a RESULT line with the reference's keys", "[bench]") {
  Run r = run_bench("--config tiny --iters 3 --warmup 1 --decode-iters 3 --threads 1");
  INFO(r.output);
  REQUIRE(r.status == 0);
  const auto at = r.output.rfind("RESULT ");
  REQUIRE(at != std::string::npos);
  const auto end = r.output.find('\n', at);
  nlohmann::json res = nlohmann::json::parse(r.output.substr(at + 7, end - at - 7));
  for (const char* key : {"train_tok_s", "train_ms_median", "decode_sent_s", "gemm_gflop_per_step",
                          "train_gflops", "peak_rss_mb", "params", "blas_threads",
                          "greedy_decode_sent_s", "greedy_decode_steps_mean"}) {
    INFO(key);
    REQUIRE(res.contains(key));
    REQUIRE(res[key].is_number());
    CHECK(res[key].get<double>() > 0);
  }
  CHECK(res["params"] == 66528);
  CHECK(res["config"] == "tiny");
  CHECK(res["blas_threads"] == 1);
  // The RNN decodes through the raw path (models/rnn_inference.h) on a CPU with the packed
  // kernel, through the ops when asked.
  CHECK(res["decode_path"] == (packed_kernel_available() ? "raw" : "ops"));
  Run ops = run_bench(
      "--config tiny --iters 1 --warmup 1 --decode-iters 2 --threads 1 --decode-through-ops");
  REQUIRE(ops.status == 0);
  CHECK(ops.output.find("\"decode_path\":\"ops\"") != std::string::npos);
  // The keys' meanings: B*T = 10 decoder positions per step, B = 1 sentence per decoding.
  const double ms = res["train_ms_median"].get<double>();
  CHECK(res["train_tok_s"].get<double>() == Approx(10 / (ms * 1e-3)));
  CHECK(res["train_gflops"].get<double>() ==
        Approx(res["gemm_gflop_per_step"].get<double>() / (ms * 1e-3)));
  CHECK(res["decode_sent_s"].get<double>() ==
        Approx(1 / (res["decode_ms_median"].get<double>() * 1e-3)));
  CHECK(res["greedy_decode_steps_max"].get<double>() <= 10);
  // tiny: at least 7 source tokens, so at least 7*6*64*(32+64)*3 FLOP plus the rest
  CHECK(res["gemm_gflop_per_step"].get<double>() > 7 * 6 * 64 * 96 * 3 * 1e-9);
}

TEST_CASE("tapestry bench refuses bad flags", "[bench]") {
  Run r = run_bench("--config huge");
  CHECK(r.status == 2);
  CHECK_THAT(r.output, Catch::Matchers::Contains("tiny|small|medium") ||
                           Catch::Matchers::Contains("tiny, small, medium"));
  r = run_bench("--config tiny --iters 0");
  CHECK(r.status == 2);
  CHECK_THAT(r.output, Catch::Matchers::Contains("--iters"));
  r = run_bench("--itres 3");
  CHECK(r.status == 2);
  CHECK_THAT(r.output, Catch::Matchers::Contains("did you mean --iters"));
}

TEST_CASE("the Transformer presets, model and FLOP count are torch_transformer.py's", "[bench]") {
  BenchShape t = bench_preset("tiny", models::Arch::transformer);
  CHECK(t.arch == models::Arch::transformer);
  CHECK(t.source_vocab() == 32);
  CHECK(t.target_vocab() == 32);
  CHECK(t.d_model == 64);
  CHECK(t.enc_layers == 2);
  CHECK(t.dec_layers == 2);
  CHECK(t.heads == 4);
  CHECK(t.ffn == 128);
  CHECK(t.batch == 1);
  CHECK(t.src_len == 10);
  CHECK(t.warmup == 20);
  CHECK(t.iters == 200);
  CHECK(t.dropout == 0.1);
  BenchShape m = bench_preset("medium", models::Arch::transformer);
  CHECK(m.d_model == 256);
  CHECK(m.enc_layers == 3);
  CHECK(m.heads == 8);
  CHECK(m.ffn == 512);
  CHECK(m.batch == 64);
  CHECK(m.tgt_len == 20);
  CHECK(m.decode_iters == 8);
  // Its README's parameter counts, and the model's own.
  struct Case {
    const char* preset;
    int64_t params;
  };
  for (const Case& c : {Case{"tiny", 173856}, Case{"small", 1048040}, Case{"medium", 10106688}}) {
    INFO(c.preset);
    const models::Seq2SeqConfig config =
        bench_model_config(bench_preset(c.preset, models::Arch::transformer), 0);
    CHECK(config.transformer());
    CHECK(config.norm == nn::NormPlace::post);
    CHECK(config.activation == nn::Activation::relu);
    CHECK(config.positions == models::Positions::sinusoidal);
    CHECK_FALSE(config.share_embeddings);
    CHECK(config.parameter_count() == c.params);
  }
  models::Seq2Seq tiny(bench_model_config(t, 0));
  CHECK(tiny.num_parameters() == 173856);
  // README: "A `medium` step is 46.64 GFLOP"; the rest by hand from its formula at d = 2, f = 3,
  // B = 1, S = 2, T = 1, V = 5, one layer each: encoder 2*2*(16 + 12) + 4*4*2 = 144, decoder
  // 2*(24 + 12) + 2*2*2*4 + 4*2 + 4*2*2 = 72 + 32 + 8 + 16 = 128, output 2*2*5 = 20.
  CHECK(transformer_train_gemm_flops(m).training * 1e-9 == Approx(46.64).margin(0.005));
  BenchShape h;
  h.arch = models::Arch::transformer;
  h.vocab = 5, h.d_model = 2, h.ffn = 3, h.batch = 1, h.src_len = 2, h.tgt_len = 1;
  h.enc_layers = h.dec_layers = 1;
  CHECK(train_gemm_flops(h, 0).forward == 144 + 128 + 20);
  CHECK(train_gemm_flops(h, 0).training == 3 * (144 + 128 + 20));
  // Decoding, README: 83.7 GFLOP for a `medium` batch; with T = 1 the encoder, one decoder step
  // and the output layer of that position: the training forward.
  CHECK(transformer_decode_gemm_flops(m) * 1e-9 == Approx(83.7).margin(0.05));
  CHECK(transformer_decode_gemm_flops(h) == 144 + 128 + 20);
  // Different vocabularies: the batches draw each side's tokens from its own.
  h.src_vocab = 6, h.tgt_vocab = 40, h.batch = 64, h.src_len = 5, h.tgt_len = 5;
  Rng rng(1);
  std::set<int32_t> src, tgt;
  for (const Batch& b : make_bench_batches(h, rng)) {
    src.insert(b.src.begin(), b.src.end());
    tgt.insert(b.tgt_out.begin(), b.tgt_out.end());
  }
  CHECK(src == std::set<int32_t>{0, 3, 4, 5});
  CHECK(*tgt.rbegin() == 39);
}

TEST_CASE("tapestry bench --arch transformer prints the reference's RESULT keys", "[bench]") {
  Run r = run_bench(
      "--arch transformer --config tiny --iters 3 --warmup 2 --decode-iters 3 --threads 1");
  INFO(r.output);
  REQUIRE(r.status == 0);
  const auto at = r.output.rfind("RESULT ");
  REQUIRE(at != std::string::npos);
  const auto end = r.output.find('\n', at);
  nlohmann::json res = nlohmann::json::parse(r.output.substr(at + 7, end - at - 7));
  // torch_transformer.py's keys (the phase medians only with --phases, as for the RNN).
  for (const char* key : {"train_ms_median",
                          "train_ms_min",
                          "train_ms_p90",
                          "train_tok_s",
                          "train_real_tok_s",
                          "loss_first",
                          "loss_last",
                          "gemm_gflop_per_step",
                          "train_gflops",
                          "decode_ms_median",
                          "decode_ms_min",
                          "decode_sent_s",
                          "decode_tok_s",
                          "decode_gemm_gflop",
                          "decode_gflops",
                          "peak_rss_mb",
                          "params",
                          "src_vocab",
                          "tgt_vocab",
                          "d_model",
                          "enc_layers",
                          "dec_layers",
                          "heads",
                          "ffn",
                          "batch",
                          "src_len",
                          "tgt_len",
                          "threads",
                          "blas_threads"}) {
    INFO(key);
    REQUIRE(res.contains(key));
    REQUIRE(res[key].is_number());
    CHECK(res[key].get<double>() > 0);
  }
  CHECK(res["model"] == "transformer");
  CHECK(res["config"] == "tiny");
  CHECK(res["params"] == 173856);
  CHECK(res["d_model"] == 64);
  CHECK(res["dropout"].get<double>() == 0.1);
  CHECK(res["tgt_len"] == 10);
  // The heap is counted in the program (its operator new), the pool's new blocks always; under
  // AddressSanitizer the program keeps ASan's allocator and the key is left out (not counted).
#if defined(__SANITIZE_ADDRESS__)
  CHECK(!res.contains("train_heap_allocs_per_step"));
#else
  REQUIRE(res.contains("train_heap_allocs_per_step"));
  CHECK(res["train_heap_allocs_per_step"].get<double>() >= 0);
#endif
  CHECK(res["train_new_blocks_per_step"].get<double>() >= 0);
  const double ms = res["train_ms_median"].get<double>();
  CHECK(res["train_tok_s"].get<double>() == Approx(10 / (ms * 1e-3)));
  CHECK(res["decode_sent_s"].get<double>() ==
        Approx(1 / (res["decode_ms_median"].get<double>() * 1e-3)));
  CHECK(res["decode_gflops"].get<double>() ==
        Approx(res["decode_gemm_gflop"].get<double>() /
               (res["decode_ms_median"].get<double>() * 1e-3)));
  // The work computed skips the padding's rows: never more than the reference's padded count.
  const double computed = res["computed_gflop_per_step"].get<double>();
  CHECK(computed > 0);
  CHECK(computed <= res["gemm_gflop_per_step"].get<double>() * (1 + 1e-12));
  CHECK(res["computed_gflops"].get<double>() == Approx(computed / (ms * 1e-3)));
  CHECK_THAT(r.output, Catch::Matchers::Contains("layers=2+2 heads=4 ffn=128"));
  // The flags override the preset, as the reference's do.
  r = run_bench(
      "--arch transformer --config tiny --src-vocab 9 --tgt-vocab 11 --d-model 8 --heads 2 "
      "--ffn 6 --enc-layers 1 --dec-layers 2 --dropout 0 --batch 2 --src-len 4 --tgt-len 3 "
      "--iters 1 --warmup 0 --decode-iters 1 --threads 1");
  INFO(r.output);
  REQUIRE(r.status == 0);
  const auto at2 = r.output.rfind("RESULT ");
  REQUIRE(at2 != std::string::npos);
  res = nlohmann::json::parse(r.output.substr(at2 + 7, r.output.find('\n', at2) - at2 - 7));
  BenchShape s;
  s.arch = models::Arch::transformer;
  s.src_vocab = 9, s.tgt_vocab = 11, s.d_model = 8, s.heads = 2, s.ffn = 6, s.enc_layers = 1;
  s.dec_layers = 2;
  CHECK(res["params"] == bench_model_config(s, 0).parameter_count());
  CHECK(res["dropout"].get<double>() == 0);
  CHECK(res["src_vocab"] == 9);
  CHECK(res["tgt_vocab"] == 11);
}

TEST_CASE("tapestry bench --arch transformer refuses bad flags in one line", "[bench]") {
  struct Case {
    const char* args;
    const char* says;
  };
  for (const Case& c : {
           Case{"--arch transformer --emb 32",
                "--emb applies to --arch rnn, not --arch transformer"},
           Case{"--arch transformer --bidir", "--bidir applies to --arch rnn"},
           Case{"--d-model 64", "--d-model applies to --arch transformer, not --arch rnn"},
           Case{"--dropout 0.1", "--dropout applies to --arch transformer"},
           Case{"--arch transformer --d-model 30 --heads 4", "multiple of --heads 4"},
           Case{"--arch transformer --d-model 63 --heads 1", "--d-model 63 must be even"},
           Case{"--arch transformer --heads 0", "--heads must be at least 1"},
           Case{"--arch transformer --tgt-vocab 3", "--tgt-vocab must be at least 4"},
           Case{"--arch transformer --enc-layers 9", "--enc-layers"},
           Case{"--arch transformer --dropout 1", "--dropout"},
           Case{"--arch lstm", "transformer"},
       }) {
    INFO(c.args);
    Run r = run_bench(c.args);
    INFO(r.output);
    CHECK(r.status == 2);
    CHECK_THAT(r.output, Catch::Matchers::Contains(c.says));
    CHECK(std::count(r.output.begin(), r.output.end(), '\n') == 1);
    CHECK_THAT(r.output, Catch::Matchers::StartsWith("tapestry bench: "));
  }
}

TEST_CASE("the bench model computes the reference's loss and gradients", "[bench][torch]") {
  namespace fs = std::filesystem;
  const fs::path reference =
      fs::path(TAPESTRY_SOURCE_DIR) / ".." / "shared" / "bench" / "torch_seq2seq.py";
  if (!fs::exists(reference) || !testing::torch_available()) {
    WARN("the reference or python3 with torch not found: loss parity with it not checked");
    return;
  }
  const fs::path dir = fs::temp_directory_path() / ("tapestry_bench_" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "ref.py") << kReferenceLoss;
  for (bool bidir : {false, true}) {
    DYNAMIC_SECTION((bidir ? "bidirectional" : "unidirectional")) {
      // Sizes all different, so a transposed or swapped weight cannot fit by accident; B = 4 rows
      // of different lengths exercise the packing and the masks.
      BenchShape s;
      s.vocab = 11, s.emb = 3, s.hidden = 4, s.attn = 5, s.batch = 4, s.src_len = 6, s.tgt_len = 7;
      s.bidir = bidir;
      Rng rng(2);
      const Batch batch = make_bench_batches(s, rng)[0];
      models::Seq2Seq model(bench_model_config(s, 9), DType::f64);

      nlohmann::json spec;
      spec["reference"] = reference.string();
      spec["V"] = s.vocab, spec["E"] = s.emb, spec["H"] = s.hidden, spec["A"] = s.attn;
      spec["bidir"] = bidir;
      spec["B"] = s.batch, spec["S"] = s.src_len, spec["T"] = s.tgt_len;
      spec["src"] = batch.src;
      spec["src_len"] = batch.src_lengths;
      spec["tgt_in"] = batch.tgt_in;
      spec["tgt_out"] = batch.tgt_out;
      for (auto& [name, p] : model.named_parameters()) {
        const std::string ref = reference_name(name);
        std::vector<int64_t> shape(p->shape().dims().begin(), p->shape().dims().end());
        if (ref == "v.weight") shape = {1, s.attn};  // nn.Linear(A, 1): a (1,A) matrix
        spec["weights"][ref] = p->value.to_vector();
        spec["shapes"][ref] = shape;
      }
      std::ofstream(dir / "spec.json") << spec.dump();
      const std::string out = testing::run_command("/usr/bin/python3 " + (dir / "ref.py").string() +
                                                   " " + (dir / "spec.json").string() + " 2>&1")
                                  .output;
      INFO(out);
      nlohmann::json got = nlohmann::json::parse(out);

      Tape tape;
      Var loss = model.loss(tape, batch);
      tape.backward(loss);
      CHECK(loss.value().item() == Approx(got["loss"].get<double>()).epsilon(1e-12));
      for (auto& [name, p] : model.named_parameters()) {
        INFO(name);
        auto want = got["grads"][reference_name(name)].get<std::vector<double>>();
        REQUIRE(want.size() == static_cast<size_t>(p->grad.numel()));
        for (size_t i = 0; i < want.size(); ++i)
          REQUIRE(p->grad.at(static_cast<int64_t>(i)) == Approx(want[i]).margin(1e-12));
      }
    }
  }
  fs::remove_all(dir);
}
