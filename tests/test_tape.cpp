// The tape: recording order, reverse accumulation, reuse, no-grad, regions, memory across steps.
#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>
#include <random>
#include <string>
#include <thread>

#include "tapestry/core/memory.h"
#include "tapestry/core/parallel.h"
#include "tapestry/core/random.h"
#include "tapestry/core/tape.h"
#include "tapestry/ops/ops.h"

using namespace tapestry;
using Catch::Contains;

namespace {
Tensor vec(std::initializer_list<double> v, DType dt = DType::f64) {
  return Tensor::from(v, {static_cast<int64_t>(v.size())}, dt);
}
Tensor ones_like(const Var& v) {
  return Tensor::full(v.shape(), 1.0, v.dtype());
}
}  // namespace

TEST_CASE("matmul of known matrices", "[ops][matmul]") {
  for (DType dt : {DType::f32, DType::f64}) {
    Tensor a = Tensor::from({1, 2, 3, 4, 5, 6}, {2, 3}, dt);
    Tensor b = Tensor::from({7, 8, 9, 10, 11, 12}, {3, 2}, dt);
    // [1 2 3; 4 5 6] [7 8; 9 10; 11 12] = [58 64; 139 154]
    REQUIRE(ops::matmul(a, b).value().to_vector() == std::vector<double>{58, 64, 139, 154});
    // a^T a: entry (0,0) = 1*1 + 4*4 = 17, entry (2,2) = 3*3 + 6*6 = 45
    Tensor ata = ops::matmul(a, a, true, false).value();
    REQUIRE(ata.shape() == Shape{3, 3});
    REQUIRE(ata.at(0) == 17);
    REQUIRE(ata.at(8) == 45);
    // a a^T = [14 32; 32 77]
    REQUIRE(ops::matmul(a, a, false, true).value().to_vector() ==
            std::vector<double>{14, 32, 32, 77});
  }
  // Batched 3-D by shared 2-D: [I; 2I] times b = [b; 2b]
  Tensor a3 = Tensor::from({1, 0, 0, 1, 2, 0, 0, 2}, {2, 2, 2}, DType::f64);
  Tensor b2 = Tensor::from({1, 2, 3, 4}, {2, 2}, DType::f64);
  REQUIRE(ops::matmul(a3, b2).value().to_vector() == std::vector<double>{1, 2, 3, 4, 2, 4, 6, 8});
}

TEST_CASE("shape and dtype errors name the op and every shape", "[ops][errors]") {
  Var a = Tensor::zeros({2, 3}, DType::f32), b = Tensor::zeros({4, 5}, DType::f32);
  REQUIRE_THROWS_AS(ops::matmul(a, b), ShapeError);
  REQUIRE_THROWS_WITH(ops::matmul(a, b),
                      Contains("matmul") && Contains("(2,3)") && Contains("(4,5)"));
  Var c = Tensor::zeros({2, 3, 4}, DType::f32), d = Tensor::zeros({3, 4, 5}, DType::f32);
  REQUIRE_THROWS_WITH(ops::matmul(c, d),
                      Contains("batch sizes differ") && Contains("(2,3,4)") && Contains("(3,4,5)"));
  REQUIRE_THROWS_AS(ops::matmul(Tensor::zeros({2}, DType::f32), b), ShapeError);
  REQUIRE_THROWS_AS(ops::matmul(Tensor::zeros({2, 4}, DType::f64), b), DTypeError);
  REQUIRE_THROWS_WITH(ops::add(Tensor::zeros({2}, DType::f64), Tensor::zeros({2}, DType::f32)),
                      Contains("add") && Contains("float64") && Contains("float32"));
  REQUIRE_THROWS_WITH(ops::mul(Tensor::zeros({2, 3}, DType::f32), Tensor::zeros({2}, DType::f32)),
                      Contains("mul") && Contains("(2,3)") && Contains("(2)"));
  // Errors are raised when the op is called, before anything is recorded.
  Tape tape;
  Var x = tape.leaf(Tensor::zeros({2, 3}, DType::f32));
  REQUIRE_THROWS_AS(ops::matmul(x, b), ShapeError);
  REQUIRE(tape.size() == 1);
}

