// Text files: whole-file reads split into sacreBLEU's lines; model paths.
#include "tools/text_files.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "tapestry/core/errors.h"
#include "tapestry/models/bleu.h"

namespace tapestry::cli {

std::vector<std::string> read_text_lines(const std::string& path, bool allow_empty) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw Error(fmt::format("cannot read '{}': Is a directory", path));
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"),
                                                       &std::fclose);
  if (!file) throw Error(fmt::format("cannot open '{}': {}", path, std::strerror(errno)));
  std::string text;
  char buffer[1 << 16];
  size_t got;
  while ((got = std::fread(buffer, 1, sizeof buffer, file.get())) > 0) text.append(buffer, got);
  if (std::ferror(file.get()))
    throw Error(fmt::format("cannot read '{}': {}", path, std::strerror(errno)));
  if (text.empty() && !allow_empty) throw Error(fmt::format("'{}' is empty: no lines", path));

  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + start, end - start);
    lines.emplace_back(models::rstrip_whitespace(line));
    start = end + 1;
  }
  return lines;
}

std::string model_file(const std::string& dir_or_file) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(dir_or_file, ec)) {
    const std::string path = dir_or_file + "/model.safetensors";
    if (!fs::exists(path, ec))
      throw Error(fmt::format("'{}' has no model.safetensors: not a training run's directory",
                              dir_or_file));
    return path;
  }
  if (!fs::exists(dir_or_file, ec))
    throw Error(
        fmt::format("model '{}' does not exist (give a run directory or a .safetensors "
                    "file)",
                    dir_or_file));
  return dir_or_file;
}

}  // namespace tapestry::cli
