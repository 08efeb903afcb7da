// Memory limits: physical memory from sysconf, and the estimates that size refusals compare to it.
#include "tapestry/models/limits.h"

#include <fmt/format.h>
#include <unistd.h>

namespace tapestry::models {

uint64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return 0;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
}

std::string format_bytes(double bytes) {
  static const char* const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (bytes >= 1024 && u < 6) bytes /= 1024, ++u;
  if (u == 0) return fmt::format("{:.0f} bytes", bytes);
  if (bytes < 9.95) return fmt::format("{:.1f} {}", bytes, units[u]);
  return fmt::format("{:.0f} {}", bytes, units[u]);
}

MemoryNeed training_memory(const Seq2SeqConfig& c, int64_t batch, int64_t src_len, int64_t tgt_len,
                           int weight_copies) {
  constexpr double kFloat = 4;  // float32
  // In double: a config at its limits with a huge batch must not overflow an integer.
  const double b = static_cast<double>(batch), s = static_cast<double>(src_len),
               t = static_cast<double>(tgt_len);
  const double h = static_cast<double>(c.hidden), e = static_cast<double>(c.emb),
               k = static_cast<double>(c.key_size()), l = c.layers, g = nn::gate_count(c.cell) * h,
               v = static_cast<double>(c.tgt_vocab), dirs = c.bidirectional ? 2 : 1;
  const double a = static_cast<double>(c.attn_size > 0 ? c.attn_size : c.hidden);
  const bool additive =
      c.attention == nn::AttentionKind::bahdanau || c.attention == nn::AttentionKind::concat;
  const double f = c.decoder == DecoderKind::luong || !c.deep_output ? h : h + k + e;
  // Elements the tape keeps for one batch.
  const double encoder = b * s * (e + l * dirs * (g + h));
  const double attention_memory = additive ? b * s * a : 0;  // U h_j, once per batch
  // Per decoder step: the embedding, each layer's gates and state, the context, the features,
  // and the scores and weights over the source (the fused kernels recompute tanh(W s + U h_j) in
  // the backward rather than keep it).
  const double step = b * (e + l * (g + h) + k + f + 2 * s);
  const double output = b * t * v;  // the logits (their softmax is rebuilt in the backward)
  double elements = encoder + attention_memory + t * step + output;
  if (c.transformer()) {
    // Per layer and position: q, k, v and their head-split copies, the context, the residuals and
    // norms, the feed-forward block; and the scores and weights of each head.
    const double d = static_cast<double>(c.d_model), ff = static_cast<double>(c.ffn),
                 heads = static_cast<double>(c.heads);
    elements = b * s * c.enc_layers * (16 * d + 3 * ff + 3 * heads * s) +
               b * t * c.dec_layers * (26 * d + 3 * ff + 3 * heads * (t + s)) + b * (s + t) * d +
               output;
  }
  MemoryNeed need;
  need.weights = static_cast<double>(c.parameter_count()) * weight_copies * kFloat;
  need.activations = elements * 2 * kFloat;  // values and gradients
  return need;
}

std::string memory_refusal(double need, std::string_view what) {
  static const uint64_t total = physical_memory_bytes();  // asked once: a system call
  if (total == 0 || need <= static_cast<double>(total)) return "";
  return fmt::format("{} ({}), more than this machine's {}", format_bytes(need), what,
                     format_bytes(static_cast<double>(total)));
}

}  // namespace tapestry::models