TEST_CASE("backward runs in reverse and a tensor used twice gets the sum of its gradients",
          "[tape]") {
  Tape tape;
  Var x = tape.leaf(vec({2.0, -1.0}));
  // y = x*x + 3x, so dy/dx = 2x + 3
  Var sq = x * x;
  Var lin = x * 3.0;
  Var y = sq + lin;
  REQUIRE(tape.size() == 4);  // leaf, mul, scale, add: in the order they were recorded
  REQUIRE(std::string(tape.node(1).op->name) == "mul");
  REQUIRE(std::string(tape.node(3).op->name) == "add");
  tape.backward(y, ones_like(y), {.retain_graph = true});
  REQUIRE(tape.grad(x).to_vector() == std::vector<double>{7.0, 1.0});

  // A second backward on the same tape (allowed by retain_graph) adds to the leaf's gradient, as
  // parameters accumulate; tests/test_safety.cpp checks that it is refused without.
  tape.backward(y, ones_like(y));
  REQUIRE(tape.grad(x).to_vector() == std::vector<double>{14.0, 2.0});
}

TEST_CASE("an op's first share of a gradient is stored, and a node two inputs of one op gets both",
          "[tape]") {
  // Ops whose backward stores the first share of a new gradient (Tape::input_grad_to_write),
  // given one node as both inputs, and a node whose stored share is then added to.
  Tape tape;
  const std::vector<double> m{1.0, 2.0, 3.0, 4.0};
  Var x = tape.leaf(Tensor::from({1.0, 2.0, 3.0, 4.0}, {2, 2}, DType::f64));
  Var b = tape.leaf(vec({0.5, -0.5}));
  // d/dX sum(X + X) = 2;  d/dX sum(X - X) = 0;  d/dX sum(X X) = 1 X^T + X^T 1;
  // d/dX sum(X X^T + b) (affine(X, X)) = 1 X + 1^T X = 2 * column sums of X in every row
  Var s1 = ops::sum(x + x), s2 = ops::sum(x - x), s3 = ops::sum(ops::matmul(x, x));
  Var s4 = ops::sum(ops::affine(x, x, b));
  // reshape stores its share into x's gradient first (it runs last in the recording, so first in
  // backward), then the others add to it.
  Var s5 = ops::sum(ops::reshape(x, {4}) * 3.0);
  Var y = s1 + s2 + s3 + s4 + s5;
  tape.backward(y, ones_like(y));
  std::vector<double> want(4);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) {
      double mm = 0, aff = 0;
      for (int t = 0; t < 2; ++t) {
        mm += m[static_cast<size_t>(j * 2 + t)] + m[static_cast<size_t>(t * 2 + i)];
        aff += 2 * m[static_cast<size_t>(t * 2 + j)];
      }
      want[static_cast<size_t>(i * 2 + j)] = 2 + 0 + mm + aff + 3;
    }
  REQUIRE(tape.grad(x).to_vector() == want);
  REQUIRE(tape.grad(b).to_vector() == std::vector<double>{2.0, 2.0});
}

TEST_CASE("gradients accumulate into a bound parameter across steps until zeroed", "[tape]") {
  Tensor w = vec({0.5, 2.0});
  Tensor dw = Tensor::zeros(w.shape(), w.dtype());
  Tape tape;
  for (int step = 0; step < 3; ++step) {
    Var wv = tape.bind(w, dw);
    Var y = wv * wv;  // dy/dw = 2w
    tape.backward(y, ones_like(y));
    tape.clear();
  }
  REQUIRE(dw.to_vector() == std::vector<double>{3.0, 12.0});
}

TEST_CASE("constants need no gradient and are not recorded", "[tape]") {
  Tape tape;
  Var x = tape.leaf(vec({1.0, 2.0}));
  Var c = vec({3.0, 4.0});  // a constant
  Var cc = c * c;           // only constants: computed, not recorded
  REQUIRE_FALSE(cc.requires_grad());
  REQUIRE(tape.size() == 1);
  Var y = x * cc;
  REQUIRE(y.requires_grad());
  tape.backward(y, ones_like(y));
  REQUIRE(tape.grad(x).to_vector() == std::vector<double>{9.0, 16.0});
  REQUIRE_FALSE(tape.grad(c).defined());
}

TEST_CASE("a no-grad scope records nothing", "[tape]") {
  Tape tape;
  Var x = tape.leaf(vec({1.0, 2.0}));
  size_t before = tape.size();
  {
    NoGrad no_grad(tape);
    Var y = ops::tanh(x * x);
    REQUIRE_FALSE(y.requires_grad());
    REQUIRE(y.value().at(1) == Approx(std::tanh(4.0)));
    Var p = tape.bind(vec({1.0}), Tensor::zeros({1}, DType::f64));
    REQUIRE_FALSE(p.requires_grad());
  }
  REQUIRE(tape.size() == before);
  REQUIRE(ops::tanh(x).requires_grad());  // recording resumes after the scope
}

