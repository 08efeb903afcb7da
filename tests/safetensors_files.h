// Safetensors files for the checkpoint tests: a scratch directory of the process's own, files
// written byte for byte, and the error that loading one must throw.
#pragma once

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tapestry/nn/checkpoint.h"

namespace tapestry::test {

namespace fs = std::filesystem;

// A directory of this process's own, removed when the tests end.
struct ScratchDir {
  fs::path path = fs::temp_directory_path() / ("tapestry_checkpoint_" + std::to_string(getpid()));
  ScratchDir() { fs::create_directories(path); }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};
inline fs::path scratch(const std::string& name) {
  static ScratchDir dir;
  return dir.path / name;
}

inline std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}
inline fs::path write_bytes(const std::string& name, const std::string& bytes) {
  fs::path p = scratch(name);
  std::ofstream(p, std::ios::binary) << bytes;
  return p;
}

// n as 8 little-endian bytes, least significant first.
inline std::string le64(uint64_t n) {
  std::string s;
  for (int i = 0; i < 8; ++i) s += static_cast<char>((n >> (8 * i)) & 0xff);
  return s;
}

// A safetensors file assembled by hand: the header's length, the header, the data.
inline fs::path write_safetensors(const std::string& name, const std::string& header,
                                  const std::string& data) {
  return write_bytes(name, le64(header.size()) + header + data);
}

// The message of the CheckpointError that reading `p` throws; the header-only reader must refuse
// the file too. Fails the test if the file loads.
inline std::string load_error(const fs::path& p) {
  REQUIRE_THROWS_AS(nn::read_checkpoint_metadata(p.string()), nn::CheckpointError);
  try {
    nn::load_safetensors(p.string());
  } catch (const nn::CheckpointError& e) {
    std::string msg = e.what();
    REQUIRE_THAT(msg, Catch::Contains("checkpoint '" + p.string() + "'"));
    return msg;
  }
  FAIL("loaded " << p << " without an error");
  return "";
}

}  // namespace tapestry::test
