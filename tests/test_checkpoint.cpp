// Checkpoints: safetensors layout (checked by an independent parser, the reference's own bytes and
// Python), bit-exact round trips, atomic writes, loading into a module that does not fit, and
// corrupted files (each kind of malformed file: test_safetensors_malformed.cpp).
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "safetensors_files.h"
#include "shell_run.h"
#include "tapestry/core/random.h"
#include "tapestry/nn/checkpoint.h"
#include "tapestry/nn/linear.h"
#include "tapestry/nn/optim.h"
#include "tapestry/nn/rnn.h"

using namespace tapestry;
using namespace tapestry::nn;
using namespace std::string_literals;
using namespace tapestry::test;
using Catch::Contains;

namespace {

std::string bytes_of(const Tensor& t) {
  return dispatch(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    return std::string(reinterpret_cast<const char*>(t.data<T>()), t.numel() * sizeof(T));
  });
}

std::vector<std::string> snapshot(Module& m) {
  std::vector<std::string> out;
  for (auto& [name, p] : m.named_parameters()) out.push_back(bytes_of(p->value));
  return out;
}

// A small sequence model: encoder.rnn (GRU, 2 layers, bidirectional), proj (Linear) and a scalar.
class Encoder : public Module {
 public:
  Encoder(Rng& rng, DType dt) : rnn(CellKind::gru, 3, 4, 2, true, rng, dt) {
    add_module("rnn", rnn);
  }
  RNN rnn;
};

class TinySeq : public Module {
 public:
  TinySeq(Rng& rng, DType dt) : encoder(rng, dt), proj(8, 5, true, rng, dt) {
    add_parameter("temperature", Tensor::scalar(rng.uniform(0.5, 2.0), dt));
    add_module("encoder", encoder);
    add_module("proj", proj);
  }
  Encoder encoder;
  Linear proj;
};

