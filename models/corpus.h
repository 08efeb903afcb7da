// Corpora from files: tab-separated pairs (the Tatoeba format) and parallel files, tokenised,
// filtered by length and split by seed; every malformed line is reported with its file and line.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tapestry/core/errors.h"
#include "tapestry/models/example.h"
#include "tapestry/models/text.h"
#include "tapestry/models/text_input.h"

namespace tapestry::models {

struct CorpusOptions {
  TextOptions text;
  // Pairs with more tokens than this on either side are dropped (0: keep all).
  int64_t max_len = 0;
  // The PyTorch tutorial's preprocessing instead of `text`: tutorial_normalize on both sides,
  // whitespace tokens, tutorial_keep on (English, other). TSV files only (English is column 1).
  bool tutorial = false;
  // TSV: translate column 2 into column 1 (the tutorial's French -> English) instead of 1 -> 2.
  bool reverse = false;
  // Keep each side untokenised, as one token holding the line (for a segmentation trained
  // afterwards on the text); `text` and `max_len` do not apply.
  bool raw = false;
};

struct Corpus {
  std::vector<Example> pairs;
  int64_t lines = 0;    // pairs read
  int64_t dropped = 0;  // removed by the length filter or the tutorial's filter
};

// Lines "source<TAB>target" or "source<TAB>target<TAB>attribution", read by read_lines. Throws
// DataError for what read_lines refuses (a missing or unreadable file, not a regular file, invalid
// UTF-8, a control character), a line without 2 or 3 columns, or an empty field (each naming the
// file and line), and for a file with no pairs left after filtering.
Corpus read_tsv(const std::string& path, const CorpusOptions& options);

// Line-aligned files. Throws DataError as above, and when the files' line counts differ (naming
// both files and both counts) or a line is empty.
Corpus read_parallel(const std::string& src_path, const std::string& tgt_path,
                     const CorpusOptions& options);

// Shuffles `pairs` with `seed` and cuts it into train, valid and test by the given fractions of the
// whole (test gets the rest). Throws ValueError for fractions outside [0,1] or summing above 1.
Splits split_corpus(std::vector<Example> pairs, double valid_fraction, double test_fraction,
                    uint64_t seed);

}  // namespace tapestry::models
