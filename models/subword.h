// Subword units through SentencePiece: training a BPE or unigram segmentation on a corpus side,
// segmenting text into pieces (deterministically, or sampled as a regulariser) and joining them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace tapestry::models {

enum class SubwordKind { bpe, unigram };
SubwordKind parse_subword_kind(std::string_view name);  // "bpe" or "unigram"; throws ValueError
const char* subword_kind_name(SubwordKind kind);

struct SubwordOptions {
  SubwordKind kind = SubwordKind::bpe;
  // Pieces in all, counting the 4 specials and the 256 byte pieces. A soft limit: SentencePiece
  // stops with fewer where the text has no more pieces to give.
  int64_t vocab_size = 8000;
};

// A trained segmentation. Its ids 0..3 are Tapestry's specials (<pad> <bos> <eos> <unk>, as in
// Vocab), so a piece's id is its Vocab id. It keeps every character as it is (no normalisation
// besides collapsing runs of spaces), and a character training never saw is spelled as its UTF-8
// bytes (<0xC3> <0xA9>), so every text survives segmenting and joining and no piece is <unk>.
class Subword {
 public:
  // Trains on `sentences` (one side of the training corpus, or both for a joint vocabulary).
  // Deterministic: the same sentences and options give the same model. Throws ValueError when
  // SentencePiece refuses (the message is SentencePiece's, prefixed with "subword:").
  static Subword train(const std::vector<std::string>& sentences, const SubwordOptions& options);
  // A model from SentencePiece's serialized model (what proto() returns) and the kind it was
  // trained as; throws ValueError.
  static Subword from_proto(std::string_view proto, SubwordKind kind);

  Subword(Subword&&) noexcept;
  Subword& operator=(Subword&&) noexcept;
  ~Subword();

  // The most likely segmentation: "Ein Mann" -> "▁Ein" "▁Mann".
  std::vector<std::string> encode(std::string_view text) const;
  // A sampled segmentation, for training: BPE-dropout with merges dropped at probability alpha
  // (bpe), or a segmentation drawn from the unigram lattice with smoothing alpha (unigram). The
  // draws come from SentencePiece's generator, which each thread seeds once (see
  // sample_segmentations).
  std::vector<std::string> sample(std::string_view text, double alpha) const;
  // Pieces -> text, the inverse of encode and sample.
  std::string decode(const std::vector<std::string>& pieces) const;

  // Every piece in id order (the Vocab of a model trained with this segmentation).
  std::vector<std::string> pieces() const;
  SubwordKind kind() const { return kind_; }
  // SentencePiece's serialized model: kept in the checkpoint.
  const std::string& proto() const { return proto_; }

 private:
  Subword() = default;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  std::string proto_;
  SubwordKind kind_ = SubwordKind::bpe;
};

// Sampled segmentations of `texts` with `alpha`, reproducible from `seed`: SentencePiece's
// generator is one per thread, seeded when the thread first draws, so the draws run on a new
// thread seeded with `seed`.
std::vector<std::vector<std::string>> sample_segmentations(const Subword& model,
                                                           const std::vector<std::string>& texts,
                                                           double alpha, uint64_t seed);

// Words of a segmentation, for display: [begin, end) ranges of pieces, a new word starting at
// every piece that begins with SentencePiece's "▁" (and at the first piece). Specials such as
// "<eos>" are words of their own.
std::vector<std::pair<size_t, size_t>> piece_words(const std::vector<std::string>& pieces);

// Attention over pieces (rows x cols, row-major) as attention over words: a word's columns are
// summed (the weight the row puts on the word), a word's rows averaged (each row sums to 1, so
// the merged rows do too).
std::vector<float> merge_piece_attention(const std::vector<float>& weights,
                                         const std::vector<std::pair<size_t, size_t>>& row_words,
                                         const std::vector<std::pair<size_t, size_t>>& col_words);

// Base64 (RFC 4648, with padding), for keeping a binary model in a checkpoint's text metadata.
std::string base64_encode(std::string_view bytes);
// Throws ValueError on a character outside the alphabet or a length that is not a multiple of 4.
std::string base64_decode(std::string_view text);

}  // namespace tapestry::models
