// Fuzzes models::read_parallel; byte 0 picks the options, the first NUL after it ends the source.
#include "tapestry/models/corpus.h"
#include "tests/fuzz/fuzz_util.h"

using namespace tapestry;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  models::CorpusOptions options;
  options.text.lowercase = data[0] & 1;
  options.text.split_punctuation = data[0] & 2;
  options.max_len = data[0] >> 4;
  std::string_view rest = fuzz::as_text(data + 1, size - 1);
  const size_t cut = std::min(rest.find('\0'), rest.size());
  const std::string src = fuzz::write_input("in.src", rest.substr(0, cut));
  const std::string tgt = fuzz::write_input("in.tgt", rest.substr(std::min(cut + 1, rest.size())));
  try {
    models::Corpus c = models::read_parallel(src, tgt, options);
    if (c.pairs.empty() || c.lines < static_cast<int64_t>(c.pairs.size())) std::abort();
  } catch (const models::DataError&) {
  }
  return 0;
}
