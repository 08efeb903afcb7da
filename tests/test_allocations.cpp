// A steady training step and a steady greedy decoding call (RNN or Transformer) make no heap
// allocation: every C++ allocation of the process is counted (the global operator new is replaced
// in this test program) over steps after warm-up. Nor do they read a file: the process's read
// calls are counted from /proc/self/io (a per-product query of the CPU count had read
// /sys/devices/system/cpu/online at every product).
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <new>
#include <optional>
#include <utility>
#include <vector>

#include "tapestry/models/decode.h"
#include "tapestry/models/train.h"
#include "tools/heap_count.h"

namespace {
auto& counting = tapestry::cli::heap_counter.counting;
auto& allocations = tapestry::cli::heap_counter.allocations;

// While it lives, each counted allocation prints its size and backtrace to standard error (as
// TAPESTRY_HEAP_TRACE=1 does in tapestry bench): an allocation after warm-up is a failure, and
// its log then names the caller, however rarely it happens.
struct TraceAllocations {
  TraceAllocations() { tapestry::cli::heap_counter.trace = true; }
  ~TraceAllocations() { tapestry::cli::heap_counter.trace = false; }
  TraceAllocations(const TraceAllocations&) = delete;
  TraceAllocations& operator=(const TraceAllocations&) = delete;
};
}  // namespace

using namespace tapestry;
using namespace tapestry::models;

namespace {
// The process's read system calls so far (syscr in /proc/self/io, all threads), or -1 where the
// file cannot be read. Reading it costs one read call, counted in the next reading.
int64_t read_calls() {
  const int fd = ::open("/proc/self/io", O_RDONLY);
  if (fd < 0) return -1;
  char text[1024] = {};
  const ssize_t n = ::read(fd, text, sizeof text - 1);
  ::close(fd);
  const char* at = n > 0 ? std::strstr(text, "syscr:") : nullptr;
  return at ? std::strtoll(at + 6, nullptr, 10) : -1;
}

// Read calls made by f(), not counting read_calls' own (measured by two readings side by side);
// none where /proc/self/io cannot be read.
template <typename F>
std::optional<int64_t> reads_during(F&& f) {
  const int64_t a = read_calls(), b = read_calls();
  f();
  const int64_t c = read_calls();
  if (a < 0 || b < 0 || c < 0) {
    static bool said = false;  // once, not at every measurement
    if (!std::exchange(said, true))
      WARN("/proc/self/io cannot be read here: read calls are not counted");
    return std::nullopt;
  }
  return (c - b) - (b - a);
}

// Random pairs over tokens 4..23, sources 5-8 and targets 4-6 tokens long, as one batch.
Batch random_batch(uint64_t seed, int rows) {
  Rng rng(seed);
  std::vector<EncodedPair> pairs;
  for (int i = 0; i < rows; ++i) {
    EncodedPair p;
    for (int t = 0; t < 5 + i % 4; ++t) p.src.push_back(static_cast<int32_t>(4 + rng.randint(20)));
    for (int t = 0; t < 4 + i % 3; ++t) p.tgt.push_back(static_cast<int32_t>(4 + rng.randint(20)));
    pairs.push_back(p);
  }
  std::vector<int64_t> ids(static_cast<size_t>(rows));
  for (int i = 0; i < rows; ++i) ids[static_cast<size_t>(i)] = i;
  return make_batch(pairs, ids);
}

// A toy Transformer: 2+2 layers, d 16, 4 heads, over 24 tokens.
Seq2SeqConfig toy_transformer() {
  Seq2SeqConfig c;
  c.arch = Arch::transformer;
  c.src_vocab = c.tgt_vocab = 24;
  c.d_model = 16;
  c.heads = 4;
  c.ffn = 32;
  c.enc_layers = c.dec_layers = 2;
  return c;
}
}  // namespace

