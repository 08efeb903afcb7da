// Corpora: columns and aligned lines with file:line errors, tokenisation, filters and seeded
// splits.
#include "tapestry/models/corpus.h"

#include <fmt/format.h>

#include "tapestry/core/random.h"

namespace tapestry::models {

namespace {

bool blank(const std::string& s) {
  return s.find_first_not_of(" \t\r\n\v\f") == std::string::npos;
}

// Tokenises a pair (first and second column, or source and target file) with the options and
// applies the filters; returns false if it is dropped.
bool make_example(const std::string& src, const std::string& tgt, const CorpusOptions& o,
                  Example& e) {
  if (o.tutorial) {  // the English side, which the filter reads, is the first column
    const std::string s = tutorial_normalize(src), t = tutorial_normalize(tgt);
    if (!tutorial_keep(s, t)) return false;
    e.src = tokenize(s, {});
    e.tgt = tokenize(t, {});
  } else if (o.raw) {
    e.src = {src};
    e.tgt = {tgt};
    return true;
  } else {
    e.src = tokenize(src, o.text);
    e.tgt = tokenize(tgt, o.text);
  }
  if (e.src.empty() || e.tgt.empty()) return false;
  if (o.max_len > 0 && (static_cast<int64_t>(e.src.size()) > o.max_len ||
                        static_cast<int64_t>(e.tgt.size()) > o.max_len))
    return false;
  return true;
}

void require_pairs(const Corpus& c, const std::string& what) {
  if (c.lines == 0) throw DataError(fmt::format("{}: no sentence pairs (empty file)", what));
  if (c.pairs.empty())
    throw DataError(fmt::format("{}: all {} pairs were removed by the filters", what, c.lines));
}

}  // namespace

Corpus read_tsv(const std::string& path, const CorpusOptions& options) {
  std::vector<std::string> lines = read_lines(path);
  if (!lines.empty() && lines.back().empty()) lines.pop_back();  // a blank line ending the file
  Corpus c;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    const size_t number = i + 1;
    std::vector<std::string> cols;
    size_t start = 0;
    for (size_t tab; (tab = line.find('\t', start)) != std::string::npos; start = tab + 1)
      cols.push_back(line.substr(start, tab - start));
    cols.push_back(line.substr(start));
    if (cols.size() != 2 && cols.size() != 3)
      throw DataError(fmt::format(
          "{}:{}: expected 2 or 3 tab-separated columns (source, target, attribution), found {}",
          path, number, cols.size()));
    for (int k = 0; k < 2; ++k)
      if (blank(cols[k]))
        throw DataError(fmt::format("{}:{}: column {} ({}) is empty", path, number, k + 1,
                                    k == 0 ? "source" : "target"));
    ++c.lines;
    Example e;
    if (!make_example(cols[0], cols[1], options, e)) {
      ++c.dropped;
      continue;
    }
    if (options.reverse) std::swap(e.src, e.tgt);
    c.pairs.push_back(std::move(e));
  }
  require_pairs(c, path);
  return c;
}

Corpus read_parallel(const std::string& src_path, const std::string& tgt_path,
                     const CorpusOptions& options) {
  if (options.tutorial)
    throw ValueError("corpus: the tutorial preset reads a TSV file (English<TAB>other)");
  const std::vector<std::string> src = read_lines(src_path), tgt = read_lines(tgt_path);
  if (src.size() != tgt.size())
    throw DataError(fmt::format("{} has {} lines but {} has {}: parallel files must align",
                                src_path, src.size(), tgt_path, tgt.size()));
  Corpus c;
  for (size_t i = 0; i < src.size(); ++i) {
    if (blank(src[i])) throw DataError(fmt::format("{}:{}: empty line", src_path, i + 1));
    if (blank(tgt[i])) throw DataError(fmt::format("{}:{}: empty line", tgt_path, i + 1));
    ++c.lines;
    Example e;
    if (make_example(src[i], tgt[i], options, e))
      c.pairs.push_back(std::move(e));
    else
      ++c.dropped;
  }
  require_pairs(c, src_path + " and " + tgt_path);
  return c;
}

Splits split_corpus(std::vector<Example> pairs, double valid_fraction, double test_fraction,
                    uint64_t seed) {
  if (!(valid_fraction >= 0 && test_fraction >= 0 && valid_fraction + test_fraction <= 1))
    throw ValueError(
        fmt::format("split: valid {} and test {} fractions must be in [0, 1] and sum to at most 1",
                    valid_fraction, test_fraction));
  Rng rng(seed);
  for (size_t i = pairs.size(); i > 1; --i)
    std::swap(pairs[i - 1], pairs[static_cast<size_t>(rng.randint(static_cast<int64_t>(i)))]);
  const auto n = static_cast<double>(pairs.size());
  const auto n_valid = static_cast<size_t>(std::llround(n * valid_fraction));
  const auto n_test = static_cast<size_t>(std::llround(n * test_fraction));
  Splits s;
  auto it = pairs.begin();
  s.valid.assign(std::make_move_iterator(it), std::make_move_iterator(it + n_valid));
  it += n_valid;
  s.test.assign(std::make_move_iterator(it), std::make_move_iterator(it + n_test));
  it += n_test;
  s.train.assign(std::make_move_iterator(it), std::make_move_iterator(pairs.end()));
  return s;
}

}  // namespace tapestry::models