// The smallest module with a given parameter set, for mismatch tests.
class Params : public Module {
 public:
  explicit Params(const NamedTensors& ps) {
    for (const auto& [name, t] : ps) add_parameter(name, t);
  }
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// Layout.

TEST_CASE("checkpoint: bytes equal the reference implementation's own test vectors",
          "[checkpoint]") {
  // Expected bytes copied from huggingface/safetensors safetensors/src/tensor.rs, tests
  // test_serialization and test_empty (serialize() of the same tensors and metadata).
  const std::vector<int> attn = {
      64, 0,  0,   0,   0,   0,   0,   0,   123, 34,  97,  116, 116, 110, 46,  48,
      34, 58, 123, 34,  100, 116, 121, 112, 101, 34,  58,  34,  70,  51,  50,  34,
      44, 34, 115, 104, 97,  112, 101, 34,  58,  91,  49,  44,  50,  44,  51,  93,
      44, 34, 100, 97,  116, 97,  95,  111, 102, 102, 115, 101, 116, 115, 34,  58,
      91, 48, 44,  50,  52,  93,  125, 125, 0,   0,   0,   0,   0,   0,   128, 63,
      0,  0,  0,   64,  0,   0,   64,  64,  0,   0,   128, 64,  0,   0,   160, 64};
  const std::vector<int> empty = {8, 0, 0, 0, 0, 0, 0, 0, 123, 125, 32, 32, 32, 32, 32, 32};
  const std::vector<int> framework = {40,  0,   0,   0,   0,   0,   0,   0,   123, 34,  95,  95,
                                      109, 101, 116, 97,  100, 97,  116, 97,  95,  95,  34,  58,
                                      123, 34,  102, 114, 97,  109, 101, 119, 111, 114, 107, 34,
                                      58,  34,  112, 116, 34,  125, 125, 32,  32,  32,  32,  32};
  auto as_string = [](const std::vector<int>& v) { return std::string(v.begin(), v.end()); };

  fs::path p = scratch("reference.safetensors");
  save_safetensors(p, {{"attn.0", Tensor::from({0, 1, 2, 3, 4, 5}, {1, 2, 3}, DType::f32)}});
  CHECK(read_bytes(p) == as_string(attn));
  save_safetensors(p, {});
  CHECK(read_bytes(p) == as_string(empty));
  save_safetensors(p, {}, {{"framework", "pt"}});
  CHECK(read_bytes(p) == as_string(framework));
}

TEST_CASE("checkpoint: layout as the spec describes it, read by an independent parser",
          "[checkpoint]") {
  fs::path p = scratch("layout.safetensors");
  // Header order as given; in the data the F64 tensor comes first (wider elements first).
  save_safetensors(p,
                   {{"w", Tensor::from({1.0, -2.0, 0.5, 3.0}, {2, 2}, DType::f32)},
                    {"odd", Tensor::from({7.0}, {1}, DType::f32)},
                    {"d", Tensor::scalar(1.5, DType::f64)}},
                   {{"step", "12"}});
  const std::string file = read_bytes(p);
  REQUIRE(file.size() >= 8);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(file[i]);
  REQUIRE(8 + n <= file.size());
  CHECK((8 + n) % 8 == 0);  // the data starts 8-byte aligned
  const std::string header = file.substr(8, n);
  const size_t close = header.rfind('}');
  CHECK(header.find_first_not_of(' ', close + 1) == std::string::npos);  // padded with spaces
  const std::string data = file.substr(8 + n);

  nlohmann::json j = nlohmann::json::parse(header);
  CHECK(j["__metadata__"] == nlohmann::json({{"step", "12"}}));
  CHECK(j["w"]["dtype"] == "F32");
  CHECK(j["w"]["shape"] == nlohmann::json({2, 2}));
  CHECK(j["odd"]["shape"] == nlohmann::json({1}));
  CHECK(j["d"]["dtype"] == "F64");
  CHECK(j["d"]["shape"] == nlohmann::json::array());
  // The tensors tile the data exactly: sorted by begin, each begins where the previous ended.
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const char* name : {"w", "odd", "d"})
    ranges.emplace_back(j[name]["data_offsets"][0].get<uint64_t>(),
                        j[name]["data_offsets"][1].get<uint64_t>());
  CHECK(ranges[2] == std::pair<uint64_t, uint64_t>{0, 8});
  CHECK(ranges[0] == std::pair<uint64_t, uint64_t>{8, 24});
  CHECK(ranges[1] == std::pair<uint64_t, uint64_t>{24, 28});
  CHECK(data.size() == 28);
  // IEEE 754 by hand: 1.0f = 0x3F800000, -2.0f = 0xC0000000, 0.5f = 0x3F000000,
  // 3.0f = 0x40400000, 1.5 = 0x3FF8000000000000; little-endian, least significant byte first.
  CHECK(data.substr(8, 16) == "\x00\x00\x80\x3f\x00\x00\x00\xc0\x00\x00\x00\x3f\x00\x00\x40\x40"s);
  CHECK(data.substr(0, 8) == "\x00\x00\x00\x00\x00\x00\xf8\x3f"s);
}

TEST_CASE("checkpoint: a hand-written file loads, whatever its tensor order and padding",
          "[checkpoint]") {
  // No padding, "b" listed before "a" although its bytes come after, an unknown extra field.
  const std::string header =
      R"({"b":{"dtype":"F64","shape":[],"data_offsets":[8,16]},)"
      R"("a":{"shape":[2],"dtype":"F32","data_offsets":[0,8],"note":"ignored"}})";
  // a = [1.0f, -2.0f], b = 0.25 (0x3FD0000000000000).
  const std::string data = "\x00\x00\x80\x3f\x00\x00\x00\xc0\x00\x00\x00\x00\x00\x00\xd0\x3f"s;
  SafetensorsFile f = load_safetensors(write_safetensors("handmade.safetensors", header, data));
  CHECK(f.metadata.empty());
  REQUIRE(f.tensors.size() == 2);
  CHECK(f.tensors[0].first == "b");  // header order
  CHECK(f.tensors[0].second.dtype() == DType::f64);
  CHECK(f.tensors[0].second.shape() == Shape{});
  CHECK(f.tensors[0].second.item() == 0.25);
  CHECK(f.tensors[1].first == "a");
  CHECK(f.tensors[1].second.dtype() == DType::f32);
  CHECK(f.tensors[1].second.to_vector() == std::vector<double>{1.0, -2.0});
}

// ---------------------------------------------------------------------------------------------
// Round trips.

