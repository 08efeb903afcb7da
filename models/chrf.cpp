// chrF and chrF++ as sacreBLEU 2.x computes them: character and word n-gram F-scores.
#include "tapestry/models/chrf.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "tapestry/core/errors.h"
#include "tapestry/models/bleu.h"
#include "tapestry/models/text.h"

namespace tapestry::models {

namespace {

// One n-gram's text and how often it occurs.
using NgramCounts = std::unordered_map<std::string, int64_t>;

void check_options(const ChrfOptions& o) {
  if (o.char_order < 0 || o.word_order < 0 || o.char_order + o.word_order == 0)
    throw ValueError(fmt::format(
        "chrF: char_order {} and word_order {}: neither may be negative and one must be positive",
        o.char_order, o.word_order));
  if (!std::isfinite(o.beta) || o.beta < 0)
    throw ValueError(fmt::format("chrF: beta {} is not a finite number >= 0", o.beta));
}

size_t order_count(const ChrfOptions& o) {
  return static_cast<size_t>(o.char_order + o.word_order);
}

// Byte offsets where each character (code point) of text starts, then text.size(). A byte that is
// not valid UTF-8 counts as one character, as Python's surrogateescape decoding would have it.
std::vector<size_t> char_starts(std::string_view text) {
  std::vector<size_t> starts;
  for (size_t i = 0; i < text.size();) {
    starts.push_back(i);
    char32_t cp;
    size_t len = utf8_decode_at(text, i, cp);
    i += len ? len : 1;
  }
  starts.push_back(text.size());
  return starts;
}

// Counts of character n-grams of orders 1..max_order. An n-gram is keyed by its UTF-8 bytes: cut
// at character boundaries, equal bytes are equal characters.
std::vector<NgramCounts> char_ngrams(std::string_view text, int max_order) {
  const std::vector<size_t> starts = char_starts(text);
  const size_t chars = starts.size() - 1;
  std::vector<NgramCounts> counts(static_cast<size_t>(max_order));
  for (size_t n = 1; n <= counts.size(); ++n)
    for (size_t i = 0; i + n <= chars; ++i)
      ++counts[n - 1][std::string(text.substr(starts[i], starts[i + n] - starts[i]))];
  return counts;
}

// Counts of word n-grams of orders 1..max_order, keyed by the words joined with spaces (as
// sacreBLEU does; words hold no whitespace, so no two n-grams of one order share a key).
std::vector<NgramCounts> word_ngrams(const std::vector<std::string>& words, int max_order) {
  std::vector<NgramCounts> counts(static_cast<size_t>(max_order));
  for (size_t n = 1; n <= counts.size(); ++n) {
    for (size_t i = 0; i + n <= words.size(); ++i) {
      std::string key = words[i];
      for (size_t k = i + 1; k < i + n; ++k) key.append(" ").append(words[k]);
      ++counts[n - 1][key];
    }
  }
  return counts;
}

// All n-gram counts of one sentence: character orders, then word orders.
std::vector<NgramCounts> sentence_ngrams(std::string_view text, const ChrfOptions& o) {
  std::string lowered;
  if (o.lowercase) {
    lowered = lowercase_utf8(text);
    text = lowered;
  }
  std::string chars;
  if (o.whitespace) {
    chars = text;
  } else {
    // Python's "".join(text.split()): every Unicode whitespace character goes.
    for (const std::string& word : split_whitespace(text)) chars += word;
  }
  std::vector<NgramCounts> counts = char_ngrams(chars, o.char_order);
  if (o.word_order > 0) {
    // The words come from the text with its whitespace, whatever o.whitespace says.
    std::vector<NgramCounts> words = word_ngrams(chrf_words(text), o.word_order);
    counts.insert(counts.end(), std::make_move_iterator(words.begin()),
                  std::make_move_iterator(words.end()));
  }
  return counts;
}

ChrfCounts match_counts(const NgramCounts& hyp, const NgramCounts& ref) {
  ChrfCounts c;
  for (const auto& [gram, count] : ref) c.ref += count;
  // sacreBLEU counts no hypothesis n-grams of an order the reference has none of, so a reference
  // shorter than the order leaves the order out rather than making its precision 0.
  if (ref.empty()) return c;
  for (const auto& [gram, count] : hyp) {
    c.hyp += count;
    if (auto it = ref.find(gram); it != ref.end()) c.match += std::min(count, it->second);
  }
  return c;
}

std::vector<ChrfCounts> match_all(const std::vector<NgramCounts>& hyp,
                                  const std::vector<NgramCounts>& ref) {
  std::vector<ChrfCounts> orders;
  for (size_t n = 0; n < hyp.size(); ++n) orders.push_back(match_counts(hyp[n], ref[n]));
  return orders;
}

// sacreBLEU's _compute_f_score, 0..100, operation for operation.
double f_score(const std::vector<ChrfCounts>& orders, const ChrfOptions& o) {
  constexpr double kEps = 1e-16;
  const double factor = o.beta * o.beta;
  double eps_sum = 0, avg_prec = 0, avg_rec = 0;
  int effective_order = 0;
  for (const ChrfCounts& c : orders) {
    const double prec =
        c.hyp > 0 ? static_cast<double>(c.match) / static_cast<double>(c.hyp) : kEps;
    const double rec = c.ref > 0 ? static_cast<double>(c.match) / static_cast<double>(c.ref) : kEps;
    const double denom = factor * prec + rec;
    eps_sum += denom > 0 ? (1 + factor) * prec * rec / denom : kEps;
    if (c.hyp > 0 && c.ref > 0) {
      avg_prec += prec;
      avg_rec += rec;
      ++effective_order;
    }
  }
  if (o.eps_smoothing) return 100 * eps_sum / static_cast<double>(orders.size());
  if (effective_order == 0) return 0.0;
  avg_prec /= effective_order;
  avg_rec /= effective_order;
  if (avg_prec + avg_rec == 0) return 0.0;
  double score = (1 + factor) * avg_prec * avg_rec;
  score /= factor * avg_prec + avg_rec;
  return 100 * score;
}

}  // namespace

ChrfStats& ChrfStats::operator+=(const ChrfStats& other) {
  if (orders.empty()) orders.resize(other.orders.size());
  if (!other.orders.empty() && other.orders.size() != orders.size())
    throw ValueError(fmt::format("ChrfStats: cannot add statistics of {} orders to {} orders",
                                 other.orders.size(), orders.size()));
  for (size_t n = 0; n < other.orders.size(); ++n) {
    orders[n].hyp += other.orders[n].hyp;
    orders[n].ref += other.orders[n].ref;
    orders[n].match += other.orders[n].match;
  }
  return *this;
}

std::vector<std::string> chrf_words(std::string_view line) {
  // Python's string.punctuation. It is ASCII only, so looking at a word's first and last byte is
  // looking at its first and last character, and a one-byte word is the only one-character word
  // that could be split.
  constexpr std::string_view kPunct = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";
  auto is_punct = [&](char c) { return kPunct.find(c) != std::string_view::npos; };
  std::vector<std::string> words;
  for (std::string& w : split_whitespace(line)) {
    if (w.size() > 1 && is_punct(w.back())) {
      char last = w.back();
      w.pop_back();
      words.push_back(std::move(w));
      words.emplace_back(1, last);
    } else if (w.size() > 1 && is_punct(w.front())) {
      words.emplace_back(1, w.front());
      words.push_back(w.substr(1));
    } else {
      words.push_back(std::move(w));
    }
  }
  return words;
}

ChrfStats segment_chrf_stats(std::string_view hyp, const std::vector<std::string_view>& refs,
                             const ChrfOptions& options) {
  check_options(options);
  const std::vector<NgramCounts> hyp_ngrams = sentence_ngrams(hyp, options);
  ChrfStats best;
  double best_f = -1;
  for (std::string_view ref : refs) {
    if (ref.empty()) continue;
    std::vector<ChrfCounts> orders = match_all(hyp_ngrams, sentence_ngrams(ref, options));
    // Strictly better only: of references that score alike, the first one counts.
    if (double f = f_score(orders, options); f > best_f) {
      best_f = f;
      best.orders = std::move(orders);
    }
  }
  if (best_f < 0)
    throw ValueError(fmt::format("chrF: all {} references of the hypothesis are empty (hyp: '{}')",
                                 refs.size(), hyp));
  return best;
}

ChrfScore chrf_from_stats(const ChrfStats& stats, const ChrfOptions& options) {
  check_options(options);
  ChrfScore s;
  s.name = fmt::format("chrF{:g}{}", options.beta, std::string(options.word_order, '+'));
  if (stats.orders.empty()) return s;
  if (stats.orders.size() != order_count(options))
    throw ValueError(fmt::format(
        "chrf_from_stats: statistics of {} orders, but char_order {} + word_order {} is {}",
        stats.orders.size(), options.char_order, options.word_order, order_count(options)));
  s.score = f_score(stats.orders, options);
  return s;
}

std::string ChrfScore::str(int width) const {
  return fmt::format("{} = {:.{}f}", name, score, width);
}

ChrfStats corpus_chrf_stats(const std::vector<std::string>& hyps,
                            const std::vector<std::vector<std::string>>& refs,
                            const ChrfOptions& options) {
  check_options(options);
  check_reference_streams("corpus_chrf", hyps.size(), refs);
  ChrfStats total;
  total.orders.resize(order_count(options));
  std::vector<std::string_view> line_refs(refs.size());
  for (size_t i = 0; i < hyps.size(); ++i) {
    for (size_t k = 0; k < refs.size(); ++k) line_refs[k] = refs[k][i];
    total += segment_chrf_stats(hyps[i], line_refs, options);
  }
  return total;
}

ChrfScore corpus_chrf(const std::vector<std::string>& hyps,
                      const std::vector<std::vector<std::string>>& refs,
                      const ChrfOptions& options) {
  return chrf_from_stats(corpus_chrf_stats(hyps, refs, options), options);
}

std::string chrf_signature(const std::vector<std::vector<std::string>>& refs,
                           const ChrfOptions& options) {
  return fmt::format("nrefs:{}|case:{}|eff:{}|nc:{}|nw:{}|space:{}|version:tapestry",
                     signature_nrefs(refs), options.lowercase ? "lc" : "mixed",
                     options.eps_smoothing ? "no" : "yes", options.char_order, options.word_order,
                     options.whitespace ? "yes" : "no");
}

}  // namespace tapestry::models
