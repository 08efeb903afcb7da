// Fuzzes the JSON a checkpoint's metadata holds: byte 0 picks config, vocabulary or preprocessing.
#include "tapestry/core/errors.h"
#include "tapestry/models/config.h"
#include "tapestry/models/preprocess.h"
#include "tapestry/models/vocab.h"
#include "tests/fuzz/fuzz_util.h"

using namespace tapestry;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view json = fuzz::as_text(data + 1, size - 1);
  try {
    switch (data[0] % 3) {
      case 0: {
        const auto c = models::Seq2SeqConfig::from_json(json);
        // What was read writes back to the same configuration.
        const auto again = models::Seq2SeqConfig::from_json(c.to_json());
        if (again.to_json() != c.to_json()) std::abort();
        (void)c.summary();
        break;
      }
      case 1: {
        const auto v = models::Vocab::from_json(json);
        if (models::Vocab::from_json(v.to_json()).tokens() != v.tokens()) std::abort();
        (void)v.decode(v.encode(v.tokens()));
        break;
      }
      case 2: {
        const auto p = models::Preprocess::from_json(json);
        if (models::Preprocess::from_json(p.to_json()).to_json() != p.to_json()) std::abort();
        (void)p.detokenize_target(p.tokenize_source(json));
        break;
      }
    }
  } catch (const ValueError&) {
  }
  return 0;
}