TEST_CASE("backward refuses what it cannot do", "[tape]") {
  Tape tape, other;
  Var x = tape.leaf(vec({1.0, 2.0}));
  Var y = x * x;
  REQUIRE_THROWS_AS(tape.backward(y), TapeError);  // not one element: needs a seed
  REQUIRE_THROWS_AS(other.backward(y, ones_like(y)), TapeError);
  REQUIRE_THROWS_AS(tape.backward(y, Tensor::zeros({3}, DType::f64)), ShapeError);
  Var z = other.leaf(vec({1.0, 1.0}));
  REQUIRE_THROWS_AS(ops::add(x, z), TapeError);  // inputs from two tapes
}

TEST_CASE("regions label what is recorded inside them", "[tape]") {
  Tape tape;
  Var x = tape.leaf(vec({1.0}));
  {
    Region r(tape, "scores");
    Var y = ops::tanh(x);
    {
      Region s(tape, "softmax");
      Var z = ops::exp(y);
    }
  }
  REQUIRE(tape.region_name(tape.node(0).region).empty());
  REQUIRE(tape.region_name(tape.node(1).region) == "scores");
  REQUIRE(tape.region_name(tape.node(2).region) == "softmax");
}

TEST_CASE("inner gradients are released after backward unless kept", "[tape]") {
  for (bool keep : {false, true}) {
    Tape tape;
    tape.set_keep_grads(keep);
    Var x = tape.leaf(vec({1.0, 2.0}));
    Var h = ops::tanh(x);
    Var y = h * 2.0;
    tape.backward(y, ones_like(y));
    REQUIRE(tape.grad(x).defined());  // leaves always keep theirs
    REQUIRE(tape.grad(h).defined() == keep);
  }
}

namespace {
// Resident set size in kB, from /proc/self/statm (pages).
long rss_kb() {
  std::ifstream f("/proc/self/statm");
  long size = 0, resident = 0;
  f >> size >> resident;
  return resident * 4;
}
}  // namespace

TEST_CASE("10,000 record-backward-clear cycles keep memory flat", "[tape][memory]") {
  Rng rng(1);
  Tensor w = rng.uniform_tensor({16, 32}, -0.1, 0.1, DType::f32);
  Tensor dw = Tensor::zeros(w.shape(), w.dtype());
  Tensor x = rng.uniform_tensor({8, 16}, -1, 1, DType::f32);
  Tape tape;
  auto step = [&] {
    Var wv = tape.bind(w, dw);
    Var h = ops::tanh(ops::matmul(x, wv));
    Var y = ops::sigmoid(h * h + h);
    tape.backward(y, Tensor::full(y.shape(), 1.0, y.dtype()));
    tape.clear();
  };
  for (int i = 0; i < 10; ++i) step();  // warm the pool
  MemoryStats before = memory_stats();
  long rss_before = rss_kb();
  for (int i = 0; i < 10000; ++i) step();
  MemoryStats after = memory_stats();
  long rss_after = rss_kb();
  INFO("system allocations " << before.system_allocations << " -> " << after.system_allocations
                             << ", in use " << before.bytes_in_use << " -> " << after.bytes_in_use
                             << " bytes, RSS " << rss_before << " -> " << rss_after << " kB");
  // Every tensor of a step is served from the pool: no block is taken from the system after
  // warm-up.
  REQUIRE(after.system_allocations == before.system_allocations);
  REQUIRE(after.bytes_in_use == before.bytes_in_use);
  REQUIRE(after.pool_hits > before.pool_hits);
  REQUIRE(rss_after - rss_before < 1024);  // under 1 MB of growth over 10,000 steps
}

TEST_CASE("a big block freed on another thread than the one that made it is reused",
          "[tape][memory]") {
  // A decoding call's weight packs are made on whichever core needs them first and freed on the
  // caller's: the next call must find them again instead of taking new memory from the system.
  set_parallel_threads(2);
  if (parallel_threads() < 2) WARN("one core only: no block crosses threads here");
  auto cycle = [] {
    Tensor made;
    parallel_run(2, [&](int job) {
      if (job == 1) made = Tensor::empty({1 << 19}, DType::f32);  // 2 MB, on the pool thread
    });
    made = Tensor();  // freed here, on the calling thread
  };
  for (int i = 0; i < 3; ++i) cycle();
  const MemoryStats before = memory_stats();
  for (int i = 0; i < 50; ++i) cycle();
  const MemoryStats after = memory_stats();
  set_parallel_threads(0);
  CHECK(after.system_allocations == before.system_allocations);
  CHECK(after.bytes_cached == before.bytes_cached);
}

