// Checkpoints in the safetensors format: named tensors plus string metadata, written atomically
// and loaded only after every byte of the header has been checked.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tapestry/core/errors.h"
#include "tapestry/core/tensor.h"
#include "tapestry/nn/module.h"

namespace tapestry::nn {

// A checkpoint file that cannot be read, written or trusted. The message names the file and the
// reason, e.g. "checkpoint 'm.safetensors': tensor 'w': unsupported dtype "F16" (supported: F32,
// F64)".
class CheckpointError : public Error {
 public:
  using Error::Error;
};

// Named tensors in a chosen order; nn::OptimizerState is the same type.
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// What a safetensors file holds: its tensors in header order and its "__metadata__" map.
struct SafetensorsFile {
  NamedTensors tensors;
  std::map<std::string, std::string> metadata;
};

// The safetensors layout (github.com/huggingface/safetensors): an 8-byte little-endian header
// length N, N bytes of UTF-8 JSON {"__metadata__": {str: str}, "<name>": {"dtype": "F32"|"F64",
// "shape": [...], "data_offsets": [begin, end]}, ...} padded with spaces to a multiple of 8, then
// the raw little-endian data, each tensor's bytes contiguous and the tensors packed without gaps.
// The header lists tensors in the caller's order; the data puts F64 tensors before F32 ones so
// every tensor starts aligned to its element size. "__metadata__" is left out when empty.
//
// Writes `path + ".tmp.<pid>"` next to `path`, fsyncs it and renames it over `path`, so `path`
// holds either its old contents or the complete new file. Throws ValueError (nothing written) on
// an undefined tensor, a duplicated or reserved ("__metadata__") name, or a name or metadata
// string that is not valid UTF-8; CheckpointError naming the path and the system's reason when
// the file cannot be written (the temporary file is removed, the old file is untouched).
void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// Reads a whole file. Every entry is checked against the format and the file size before any data
// is read: throws CheckpointError naming the file and the first problem (missing or unreadable
// file, truncation, a header over 100 MB, invalid JSON or JSON nested over 128 levels (both
// limits are the reference implementation's), a malformed entry, an unsupported dtype,
// offsets that disagree with the shape, run past the data, overlap or leave bytes unclaimed, a
// duplicated key, metadata that is not a string-to-string map).
SafetensorsFile load_safetensors(const std::string& path);

// A module's parameters under their dotted names (Module::named_parameters), with `metadata`.
void save_checkpoint(const std::string& path, Module& module,
                     const std::map<std::string, std::string>& metadata = {});

// Loads the parameters saved by save_checkpoint into `module` and returns the file's metadata.
// The file must hold exactly the module's parameters, with the same shapes and dtypes; otherwise
// throws CheckpointError listing every missing, unexpected or mismatched tensor. Nothing is
// copied until the whole file has been read and checked, so on any error the module is unchanged.
std::map<std::string, std::string> load_checkpoint(const std::string& path, Module& module);

// The metadata of a checkpoint, reading the header only (the header is checked as in
// load_safetensors; the tensor data is not read).
std::map<std::string, std::string> read_checkpoint_metadata(const std::string& path);

// What a safetensors file's header says, without its data: each tensor's name, dtype and shape
// in header order, and the metadata. Checked as in load_safetensors (so the shapes are backed by
// the file's bytes); nothing the size of a tensor is allocated.
struct TensorInfo {
  std::string name;
  DType dtype;
  Shape shape;
};
struct SafetensorsHeader {
  std::vector<TensorInfo> tensors;
  std::map<std::string, std::string> metadata;
  uint64_t file_bytes = 0;
};
SafetensorsHeader read_safetensors_header(const std::string& path);

// "F32" or "F64", as safetensors names them.
const char* safetensors_dtype(DType dtype);

}  // namespace tapestry::nn
