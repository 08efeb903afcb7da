// chrF and chrF++ computed the way sacreBLEU 2.x does (by default chrF2: character 6-grams, beta
// 2).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tapestry::models {

// sacreBLEU's CHRF parameters, with its defaults; word_order 2 is chrF++.
struct ChrfOptions {
  int char_order = 6;  // character n-grams of orders 1..char_order
  int word_order = 0;  // word n-grams of orders 1..word_order
  double beta = 2;     // recall weighs beta times as much as precision
  bool lowercase = false;
  bool whitespace = false;  // keep whitespace in the character n-grams (sacreBLEU removes it)
  // Average the F-scores of all orders, with 1e-16 for undefined ones (chrF++.py, NLTK, Moses),
  // instead of sacreBLEU's default: one F-score of the precisions and recalls averaged over the
  // orders that both hypothesis and reference have.
  bool eps_smoothing = false;
};

// The n-gram counts of one order.
struct ChrfCounts {
  int64_t hyp = 0;    // hypothesis n-grams (0 when the reference has none of this order)
  int64_t ref = 0;    // reference n-grams
  int64_t match = 0;  // hypothesis n-grams found in the reference, each at most as often
};

// Sufficient statistics of chrF: add them up over sentences (corpus chrF sums, never averages).
struct ChrfStats {
  // Character orders 1..char_order, then word orders 1..word_order.
  std::vector<ChrfCounts> orders;
  // Adds count by count; an empty side takes the other's orders. Throws ValueError when both have
  // orders but not as many.
  ChrfStats& operator+=(const ChrfStats& other);
};

// The words of chrF++'s word n-grams: split on whitespace, then one ASCII punctuation character
// split off the end of a word, or else off its start ("(hi)" gives "(hi" and ")", "." stays).
std::vector<std::string> chrf_words(std::string_view line);

// The statistics of one sentence. Empty references are skipped (a variable number of references);
// of the others, the one with the best sentence chrF counts (the first of equals), as sacreBLEU
// picks it. Throws ValueError if every reference is empty or the options are invalid.
ChrfStats segment_chrf_stats(std::string_view hyp, const std::vector<std::string_view>& refs,
                             const ChrfOptions& options = {});

struct ChrfScore {
  double score = 0;  // 0..100
  std::string name;  // "chrF2", "chrF2++" for word_order 2
  // sacreBLEU's line, e.g. "chrF2 = 59.73"; width is the number of decimals.
  std::string str(int width = 2) const;
};

// chrF from summed statistics; stats without orders (an empty corpus) score 0.
ChrfScore chrf_from_stats(const ChrfStats& stats, const ChrfOptions& options = {});

// refs[k][i] is line i of the k-th reference stream, as in corpus_bleu.
ChrfStats corpus_chrf_stats(const std::vector<std::string>& hyps,
                            const std::vector<std::vector<std::string>>& refs,
                            const ChrfOptions& options = {});
ChrfScore corpus_chrf(const std::vector<std::string>& hyps,
                      const std::vector<std::vector<std::string>>& refs,
                      const ChrfOptions& options = {});

// sacreBLEU's signature, e.g. "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:tapestry"
// (eff:yes unless eps_smoothing).
std::string chrf_signature(const std::vector<std::vector<std::string>>& refs,
                           const ChrfOptions& options = {});

}  // namespace tapestry::models