TEST_CASE("checkpoint: a module round-trips bit for bit in float32 and float64", "[checkpoint]") {
  for (DType dt : {DType::f32, DType::f64}) {
    DYNAMIC_SECTION(dtype_name(dt)) {
      Rng rng_a(1), rng_b(2);
      TinySeq a(rng_a, dt), b(rng_b, dt);
      // Values a text format would mangle: -0, infinities, a NaN with a payload, a subnormal.
      dispatch(dt, [&](auto tag) {
        using T = decltype(tag);
        T* bias = a.proj.bias()->value.data<T>();
        bias[0] = -T(0);
        bias[1] = std::numeric_limits<T>::infinity();
        bias[2] = -std::numeric_limits<T>::infinity();
        bias[3] = std::numeric_limits<T>::quiet_NaN();
        reinterpret_cast<unsigned char*>(&bias[3])[0] ^= 0x5a;  // payload bits
        bias[4] = std::numeric_limits<T>::denorm_min();
      });
      REQUIRE(snapshot(a) != snapshot(b));

      fs::path p = scratch(std::string("module_") + dtype_name(dt) + ".safetensors");
      save_checkpoint(p, a, {{"step", "1200"}});
      CHECK(load_checkpoint(p, b) == std::map<std::string, std::string>{{"step", "1200"}});
      CHECK(snapshot(b) == snapshot(a));

      // The names are Module::named_parameters' dotted paths, in the same order.
      SafetensorsFile f = load_safetensors(p);
      auto params = a.named_parameters();
      REQUIRE(f.tensors.size() == params.size());
      for (size_t i = 0; i < params.size(); ++i) CHECK(f.tensors[i].first == params[i].first);
      CHECK(f.tensors[0].first == "temperature");
      CHECK(f.tensors[0].second.shape() == Shape{});
      CHECK(f.tensors[1].first == "encoder.rnn.weight_ih_l0");
      CHECK(f.tensors.back().first == "proj.bias");
    }
  }
}

TEST_CASE("checkpoint: metadata with awkward strings round-trips", "[checkpoint]") {
  std::string long_value;
  for (int i = 0; i < 20000; ++i) long_value += "token" + std::to_string(i) + (i % 7 ? " " : "\n");
  const std::map<std::string, std::string> metadata = {
      {"config", R"({"hidden": 4, "cell": "gru", "dropout": 0.1})"},
      {"quotes", "she said \"hi\" and 'bye'"},
      {"whitespace", "line 1\nline 2\r\n\tindented\ttabs"},
      {"backslashes", R"(C:\path\to\file \u0041 \\ \")"},
      {"unicode", "Übersetzung → 翻訳 🙂"},
      {"controls", "nul\0inside\x01\x1f\x7f"s},
      {"", "an empty key"},
      {"empty", ""},
      {"__metadata__", "a key spelled like the reserved one"},
      {"vocab", long_value},
  };
  fs::path p = scratch("metadata.safetensors");
  save_safetensors(p, {{"x", Tensor::scalar(3, DType::f32)}}, metadata);
  CHECK(read_checkpoint_metadata(p) == metadata);
  CHECK(load_safetensors(p).metadata == metadata);
}

TEST_CASE("checkpoint: optimizer state saved as named tensors resumes training exactly",
          "[checkpoint]") {
  Rng rng_a(3), rng_b(4), grads(5);
  TinySeq a(rng_a, DType::f32), b(rng_b, DType::f32);
  Adam opt_a(a.parameters(), 0.01);
  auto random_grads = [&](TinySeq& m, uint64_t seed) {
    Rng g(seed);
    for (Parameter* p : m.parameters()) g.fill_uniform(p->grad, -1, 1);
  };
  for (uint64_t step = 0; step < 3; ++step) {
    random_grads(a, 100 + step);
    opt_a.step();
  }
  fs::path model = scratch("resume_model.safetensors"), state = scratch("resume_adam.safetensors");
  save_checkpoint(model, a);
  save_safetensors(state, opt_a.state(), {{"kind", "adam"}});

  load_checkpoint(model, b);
  Adam opt_b(b.parameters(), 0.5);  // a different lr: the loaded state must restore 0.01
  SafetensorsFile loaded = load_safetensors(state);
  CHECK(loaded.metadata.at("kind") == "adam");
  REQUIRE(loaded.tensors.size() == opt_a.state().size());
  opt_b.load_state(loaded.tensors);
  CHECK(opt_b.steps() == 3);
  CHECK(opt_b.lr() == 0.01);

  random_grads(a, 200);
  random_grads(b, 200);
  opt_a.step();
  opt_b.step();
  CHECK(snapshot(b) == snapshot(a));
}

