// Corpus BLEU computed the way sacreBLEU 2.x does by default (13a tokens, exp smoothing, BLEU-4).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tapestry::models {

// The mteval-v13a tokenisation sacreBLEU applies by default: unescapes &quot; &amp; &lt; &gt;,
// drops <skipped>, splits off punctuation except '.' and ',' between digits and '-' after a
// non-digit, then splits on whitespace (Python's str.split(): also NBSP, U+2000..U+200A, ...).
std::vector<std::string> tokenize_13a(std::string_view line);

// Python's str.split() with no argument: splits on Unicode whitespace (str.isspace), drops
// empty pieces. Bytes that are not valid UTF-8 are kept as part of words.
std::vector<std::string> split_whitespace(std::string_view line);

// Python's str.rstrip() with no argument (Unicode whitespace), as sacreBLEU applies to each line.
std::string_view rstrip_whitespace(std::string_view line);

// Python's str.lower() on UTF-8 text: every one-to-one lowercase mapping of Unicode 14.0, and
// U+0130 -> "i" U+0307. Unlike Python, a word-final capital sigma becomes σ, not ς.
std::string lowercase_utf8(std::string_view text);

enum class BleuTokenizer { k13a, kNone };
// sacreBLEU's smoothing methods; kExp is its default for corpus BLEU.
enum class BleuSmooth { kNone, kFloor, kAddK, kExp };

struct BleuOptions {
  bool lowercase = false;
  BleuTokenizer tokenizer = BleuTokenizer::k13a;
  BleuSmooth smooth = BleuSmooth::kExp;
  // For kFloor and kAddK; empty means sacreBLEU's defaults (floor 0.1, add-k 1).
  std::optional<double> smooth_value{};
  // Average only over the n-gram orders the hypotheses have (sacreBLEU's effective_order).
  bool effective_order = false;
};

// Sufficient statistics of BLEU; add them up over sentences (corpus BLEU sums, never averages).
struct BleuStats {
  std::array<int64_t, 4> matches{};  // clipped n-gram matches, n = 1..4
  std::array<int64_t, 4> totals{};   // hypothesis n-grams, n = 1..4
  int64_t hyp_len = 0;
  int64_t ref_len = 0;  // per sentence the closest reference length (ties: the shorter)
  BleuStats& operator+=(const BleuStats& other);
};

// The statistics of one sentence from its tokens; refs_tokens holds one entry per reference
// (at least one). A hypothesis n-gram counts at most as often as it occurs in any one reference.
BleuStats bleu_stats(const std::vector<std::string>& hyp_tokens,
                     const std::vector<std::vector<std::string>>& refs_tokens);

// The statistics of one sentence from raw text: lower-cases and tokenises as the options say.
// Empty reference strings are skipped (sacreBLEU's variable number of references); throws
// ValueError if every reference is empty.
BleuStats segment_bleu_stats(std::string_view hyp, const std::vector<std::string_view>& refs,
                             const BleuOptions& options = {});

struct BleuScore {
  double score = 0;                    // 0..100
  std::array<double, 4> precisions{};  // percent, after smoothing
  double bp = 0;                       // brevity penalty
  double ratio = 0;                    // hyp_len / ref_len (0 if ref_len is 0)
  int64_t hyp_len = 0;
  int64_t ref_len = 0;
  // sacreBLEU's line, e.g. "BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944
  // hyp_len = 17 ref_len = 18)"; width is the number of decimals of the score.
  std::string str(int width = 2) const;
};

// BLEU from summed statistics (sacreBLEU's compute_bleu).
BleuScore bleu_from_stats(const BleuStats& stats, const BleuOptions& options = {});

// Why a corpus's BLEU is 0 (below 0.005), in one sentence, or "" when it is not 0: the output is
// empty; it has no n-grams of some order n <= 4 (every sentence shorter than n tokens), while
// BLEU-4 multiplies the four precisions; or not one n-gram of the output is in the references.
std::string bleu_zero_reason(const BleuStats& stats, const BleuOptions& options = {});

// Throws ValueError, its message starting with `caller` ("corpus_bleu"), unless refs has at least
// one stream, every stream has n_hyps lines, and every line has a non-empty reference. corpus_bleu
// and corpus_chrf check their references with it.
void check_reference_streams(std::string_view caller, size_t n_hyps,
                             const std::vector<std::vector<std::string>>& refs);

// refs[k][i] is line i of the k-th reference stream; every stream must be as long as hyps.
BleuStats corpus_bleu_stats(const std::vector<std::string>& hyps,
                            const std::vector<std::vector<std::string>>& refs,
                            const BleuOptions& options = {});
BleuScore corpus_bleu(const std::vector<std::string>& hyps,
                      const std::vector<std::vector<std::string>>& refs,
                      const BleuOptions& options = {});

// The nrefs field of sacreBLEU's signatures: the number of non-empty references per line, or
// "var" when it differs between lines.
std::string signature_nrefs(const std::vector<std::vector<std::string>>& refs);

// sacreBLEU's signature, e.g. "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:tapestry";
// nrefs is "var" when the number of non-empty references differs between lines.
std::string bleu_signature(const std::vector<std::vector<std::string>>& refs,
                           const BleuOptions& options = {});

}  // namespace tapestry::models
