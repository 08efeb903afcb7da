// Shared by the fuzz targets: a per-process scratch directory for readers that take a path.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

namespace tapestry::fuzz {

namespace fs = std::filesystem;

// BASE/tapestry-fuzz-<pid>, created on first use and removed when the process exits normally;
// BASE is $TAPESTRY_FUZZ_SCRATCH (tools/fuzz.sh removes it, so a crash leaves nothing behind), else
// /dev/shm, else the system's temporary directory.
inline const std::string& scratch_dir() {
  // Never destroyed: the exit handler below runs after static objects' destructors.
  static const std::string* const dir = [] {
    std::error_code ec;
    const char* env = std::getenv("TAPESTRY_FUZZ_SCRATCH");
    const fs::path base = env && *env                        ? fs::path(env)
                          : fs::is_directory("/dev/shm", ec) ? fs::path("/dev/shm")
                                                             : fs::temp_directory_path();
    const fs::path d = base / ("tapestry-fuzz-" + std::to_string(::getpid()));
    fs::create_directories(d);
    auto* path = new std::string(d.string());
    std::atexit([] {
      std::error_code ec2;
      fs::remove_all(scratch_dir(), ec2);
    });
    return path;
  }();
  return *dir;
}

// Writes `bytes` to scratch_dir()/name (replacing it) and returns the path.
inline std::string write_input(const std::string& name, std::string_view bytes) {
  const std::string path = scratch_dir() + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) std::abort();  // a full /dev/shm would make every input look the same
  return path;
}

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// `text` cut at every `sep`: "a\0b" -> {"a", "b"}; "" -> {}.
inline std::vector<std::string> split(std::string_view text, char sep) {
  std::vector<std::string> parts;
  if (text.empty()) return parts;
  size_t start = 0;
  while (true) {
    size_t end = text.find(sep, start);
    if (end == std::string_view::npos) {
      parts.emplace_back(text.substr(start));
      return parts;
    }
    parts.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
}

}  // namespace tapestry::fuzz