// ---------------------------------------------------------------------------------------------
// Atomic writes.

namespace {
bool no_temp_files_in(const fs::path& dir) {
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp.") != std::string::npos) return false;
  return true;
}
}  // namespace

TEST_CASE("checkpoint: saving into a missing directory fails naming the path and the reason",
          "[checkpoint]") {
  const fs::path dir = scratch("atomic_missing");
  fs::create_directories(dir);
  const fs::path p = dir / "no_such_dir" / "model.safetensors";
  try {
    save_safetensors(p, {{"x", Tensor::scalar(1, DType::f32)}});
    FAIL("saved into a missing directory");
  } catch (const CheckpointError& e) {
    CHECK_THAT(e.what(), Contains(p.string()));
    CHECK_THAT(e.what(), Contains("No such file or directory"));
  }
  CHECK(no_temp_files_in(dir));
  CHECK(!fs::exists(dir / "no_such_dir"));
}

TEST_CASE("checkpoint: saving over a directory fails, removes its temporary file, keeps the rest",
          "[checkpoint]") {
  const fs::path dir = scratch("atomic_dir");
  fs::create_directories(dir / "model.safetensors");
  std::ofstream(dir / "model.safetensors" / "keep.txt") << "still here";
  const fs::path p = dir / "model.safetensors";
  try {
    save_safetensors(p, {{"x", Tensor::scalar(1, DType::f32)}});
    FAIL("saved over a directory");
  } catch (const CheckpointError& e) {
    CHECK_THAT(e.what(), Contains(p.string()));
    CHECK_THAT(e.what(), Contains("is a directory, not a regular file"));
  }
  CHECK(no_temp_files_in(dir));
  CHECK(read_bytes(p / "keep.txt") == "still here");
}

TEST_CASE("checkpoint: a write that fails midway leaves the old file intact", "[checkpoint]") {
  const fs::path dir = scratch("atomic_midway");
  fs::create_directories(dir);
  const fs::path p = dir / "model.safetensors";
  save_safetensors(p, {{"x", Tensor::scalar(1, DType::f32)}}, {{"version", "old"}});
  const std::string old = read_bytes(p);

  // A file size limit makes the write of the 64 KiB tensor fail partway (EFBIG), as a full disk
  // would. SIGXFSZ is ignored so the write returns an error instead of killing the process.
  struct LimitFileSize {
    rlimit saved;
    void (*saved_handler)(int);
    LimitFileSize() {
      getrlimit(RLIMIT_FSIZE, &saved);
      saved_handler = signal(SIGXFSZ, SIG_IGN);
      rlimit small = saved;
      small.rlim_cur = 4096;
      setrlimit(RLIMIT_FSIZE, &small);
    }
    ~LimitFileSize() {
      setrlimit(RLIMIT_FSIZE, &saved);
      signal(SIGXFSZ, saved_handler);
    }
  };
  Tensor big = Tensor::full({16384}, 2.0, DType::f32);
  {
    LimitFileSize limit;
    try {
      save_safetensors(p, {{"x", big}}, {{"version", "new"}});
      FAIL("the write did not fail");
    } catch (const CheckpointError& e) {
      CHECK_THAT(e.what(), Contains(p.string()));
      CHECK_THAT(e.what(), Contains("File too large"));
    }
  }
  CHECK(read_bytes(p) == old);
  CHECK(read_checkpoint_metadata(p).at("version") == "old");
  CHECK(no_temp_files_in(dir));

  // Without the limit the same save replaces the file.
  save_safetensors(p, {{"x", big}}, {{"version", "new"}});
  CHECK(read_checkpoint_metadata(p).at("version") == "new");
  CHECK(no_temp_files_in(dir));
}

