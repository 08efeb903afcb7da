// `tapestry bench --model DIR`: a training step of a saved model on real text, timed, with the
// batches written out so that its exported PyTorch model can be timed on the same ones.
#pragma once

#include <cstdint>
#include <string>

namespace tapestry::cli {

struct ModelBenchOptions {
  std::string model;         // run directory or .safetensors file
  std::string src, tgt;      // line-aligned training text (source, target)
  std::string dump_batches;  // where to write the batches and the optimiser's settings (JSON)
  int64_t batch = 128, pool = 8, warmup = 2, iters = 8, threads = 0;
  uint64_t seed = 0;
  double lr = 1e-3, clip = 1.0;
};

// Prints a header line, the step's median time and a last line 'RESULT {json}'; returns 0.
// Throws the CLI's errors for bad files (named) and a model or text that does not fit.
int bench_saved_model(const ModelBenchOptions& o);

}  // namespace tapestry::cli
