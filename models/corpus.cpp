// Corpora: line reading with file:line errors, tokenisation, filters and seeded splits.
#include "tapestry/models/corpus.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "tapestry/core/random.h"

namespace tapestry::models {

namespace {

std::ifstream open(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  return in;
}

// The next line without its '\n' (and a '\r' before it); false at the end of the file.
bool next_line(std::ifstream& in, std::string& line) {
  if (!std::getline(in, line)) return false;
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return true;
}

void check_utf8(const std::string& path, int64_t number, const std::string& line) {
  if (auto at = invalid_utf8_at(line))
    throw DataError(
        fmt::format("{}:{}: invalid UTF-8 at byte {} of the line", path, number, *at + 1));
}

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
  std::ifstream in = open(path);
  Corpus c;
  std::string line;
  for (int64_t number = 1; next_line(in, line); ++number) {
    if (line.empty() && in.peek() == EOF) break;  // a final newline
    check_utf8(path, number, line);
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
  std::ifstream src = open(src_path), tgt = open(tgt_path);
  Corpus c;
  std::string s, t;
  int64_t number = 0;
  while (true) {
    const bool has_s = next_line(src, s), has_t = next_line(tgt, t);
    if (!has_s && !has_t) break;
    ++number;
    if (has_s != has_t) {
      // Count the rest of the longer file for the message.
      int64_t longer = number;
      std::ifstream& rest = has_s ? src : tgt;
      std::string skip;
      while (next_line(rest, skip)) ++longer;
      throw DataError(fmt::format("{} has {} lines but {} has {}: parallel files must align",
                                  src_path, has_s ? longer : number - 1, tgt_path,
                                  has_t ? longer : number - 1));
    }
    check_utf8(src_path, number, s);
    check_utf8(tgt_path, number, t);
    if (blank(s)) throw DataError(fmt::format("{}:{}: empty line", src_path, number));
    if (blank(t)) throw DataError(fmt::format("{}:{}: empty line", tgt_path, number));
    ++c.lines;
    Example e;
    if (make_example(s, t, options, e))
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
