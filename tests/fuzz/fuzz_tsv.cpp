// Fuzzes models::read_tsv; the first byte picks the corpus options, the rest is the file.
#include "tapestry/models/corpus.h"
#include "tests/fuzz/fuzz_util.h"

using namespace tapestry;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  models::CorpusOptions options;
  options.text.lowercase = data[0] & 1;
  options.text.split_punctuation = data[0] & 2;
  options.tutorial = data[0] & 4;
  options.reverse = data[0] & 8;
  options.max_len = data[0] >> 4;
  const std::string path = fuzz::write_input("in.tsv", fuzz::as_text(data + 1, size - 1));
  try {
    models::Corpus c = models::read_tsv(path, options);
    if (c.pairs.empty() || c.lines < static_cast<int64_t>(c.pairs.size())) std::abort();
  } catch (const models::DataError&) {
  }
  return 0;
}
