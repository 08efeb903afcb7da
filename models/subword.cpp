// Subword units: SentencePiece training, segmentation, sampling and joining, and base64.
#include "tapestry/models/subword.h"

#include <fmt/format.h>
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cstring>
#include <thread>
#include <unordered_map>

#include "tapestry/core/errors.h"
#include "tapestry/core/random.h"

namespace tapestry::models {

namespace {

// Hands SentencePiece's trainer the sentences from memory, so nothing is written to disk.
class Sentences : public sentencepiece::SentenceIterator {
 public:
  explicit Sentences(const std::vector<std::string>& s) : s_(s) {}
  bool done() const override { return i_ >= s_.size(); }
  void Next() override { ++i_; }
  const std::string& value() const override { return s_[i_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const std::vector<std::string>& s_;
  size_t i_ = 0;
};

void check(const sentencepiece::util::Status& status, std::string_view what) {
  if (!status.ok()) throw ValueError(fmt::format("subword: {}: {}", what, status.ToString()));
}

}  // namespace

SubwordKind parse_subword_kind(std::string_view name) {
  if (name == "bpe") return SubwordKind::bpe;
  if (name == "unigram") return SubwordKind::unigram;
  throw ValueError(fmt::format("subword: unknown kind '{}' (valid: bpe, unigram)", name));
}

const char* subword_kind_name(SubwordKind kind) {
  return kind == SubwordKind::bpe ? "bpe" : "unigram";
}

Subword::Subword(Subword&&) noexcept = default;
Subword& Subword::operator=(Subword&&) noexcept = default;
Subword::~Subword() = default;

Subword Subword::train(const std::vector<std::string>& sentences, const SubwordOptions& options) {
  if (sentences.empty()) throw ValueError("subword: no sentences to train on");
  const std::unordered_map<std::string, std::string> args = {
      {"model_type", subword_kind_name(options.kind)},
      {"vocab_size", std::to_string(options.vocab_size)},
      {"hard_vocab_limit", "false"},  // small corpora may hold fewer pieces than asked for
      // Every character is kept as it is and, if unseen, spelled in bytes: text round-trips.
      {"normalization_rule_name", "identity"},
      {"character_coverage", "1.0"},
      {"byte_fallback", "true"},
      // Tapestry's specials at Vocab's ids, so a piece's id is its vocabulary id.
      {"pad_id", "0"},
      {"bos_id", "1"},
      {"eos_id", "2"},
      {"unk_id", "3"},
      {"pad_piece", "<pad>"},
      {"bos_piece", "<bos>"},
      {"eos_piece", "<eos>"},
      {"unk_piece", "<unk>"},
      // Every sentence, in order, on a fixed number of threads: the unigram trainer's sums are
      // split by thread, so a machine-dependent count would change the model.
      {"input_sentence_size", "0"},
      {"shuffle_input_sentence", "false"},
      {"num_threads", "4"},
      {"minloglevel", "2"}};  // no progress lines on stderr
  Sentences it(sentences);
  std::string proto;
  check(sentencepiece::SentencePieceTrainer::Train(args, &it, &proto), "training");
  return from_proto(proto, options.kind);
}

Subword Subword::from_proto(std::string_view proto, SubwordKind kind) {
  Subword s;
  s.sp_ = std::make_unique<sentencepiece::SentencePieceProcessor>();
  check(s.sp_->LoadFromSerializedProto(proto), "reading the model");
  s.proto_ = std::string(proto);
  s.kind_ = kind;
  // Models from elsewhere may put their specials at other ids; Tapestry's ids need these.
  static const char* const specials[] = {"<pad>", "<bos>", "<eos>", "<unk>"};
  for (int id = 0; id < 4; ++id)
    if (s.sp_->GetPieceSize() <= id || s.sp_->IdToPiece(id) != specials[id])
      throw ValueError(fmt::format("subword: the model's piece {} is not {}", id, specials[id]));
  return s;
}

std::vector<std::string> Subword::encode(std::string_view text) const {
  std::vector<std::string> pieces;
  check(sp_->Encode(text, &pieces), "segmenting");
  return pieces;
}

std::vector<std::string> Subword::sample(std::string_view text, double alpha) const {
  std::vector<std::string> pieces;
  // nbest_size -1: BPE-dropout for BPE, sampling from the whole lattice for unigram.
  check(sp_->SampleEncode(text, -1, static_cast<float>(alpha), &pieces), "sampling");
  return pieces;
}

std::string Subword::decode(const std::vector<std::string>& pieces) const {
  std::string text;
  check(sp_->Decode(pieces, &text), "joining");
  return text;
}

std::vector<std::string> Subword::pieces() const {
  std::vector<std::string> out;
  out.reserve(static_cast<size_t>(sp_->GetPieceSize()));
  for (int id = 0; id < sp_->GetPieceSize(); ++id) out.push_back(sp_->IdToPiece(id));
  return out;
}

std::vector<std::vector<std::string>> sample_segmentations(const Subword& model,
                                                           const std::vector<std::string>& texts,
                                                           double alpha, uint64_t seed) {
  std::vector<std::vector<std::string>> out(texts.size());
  // SentencePiece reserves seed 0xFFFFFFFF for "from std::random_device".
  auto seed32 = static_cast<unsigned>(counter_hash32(seed, 0x5eed));
  if (seed32 == 0xFFFFFFFFu) seed32 = 0;
  sentencepiece::SetRandomGeneratorSeed(seed32);
  std::exception_ptr error;
  std::thread worker([&] {
    try {
      for (size_t i = 0; i < texts.size(); ++i) out[i] = model.sample(texts[i], alpha);
    } catch (...) {
      error = std::current_exception();
    }
  });
  worker.join();
  if (error) std::rethrow_exception(error);
  return out;
}

std::vector<std::pair<size_t, size_t>> piece_words(const std::vector<std::string>& pieces) {
  constexpr std::string_view kWordStart = "\xE2\x96\x81";  // U+2581 ▁
  const auto special = [](const std::string& p) {
    return p.size() > 2 && p.front() == '<' && p.back() == '>' && !p.starts_with("<0x");
  };
  std::vector<std::pair<size_t, size_t>> words;
  for (size_t k = 0; k < pieces.size(); ++k) {
    const bool starts =
        k == 0 || pieces[k].starts_with(kWordStart) || special(pieces[k]) || special(pieces[k - 1]);
    if (starts)
      words.emplace_back(k, k + 1);
    else
      words.back().second = k + 1;
  }
  return words;
}

std::vector<float> merge_piece_attention(const std::vector<float>& weights,
                                         const std::vector<std::pair<size_t, size_t>>& row_words,
                                         const std::vector<std::pair<size_t, size_t>>& col_words) {
  const size_t cols = col_words.empty() ? 0 : col_words.back().second;
  const size_t rows = row_words.empty() ? 0 : row_words.back().second;
  if (weights.size() != rows * cols)
    throw ValueError(fmt::format("merge_piece_attention: {} weights for {} x {} pieces",
                                 weights.size(), rows, cols));
  std::vector<float> out;
  out.reserve(row_words.size() * col_words.size());
  for (const auto& [r0, r1] : row_words)
    for (const auto& [c0, c1] : col_words) {
      double sum = 0;
      for (size_t r = r0; r < r1; ++r)
        for (size_t c = c0; c < c1; ++c) sum += weights[r * cols + c];
      out.push_back(static_cast<float>(sum / static_cast<double>(r1 - r0)));
    }
  return out;
}

namespace {
constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
}

std::string base64_encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t v = 0;
    for (size_t k = 0; k < 3; ++k)
      v = (v << 8) | (k < n ? static_cast<unsigned char>(bytes[i + k]) : 0u);
    for (size_t k = 0; k < 4; ++k) out += k <= n ? kAlphabet[(v >> (18 - 6 * k)) & 63] : '=';
  }
  return out;
}

std::string base64_decode(std::string_view text) {
  if (text.size() % 4 != 0)
    throw ValueError(fmt::format("base64: length {} is not a multiple of 4", text.size()));
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    uint32_t v = 0;
    int pad = 0;
    for (size_t k = 0; k < 4; ++k) {
      const char c = text[i + k];
      const char* at = c == '=' ? nullptr : std::strchr(kAlphabet, c);
      const bool last_group = i + 4 == text.size();
      if (c == '=' && last_group && k >= 2 && (k == 3 || text[i + 3] == '=')) {
        ++pad;
        v <<= 6;
        continue;
      }
      if (at == nullptr || c == '\0' || pad > 0)
        throw ValueError(fmt::format("base64: character {} is not in the alphabet", i + k));
      v = (v << 6) | static_cast<uint32_t>(at - kAlphabet);
    }
    for (int k = 0; k < 3 - pad; ++k) out += static_cast<char>((v >> (16 - 8 * k)) & 0xFF);
  }
  return out;
}

}  // namespace tapestry::models