TEST_CASE("a thread's size classes age by its own steps, not by other threads'", "[tape][memory]") {
  // Each shard of a training step clears its own tape, so the cores mark steps at their own pace.
  // A class one thread asks for once a step must stay however many steps another thread marks
  // meanwhile: were they counted, which blocks a miss let go would depend on the timing of the
  // cores (a steady step that allocated now and then).
  std::vector<size_t> taken;  // blocks taken from the system by the once-a-step request
  std::thread([&] {
    for (int step = 0; step < 12; ++step) {
      std::thread([] {
        for (int i = 0; i < 10; ++i) mark_memory_step();  // another core's shard, far ahead
      }).join();
      // A miss (a new shape), at which the pool lets idle classes go, then the steady request.
      Tensor fresh = Tensor::empty({(int64_t{1} << 16) + step * 4096}, DType::f32);
      const size_t before = memory_stats().system_allocations;
      { Tensor steady = Tensor::empty({1000}, DType::f32); }
      taken.push_back(memory_stats().system_allocations - before);
      mark_memory_step();  // this thread's step ends
    }
  }).join();
  std::string seen;
  for (size_t n : taken) seen += std::to_string(n) + " ";
  INFO("blocks taken from the system for the steady request, step by step: " << seen);
  REQUIRE(taken.size() == 12);
  CHECK(taken[0] == 1);  // its first step
  CHECK(std::count(taken.begin() + 1, taken.end(), size_t{0}) == 11);
}

TEST_CASE("batches of ever-changing shapes do not fill every size class", "[tape][memory]") {
  // Subword batches differ in length every step, so their tensors fall in many size classes. A
  // pool that kept every class's blocks forever held many times a step's need (12.8 GB for a
  // Transformer whose steps use a few): a class no step has asked for in the last two is let go.
  // A fresh thread, so that what is cached is this workload's own.
  int64_t cached_growth = 0, largest_in_use = 0, hits = 0, steps = 600, tensors = 20;
  std::thread([&] {
    const MemoryStats before = memory_stats();
    std::mt19937 lengths(1);
    for (int step = 0; step < steps; ++step) {
      const int64_t length = 5 + lengths() % 400;  // 5..404 "tokens": 27 size classes
      std::vector<Tensor> activations;
      for (int i = 0; i < tensors; ++i)
        activations.push_back(Tensor::empty({length, 1000}, DType::f32));
      const MemoryStats peak = memory_stats();
      largest_in_use = std::max(largest_in_use, static_cast<int64_t>(peak.bytes_in_use) -
                                                    static_cast<int64_t>(before.bytes_in_use));
      activations.clear();
      mark_memory_step();  // as Tape::clear does at the end of a training step
    }
    const MemoryStats after = memory_stats();
    cached_growth =
        static_cast<int64_t>(after.bytes_cached) - static_cast<int64_t>(before.bytes_cached);
    hits = static_cast<int64_t>(after.pool_hits - before.pool_hits);
  }).join();
  INFO("cache grew by " << cached_growth << " bytes; the largest step had " << largest_in_use
                        << " bytes in use; " << hits << " pool hits");
  REQUIRE(largest_in_use >= tensors * 64 * 1000 * 4);
  // At most the classes of the last three steps stay (kept forever, every class between 20 kB
  // and 1.6 MB stays: 137 MB here, 3.7 times the largest step; trimmed, 24 MB).
  CHECK(cached_growth <= 3 * largest_in_use);
  CHECK(hits > steps * tensors / 2);  // most steps still reuse the blocks of recent ones
}

TEST_CASE("a record hook sees every recorded value and may replace it", "[tape]") {
  Tape tape;
  Var x = tape.leaf(vec({1.0, 2.0}));
  std::vector<int32_t> seen;
  tape.set_record_hook([&](int32_t node, Tensor& value) {
    seen.push_back(node);
    if (node == 2) {  // the second op: what later ops read is the replaced value
      value = value.clone();
      value.set(0, 100.0);
    }
  });
  Var y = ops::exp(x);  // node 1
  Var z = y * 2.0;      // node 2, replaced
  Var w = ops::sum(z);  // node 3 reads the replacement
  CHECK(seen == std::vector<int32_t>{1, 2, 3});
  CHECK(z.value().at(0) == 100.0);
  CHECK(w.value().item() == Approx(100.0 + 2 * std::exp(2.0)));
  tape.set_record_hook(nullptr);
  Var u = ops::exp(x);
  CHECK(seen.size() == 3);  // off again
  (void)u;
}
