// Fuzzes nn::load_safetensors and nn::read_checkpoint_metadata; what loads must save and reload.
#include <cstdlib>

#include "tapestry/nn/checkpoint.h"
#include "tests/fuzz/fuzz_util.h"

using namespace tapestry;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_input("in.safetensors", fuzz::as_text(data, size));
  nn::SafetensorsFile file;
  bool loaded = false;
  try {
    file = nn::load_safetensors(path);
    loaded = true;
  } catch (const nn::CheckpointError&) {
  }
  std::map<std::string, std::string> metadata;
  bool header_ok = false;
  try {
    metadata = nn::read_checkpoint_metadata(path);
    header_ok = true;
  } catch (const nn::CheckpointError&) {
  }
  if (loaded && (!header_ok || metadata != file.metadata)) std::abort();
  if (!loaded) return 0;

  // Every element is read (ASan checks the tensors' bounds), and the file saves and reloads alike.
  double sum = 0;
  for (const auto& [name, t] : file.tensors)
    for (int64_t i = 0; i < t.numel(); ++i) sum += t.at(i);
  (void)sum;
  const std::string again = fuzz::scratch_dir() + "/again.safetensors";
  nn::save_safetensors(again, file.tensors, file.metadata);
  const nn::SafetensorsFile back = nn::load_safetensors(again);
  if (back.metadata != file.metadata || back.tensors.size() != file.tensors.size()) std::abort();
  for (size_t i = 0; i < back.tensors.size(); ++i) {
    const auto& [name, t] = file.tensors[i];
    const auto& [name2, t2] = back.tensors[i];
    if (name != name2 || t.shape() != t2.shape() || t.dtype() != t2.dtype()) std::abort();
    for (int64_t k = 0; k < t.numel(); ++k) {
      const double a = t.at(k), b = t2.at(k);
      if (a != b && !(a != a && b != b)) std::abort();  // NaN reloads as NaN
    }
  }
  return 0;
}
