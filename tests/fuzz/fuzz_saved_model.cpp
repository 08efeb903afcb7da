// Fuzzes models::load_model: a checkpoint's header, its config, vocabularies and preprocessing.
#include "tapestry/models/saved_model.h"
#include "tapestry/nn/checkpoint.h"
#include "tests/fuzz/fuzz_util.h"

using namespace tapestry;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_input("model.safetensors", fuzz::as_text(data, size));
  try {
    models::SavedModel m = models::load_model(path);
    // A loaded model's vocabularies and preprocessing work on its own tokens.
    for (const auto& tok : m.src.tokens()) (void)m.src.id(tok);
    (void)m.tgt.decode(m.tgt.encode(m.tgt.tokens()));
    (void)m.preprocess.detokenize_target(m.preprocess.tokenize_source(m.preprocess.describe()));
  } catch (const nn::CheckpointError&) {
  }
  return 0;
}
