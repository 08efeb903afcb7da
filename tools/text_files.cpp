// Text files: sacreBLEU's lines through the shared line reader; model paths; output paths.
#include "tools/text_files.h"

#include <fmt/format.h>

#include <filesystem>

#include "tapestry/core/errors.h"
#include "tapestry/models/bleu.h"
#include "tapestry/models/text_input.h"
#include "tools/cli.h"

namespace tapestry::cli {

std::vector<std::string> read_text_lines(const std::string& path, bool allow_empty) {
  std::vector<std::string> lines = models::read_lines(path);
  if (lines.empty() && !allow_empty) {
    const std::string name = path == models::kStdinPath ? std::string(models::kStdinName) : path;
    throw Error(fmt::format("'{}' is empty: no lines", name));
  }
  for (std::string& line : lines) line.resize(models::rstrip_whitespace(line).size());
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
  // Checked before the checkpoint reader opens it: a named pipe would wait for a writer.
  if (!fs::is_regular_file(dir_or_file, ec)) {
    const std::string kind = models::special_file_kind(dir_or_file);
    throw Error(fmt::format("model '{}' is {}: give a run directory or a .safetensors file",
                            dir_or_file, kind.empty() ? "not a regular file" : kind));
  }
  return dir_or_file;
}

void check_output_file(const std::string& flag, const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (fs::is_directory(st))
    throw UsageError{fmt::format(
        "{} '{}' is a directory: give the name of the file to write (nothing is written into "
        "or over a directory)",
        flag, path)};
  if (fs::exists(st) && !fs::is_regular_file(st)) {
    const std::string kind = models::special_file_kind(path);
    throw UsageError{fmt::format(
        "{} '{}' is {}: the file is written whole and renamed into place, which would replace "
        "it; give a regular file's name",
        flag, path, kind.empty() ? "not a regular file" : kind)};
  }
  fs::path parent = fs::path(path).parent_path();
  if (parent.empty()) parent = ".";
  if (!fs::is_directory(parent, ec))
    throw UsageError{
        fmt::format("{} '{}': the directory '{}' does not exist", flag, path, parent.string())};
}

}  // namespace tapestry::cli