TEST_CASE("checkpoint: invalid tensors or names are refused before anything is written",
          "[checkpoint]") {
  const fs::path p = scratch("refused.safetensors");
  const Tensor x = Tensor::scalar(1, DType::f32);
  CHECK_THROWS_MATCHES(save_safetensors(p, {{"x", x}, {"x", x}}), ValueError,
                       Catch::Message("save_safetensors: tensor name 'x' appears twice"));
  CHECK_THROWS_MATCHES(
      save_safetensors(p, {{"__metadata__", x}}), ValueError,
      Catch::Message("save_safetensors: '__metadata__' is reserved and cannot name a tensor"));
  CHECK_THROWS_MATCHES(save_safetensors(p, {{"x", Tensor()}}), ValueError,
                       Catch::Message("save_safetensors: tensor 'x' is undefined"));
  CHECK_THROWS_WITH(save_safetensors(p, {{"x", x}}, {{"k", "bad \xff byte"}}),
                    Contains("metadata value of 'k' is not valid UTF-8"));
  CHECK_THROWS_WITH(save_safetensors(p, {{"bad \xc3", x}}), Contains("is not valid UTF-8"));
  CHECK(!fs::exists(p));
}

// ---------------------------------------------------------------------------------------------
namespace {
std::string fit_error(const NamedTensors& saved, Module& m) {
  const fs::path p = scratch("fit.safetensors");
  save_safetensors(p, saved);
  const auto before = snapshot(m);
  std::string msg;
  try {
    load_checkpoint(p, m);
    FAIL("loaded a checkpoint that does not fit");
  } catch (const CheckpointError& e) {
    msg = e.what();
  }
  CHECK(snapshot(m) == before);
  CHECK_THAT(msg, Contains("checkpoint '" + p.string() + "': does not fit the module"));
  return msg;
}
Tensor t23(double v, DType dt = DType::f32) {
  return Tensor::full({2, 3}, v, dt);
}
}  // namespace

TEST_CASE("checkpoint load: a parameter missing from the file", "[checkpoint]") {
  Params m({{"a", t23(1)}, {"b", t23(2)}});
  CHECK_THAT(fit_error({{"a", t23(5)}}, m),
             Contains("tensor 'b' (2,3) F32 is missing from the file"));
}

TEST_CASE("checkpoint load: a tensor in the file that the module lacks", "[checkpoint]") {
  Params m({{"a", t23(1)}});
  CHECK_THAT(
      fit_error({{"a", t23(5)}, {"extra.weight", Tensor::zeros({4}, DType::f32)}}, m),
      Contains("tensor 'extra.weight' (4) F32 in the file is not a parameter of the module"));
}

TEST_CASE("checkpoint load: a shape mismatch", "[checkpoint]") {
  Params m({{"a", t23(1)}});
  CHECK_THAT(fit_error({{"a", Tensor::full({3, 2}, 5, DType::f32)}}, m),
             Contains("tensor 'a' has shape (3,2) in the file but (2,3) in the module"));
}

TEST_CASE("checkpoint load: a dtype mismatch", "[checkpoint]") {
  Params m({{"a", t23(1)}, {"b", t23(2)}});
  std::string msg = fit_error({{"a", t23(5, DType::f64)}, {"b", t23(6)}}, m);
  CHECK_THAT(msg, Contains("tensor 'a' is F64 in the file but F32 in the module"));
  CHECK_THAT(msg, Contains("(1 problem)"));  // 'b' fits; it is not copied either
}

TEST_CASE("checkpoint load: every problem is listed at once", "[checkpoint]") {
  Params m({{"a", t23(1)}, {"b", t23(2)}});
  std::string msg = fit_error({{"a", Tensor::zeros({3}, DType::f32)}, {"c", t23(3)}}, m);
  CHECK_THAT(msg, Contains("(3 problems)"));
  CHECK_THAT(msg, Contains("'a' has shape (3)"));
  CHECK_THAT(msg, Contains("'b' (2,3) F32 is missing"));
  CHECK_THAT(msg, Contains("'c' (2,3) F32 in the file is not a parameter"));
}

TEST_CASE("checkpoint load: a corrupt file leaves the module unchanged", "[checkpoint]") {
  Rng rng_a(7), rng_b(8);
  TinySeq a(rng_a, DType::f32), b(rng_b, DType::f32);
  const fs::path p = scratch("corrupt_module.safetensors");
  save_checkpoint(p, a);
  std::string bytes = read_bytes(p);
  write_bytes("corrupt_module.safetensors", bytes.substr(0, bytes.size() - 1));
  const auto before = snapshot(b);
  CHECK_THROWS_WITH(load_checkpoint(p, b), Contains("belong to no tensor") || Contains("past"));
  CHECK(snapshot(b) == before);
}

