// tapestry bench's settings: its help text, its flags, and the preset with the flags' overrides,
// checked (sizes, the architecture's own flags, the machine's memory).
#pragma once

#include <cstdint>
#include <string>

#include "tools/bench_data.h"
#include "tools/flags.h"

namespace tapestry::cli {

// The text of `tapestry bench --help` above the options.
extern const char* const kBenchAbout;

struct BenchSettings {
  std::string config = "small", arch = "rnn";
  bool bidir = false;
  int64_t threads = 0;
  // -1: the preset's value
  int64_t vocab = -1, src_vocab = -1, tgt_vocab = -1;
  int64_t emb = -1, hidden = -1, attn = -1;
  int64_t d_model = -1, heads = -1, ffn = -1, enc_layers = -1, dec_layers = -1;
  int64_t batch = -1, src_len = -1, tgt_len = -1;
  int64_t warmup = -1, iters = -1, decode_iters = -1;
  int64_t pool = 8, seed = 0, decode_shards = 2;
  double dropout = -1, lr = -1, clip = 1.0, min_len_frac = 0.7, peak_gflops = 0;
  bool decode = true, phases = false, decode_through_ops = false;
  std::string model, src_text, tgt_text, dump_batches;  // --model: a saved model on real text

  bool transformer() const { return arch == "transformer"; }
  void declare(Flags& f);
  // The other architecture's size flags are refused, naming both (as `tapestry train` does).
  void check(const Flags& f) const;
  double learning_rate() const { return lr >= 0 ? lr : transformer() ? 5e-4 : 1e-3; }
  // The preset with the flags' overrides, not yet checked.
  BenchShape overridden() const;
  // The preset with the flags' overrides, checked; throws UsageError naming the flag.
  BenchShape shape() const;
  // Training's memory and the batch pool's, in bytes.
  static double need(const BenchShape& s);
  // Refuses a shape whose training cannot fit in this machine's memory, before the batches or
  // the model are made, naming the flag most to blame: the one whose preset value would shrink
  // the need most.
  void check_memory(const BenchShape& s) const;
};

}  // namespace tapestry::cli
