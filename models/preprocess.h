// Preprocess: how a model's text becomes tokens and back (words, characters, the PyTorch
// tutorial's normalisation, or SentencePiece subwords), kept in the checkpoint so translation
// reads input as training did.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tapestry/models/subword.h"
#include "tapestry/models/text.h"
#include "tapestry/models/vocab.h"

namespace tapestry::models {

struct Preprocess {
  enum class Mode { words, chars, tutorial, subword };
  Mode mode = Mode::words;
  TextOptions text;  // words: both options; subword: lowercase only (applied before segmenting)
  // subword: the source and target segmentations; one shared model for a joint vocabulary.
  std::shared_ptr<const Subword> src_subword, tgt_subword;

  // A line of raw text -> tokens. chars: one token per character, a space becoming "_";
  // subword: SentencePiece's pieces ("▁Ein" "▁Mann").
  std::vector<std::string> tokenize_source(std::string_view line) const;
  std::vector<std::string> tokenize_target(std::string_view line) const;
  // Tokens -> a line: words joined by spaces; characters joined, "_" back to a space; pieces
  // joined by SentencePiece into plain text.
  std::string detokenize_target(const std::vector<std::string>& tokens) const;
  std::string detokenize_source(const std::vector<std::string>& tokens) const;

  // subword: the text the segmentation reads (and is trained on): the line, lower-cased if
  // text.lowercase.
  std::string subword_text(std::string_view line) const;

  bool joint() const { return mode == Mode::subword && src_subword == tgt_subword; }
  // subword: the vocabularies are the segmentations' pieces, in their ids.
  Vocab source_vocab() const;
  Vocab target_vocab() const;

  std::string to_json() const;
  static Preprocess from_json(std::string_view json);  // throws ValueError
  // "words, lower-cased, punctuation split"; "SentencePiece bpe, 8,000 joint pieces, cased"
  std::string describe() const;
};

// The vocabulary of a segmentation: its pieces in id order (ids 0..3 are Vocab's specials).
Vocab subword_vocab(const Subword& model);

}  // namespace tapestry::models
