// The safetensors reader's checks: a file read by offset, and its header parsed and checked
// against the format and the file size before any offset in it is trusted.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tapestry/core/shape.h"
#include "tapestry/core/tensor.h"

namespace tapestry::nn::detail {

// The reference implementation's limit: larger headers are refused before they are parsed.
inline constexpr uint64_t kMaxHeaderBytes = 100'000'000;

// Throws CheckpointError "checkpoint '<path>': <why>" (the writer's errors too).
[[noreturn]] void fail(const std::string& path, const std::string& why);

// A regular file opened for reading (a directory, pipe or device is refused), read by offset.
class InputFile {
 public:
  explicit InputFile(std::string path);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }

  // Reads exactly n bytes at `offset`; a file that ends early (e.g. shrank since it was opened)
  // is reported as truncated.
  void read_at(void* dst, uint64_t n, uint64_t offset);

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// One tensor as the header describes it; offsets are relative to the data buffer.
struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;
};

struct Header {
  std::vector<Entry> entries;  // in header order
  std::map<std::string, std::string> metadata;
  uint64_t data_start;  // 8 + N
};

// The 8-byte length, the JSON header and every entry, checked: throws CheckpointError naming the
// file and the first problem (see load_safetensors).
Header read_header(InputFile& file);

}  // namespace tapestry::nn::detail