TEST_CASE("a steady training step makes no heap allocation and reads no file", "[train][memory]") {
#if defined(__SANITIZE_ADDRESS__)
  WARN("AddressSanitizer owns the allocator here: allocations are counted in the plain build");
  return;
#endif
  // The counter is linked in and counts (a direct call, which the compiler may not elide as it
  // may a new expression whose result goes unused).
  REQUIRE(tapestry::cli::heap_counter.installed);
  allocations = 0;
  counting = true;
  void* probe = ::operator new(64);
  counting = false;
  ::operator delete(probe);
  REQUIRE(allocations.load() == 1);
  const TraceAllocations trace;
  const Batch batch = random_batch(3, 16);
  for (nn::AttentionKind kind : {nn::AttentionKind::bahdanau, nn::AttentionKind::general}) {
    for (nn::CellKind cell : {nn::CellKind::gru, nn::CellKind::lstm}) {
      Seq2SeqConfig c;
      c.src_vocab = c.tgt_vocab = 24;
      c.emb = 8;
      c.hidden = 16;
      c.attention = kind;
      c.cell = cell;
      c.decoder = kind == nn::AttentionKind::general ? DecoderKind::luong : DecoderKind::bahdanau;
      c.dropout = 0.1;
      Seq2Seq model(c);
      Trainer trainer(model, TrainOptions{});
      for (int i = 0; i < 5; ++i) trainer.step(batch);  // warm-up: pools and buffers grow
      allocations = 0;
      counting = true;
      const std::optional<int64_t> reads = reads_during([&] {
        for (int i = 0; i < 10; ++i) trainer.step(batch);
      });
      counting = false;
      INFO(fmt::format("{} {}: {} allocations and {} read calls in 10 steps",
                       nn::attention_name(kind), nn::cell_name(cell), allocations.load(),
                       reads.value_or(0)));
      CHECK(allocations.load() == 0);
      CHECK(reads.value_or(0) == 0);
    }
  }
  // The Transformer, post- and pre-norm, with dropout and label smoothing and the noam schedule.
  for (nn::NormPlace norm : {nn::NormPlace::post, nn::NormPlace::pre}) {
    Seq2SeqConfig c = toy_transformer();
    c.norm = norm;
    c.dropout = 0.1;
    Seq2Seq model(c);
    TrainOptions o;
    o.label_smoothing = 0.1;
    o.schedule = "noam";
    o.warmup = 4;
    Trainer trainer(model, o);
    for (int i = 0; i < 5; ++i) trainer.step(batch);
    allocations = 0;
    counting = true;
    const std::optional<int64_t> reads = reads_during([&] {
      for (int i = 0; i < 10; ++i) trainer.step(batch);
    });
    counting = false;
    INFO(fmt::format("transformer {}-norm: {} allocations and {} read calls in 10 steps",
                     nn::norm_place_name(norm), allocations.load(), reads.value_or(0)));
    CHECK(allocations.load() == 0);
    CHECK(reads.value_or(0) == 0);
  }
}

namespace {
struct Steady {
  int64_t allocations = 0;
  std::optional<int64_t> reads;  // read system calls
};

// Allocations and read calls over 5 calls decoding each batch, after 3 such rounds of warm-up,
// with one workspace, one set of weight packs and one output list throughout.
Steady steady_decode(Seq2Seq& model, const std::vector<Batch>& batches, int64_t shards,
                     bool early_exit, bool through_ops) {
  WeightPacks packs;
  DecodeWorkspace workspace;
  DecodeOptions o;
  o.packs = &packs;
  o.workspace = &workspace;
  o.shards = shards;
  o.early_exit = early_exit;
  o.through_ops = through_ops;
  std::vector<Hypothesis> out;
  for (int i = 0; i < 3; ++i)
    for (const Batch& b : batches) greedy_decode_into(model, b, o, out);
  allocations = 0;
  counting = true;
  const std::optional<int64_t> reads = reads_during([&] {
    for (int i = 0; i < 5; ++i)
      for (const Batch& b : batches) greedy_decode_into(model, b, o, out);
  });
  counting = false;
  return {allocations.load(), reads};
}
}  // namespace

TEST_CASE("steady greedy decoding makes no heap allocation and reads no file", "[decode][memory]") {
#if defined(__SANITIZE_ADDRESS__)
  WARN("AddressSanitizer owns the allocator here: allocations are counted in the plain build");
  return;
#endif
  REQUIRE(tapestry::cli::heap_counter.installed);
  const TraceAllocations trace;
  // One sentence (one shard) and 16 (two shards, decoded in parallel), each in two batches.
  const std::vector<Batch> one = {random_batch(5, 1), random_batch(6, 1)};
  const std::vector<Batch> many = {random_batch(7, 16), random_batch(8, 16)};
  std::vector<Seq2SeqConfig> configs;
  for (nn::AttentionKind kind : {nn::AttentionKind::bahdanau, nn::AttentionKind::general})
    for (nn::CellKind cell : {nn::CellKind::gru, nn::CellKind::lstm}) {
      Seq2SeqConfig c;
      c.src_vocab = c.tgt_vocab = 24;
      c.emb = 8;
      c.hidden = 16;
      c.layers = cell == nn::CellKind::lstm ? 2 : 1;
      c.bidirectional = kind == nn::AttentionKind::bahdanau;
      c.attention = kind;
      c.cell = cell;
      c.decoder = kind == nn::AttentionKind::general ? DecoderKind::luong : DecoderKind::bahdanau;
      configs.push_back(c);
    }
  configs.push_back(toy_transformer());
  for (const Seq2SeqConfig& c : configs) {
    Seq2Seq model(c);
    // The raw RNN path (models/rnn_inference.h) where it applies, and the ops' path.
    for (bool through_ops : {false, true})
      for (bool early_exit : {true, false}) {
        const Steady single = steady_decode(model, one, 1, early_exit, through_ops);
        const Steady sharded = steady_decode(model, many, 2, early_exit, through_ops);
        INFO(fmt::format(
            "{}: {} and {} allocations, {} and {} read calls in 10 calls (1 and 16 rows), early "
            "exit {}, through ops {}",
            c.transformer() ? "transformer" : nn::attention_name(c.attention), single.allocations,
            sharded.allocations, single.reads.value_or(0), sharded.reads.value_or(0), early_exit,
            through_ops));
        CHECK(single.allocations == 0);
        CHECK(sharded.allocations == 0);
        CHECK(single.reads.value_or(0) == 0);
        CHECK(sharded.reads.value_or(0) == 0);
      }
  }
}
