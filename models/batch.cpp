// Batches: encoding, padding and length-bucketed shuffling.
#include "tapestry/models/batch.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "tapestry/core/errors.h"

namespace tapestry::models {

std::vector<EncodedPair> encode_pairs(std::span<const Example> examples, const Vocab& src,
                                      const Vocab& tgt) {
  std::vector<EncodedPair> out;
  out.reserve(examples.size());
  for (const auto& e : examples) out.push_back({src.encode(e.src), tgt.encode(e.tgt)});
  return out;
}

int64_t Batch::target_tokens() const {
  return std::accumulate(tgt_lengths.begin(), tgt_lengths.end(), int64_t{0});
}

Batch make_batch(std::span<const EncodedPair> pairs, std::span<const int64_t> indices) {
  Batch b;
  b.size = static_cast<int64_t>(indices.size());
  for (int64_t i : indices) {
    if (i < 0 || i >= static_cast<int64_t>(pairs.size()))
      throw IndexError(fmt::format("batch: pair {} outside [0, {})", i, pairs.size()));
    const auto& p = pairs[static_cast<size_t>(i)];
    if (p.src.empty()) throw ValueError(fmt::format("batch: pair {} has an empty source", i));
    b.src_len = std::max<int64_t>(b.src_len, static_cast<int64_t>(p.src.size()));
    b.tgt_len = std::max<int64_t>(b.tgt_len, static_cast<int64_t>(p.tgt.size()) + 1);
  }
  b.src.assign(static_cast<size_t>(b.size * b.src_len), Vocab::kPad);
  b.tgt_in.assign(static_cast<size_t>(b.size * b.tgt_len), Vocab::kPad);
  b.tgt_out.assign(static_cast<size_t>(b.size * b.tgt_len), Vocab::kPad);
  for (int64_t r = 0; r < b.size; ++r) {
    const auto& p = pairs[static_cast<size_t>(indices[r])];
    std::copy(p.src.begin(), p.src.end(), b.src.begin() + r * b.src_len);
    int32_t* in = b.tgt_in.data() + r * b.tgt_len;
    int32_t* out = b.tgt_out.data() + r * b.tgt_len;
    in[0] = Vocab::kBos;
    const auto n = static_cast<int64_t>(p.tgt.size());
    for (int64_t t = 0; t < n; ++t) {
      in[t + 1] = p.tgt[t];
      out[t] = p.tgt[t];
    }
    out[n] = Vocab::kEos;
    b.src_lengths.push_back(static_cast<int64_t>(p.src.size()));
    b.tgt_lengths.push_back(n + 1);
    b.index.push_back(indices[r]);
  }
  return b;
}

Batch slice_rows(const Batch& batch, int64_t begin, int64_t count) {
  Batch out;
  slice_rows_into(batch, begin, count, out);
  return out;
}

void slice_rows_into(const Batch& batch, int64_t begin, int64_t count, Batch& out) {
  if (begin < 0 || count < 0 || begin + count > batch.size)
    throw IndexError(
        fmt::format("batch: rows [{}, {}) outside [0, {})", begin, begin + count, batch.size));
  for (auto* v : {&out.src, &out.tgt_in, &out.tgt_out}) v->clear();
  for (auto* v : {&out.src_lengths, &out.tgt_lengths, &out.index}) v->clear();
  out.size = count;
  out.src_len = out.tgt_len = 0;
  for (int64_t r = begin; r < begin + count; ++r) {
    out.src_len = std::max(out.src_len, batch.src_lengths[r]);
    out.tgt_len = std::max(out.tgt_len, batch.tgt_lengths[r]);
  }
  for (int64_t r = begin; r < begin + count; ++r) {
    const int32_t* s = batch.src.data() + r * batch.src_len;
    out.src.insert(out.src.end(), s, s + out.src_len);
    const int32_t* in = batch.tgt_in.data() + r * batch.tgt_len;
    out.tgt_in.insert(out.tgt_in.end(), in, in + out.tgt_len);
    const int32_t* o = batch.tgt_out.data() + r * batch.tgt_len;
    out.tgt_out.insert(out.tgt_out.end(), o, o + out.tgt_len);
    out.src_lengths.push_back(batch.src_lengths[r]);
    out.tgt_lengths.push_back(batch.tgt_lengths[r]);
    out.index.push_back(batch.index[r]);
  }
}

std::vector<std::vector<int64_t>> make_batches(std::span<const EncodedPair> pairs,
                                               int64_t batch_size, Rng* rng) {
  if (batch_size < 1)
    throw ValueError(fmt::format("batches: batch size must be at least 1, got {}", batch_size));
  const auto n = static_cast<int64_t>(pairs.size());
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  auto shuffle = [&](auto begin, auto end) {
    for (auto i = end - begin - 1; i > 0; --i) std::swap(begin[i], begin[rng->randint(i + 1)]);
  };
  auto by_length = [&](int64_t a, int64_t b) {
    return pairs[static_cast<size_t>(a)].src.size() < pairs[static_cast<size_t>(b)].src.size();
  };
  if (rng) {
    shuffle(order.begin(), order.end());
    const int64_t chunk = batch_size * 50;
    for (int64_t s = 0; s < n; s += chunk)
      std::stable_sort(order.begin() + s, order.begin() + std::min(n, s + chunk), by_length);
  } else {
    std::stable_sort(order.begin(), order.end(), by_length);
  }
  std::vector<std::vector<int64_t>> batches;
  for (int64_t s = 0; s < n; s += batch_size)
    batches.emplace_back(order.begin() + s, order.begin() + std::min(n, s + batch_size));
  if (rng) shuffle(batches.begin(), batches.end());
  return batches;
}

}  // namespace tapestry::models
