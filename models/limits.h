// Memory limits: the machine's physical memory and estimates of what a model needs to be loaded
// or trained, so that sizes that cannot fit are refused before anything is allocated.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "tapestry/models/config.h"

namespace tapestry::models {

// The machine's physical memory in bytes (sysconf), 0 when the system does not say. The total,
// not what is free now: a size refused against it cannot fit however the machine is used, so
// the refusal does not depend on what else is running.
uint64_t physical_memory_bytes();

// "412 GiB", "3.1 MiB", "512 bytes": binary units, as `free -g` and top count memory.
std::string format_bytes(double bytes);

// A rough estimate of the memory one training step takes, in bytes; under rather than over the
// truth, so that a refusal is never wrong. Parameters count `weight_copies` times (the values,
// their gradients and the optimizer's state: 4 for Adam, 2 for plain SGD); activations are the
// tape's values and gradients for a batch of `batch` pairs of up to `src_len` source and
// `tgt_len` target tokens (the output layer's logits, the recurrent gates and states, the
// attention's scores), in float32.
struct MemoryNeed {
  double weights = 0;      // parameters times weight_copies
  double activations = 0;  // the tape's values and gradients for one batch
  double total() const { return weights + activations; }
};
MemoryNeed training_memory(const Seq2SeqConfig& config, int64_t batch, int64_t src_len,
                           int64_t tgt_len, int weight_copies);

// Why `need` bytes cannot fit, to follow "would need": "1.3 TiB (what), more than this
// machine's 23 GiB"; or "" when they can (or the machine's memory is unknown). `what` says what the
// bytes are for, e.g. "parameters, gradients and Adam's state".
std::string memory_refusal(double need, std::string_view what);

}  // namespace tapestry::models