// ---------------------------------------------------------------------------------------------
// Robustness and interoperability.

TEST_CASE("checkpoint: corrupted files load or throw CheckpointError, never crash",
          "[checkpoint][fuzz]") {
  Rng init(11);
  TinySeq reference(init, DType::f32);
  const fs::path p = scratch("fuzz.safetensors");
  save_checkpoint(p, reference, {{"step", "42"}, {"config", "{\"hidden\": 4}"}});
  const std::string valid = read_bytes(p);
  uint64_t header_end = 0;
  for (int i = 7; i >= 0; --i) header_end = (header_end << 8) | static_cast<uint8_t>(valid[i]);
  header_end += 8;

  Rng rng(2024);
  Rng target_init(12);
  TinySeq target(target_init, DType::f32);
  const std::string json_chars = "{}[]\",:0123456789-.eE ";
  int accepted = 0, rejected = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string bytes = valid;
    switch (rng.randint(5)) {
      case 0:  // flip bits anywhere
        for (int64_t k = 0, n = 1 + rng.randint(3); k < n; ++k)
          bytes[rng.randint(bytes.size())] ^= static_cast<char>(1 << rng.randint(8));
        break;
      case 1:  // flip bits in the length or the header
        for (int64_t k = 0, n = 1 + rng.randint(3); k < n; ++k)
          bytes[rng.randint(header_end)] ^= static_cast<char>(1 << rng.randint(8));
        break;
      case 2:  // truncate
        bytes.resize(rng.randint(bytes.size()));
        break;
      case 3:  // a JSON-significant character somewhere in the header
        bytes[8 + rng.randint(header_end - 8)] = json_chars[rng.randint(json_chars.size())];
        break;
      default:  // change a digit of the header (shapes, offsets, lengths)
        for (int tries = 0; tries < 100; ++tries) {
          const int64_t i = 8 + rng.randint(header_end - 8);
          if (bytes[i] >= '0' && bytes[i] <= '9') {
            bytes[i] = static_cast<char>('0' + rng.randint(10));
            break;
          }
        }
    }
    write_bytes("fuzz_case.safetensors", bytes);
    const std::string path = scratch("fuzz_case.safetensors").string();
    INFO("iteration " << iter);
    try {
      read_checkpoint_metadata(path);
      load_safetensors(path);
      ++accepted;
    } catch (const CheckpointError&) {
      ++rejected;
    }
    const auto before = snapshot(target);
    try {
      load_checkpoint(path, target);
    } catch (const CheckpointError&) {
      REQUIRE(snapshot(target) == before);
    }
  }
  // Both outcomes occur: flipped data bytes still load, broken headers do not.
  CHECK(accepted > 100);
  CHECK(rejected > 1000);
}

TEST_CASE("checkpoint: plain Python (json + struct) reads what Tapestry writes", "[checkpoint]") {
  if (!fs::exists("/usr/bin/python3")) {
    WARN("/usr/bin/python3 not found: the Python reader was not checked");
    return;
  }
  const fs::path p = scratch("python.safetensors");
  save_safetensors(p,
                   {{"encoder.weight", Tensor::from({0.5, -1.25, 3, 4, 5, 6}, {2, 3}, DType::f32)},
                    {"decoder.bias", Tensor::from({0.1, 0.2, 0.3}, {3}, DType::f64)},
                    {"step", Tensor::scalar(1200, DType::f64)}},
                   {{"config", R"({"hidden": 4})"}});
  const std::string script =
      std::string(TAPESTRY_SOURCE_DIR) + "/tests/data/checkpoint/read_safetensors.py";
  // Expected lines written by hand from the values above and Python's float repr (the shortest
  // string that reads back the same double; 0.1 is stored as F64, so it prints as 0.1).
  CHECK(testing::run_command("/usr/bin/python3 " + script + " " + p.string()).output ==
        "metadata config = '{\"hidden\": 4}'\n"
        "encoder.weight F32 [2, 3] [0.5, -1.25, 3.0, 4.0]\n"
        "decoder.bias F64 [3] [0.1, 0.2, 0.3]\n"
        "step F64 [] [1200.0]\n");
}
