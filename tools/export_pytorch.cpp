// Export to PyTorch: the package's files written into a temporary directory, renamed into place.
#include "tools/export_pytorch.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "tapestry/core/errors.h"
#include "tapestry/core/file_io.h"
#include "tapestry/nn/checkpoint.h"

namespace tapestry::cli {

namespace fs = std::filesystem;

namespace {

// Writes `text` to a new file, every write checked (core/file_io.h), so a full disk is an error
// and never a truncated file.
void write_file(const fs::path& path, std::string_view text, bool executable = false) {
  write_file_atomic(path.string(), text);
  if (executable && ::chmod(path.c_str(), 0755) != 0)
    throw FileError(
        fmt::format("cannot make '{}' executable: {}", path.string(), std::strerror(errno)));
}

// JSON text for a person to read: indented, UTF-8 as it is, a final newline.
std::string pretty(const nlohmann::json& j, int indent) {
  return j.dump(indent) + "\n";
}

// The directory `out` will be: refuses one that exists and is not an empty directory.
fs::path check_target(const std::string& out) {
  fs::path target = fs::absolute(out).lexically_normal();
  if (!target.has_filename()) target = target.parent_path();  // "dir/" names dir
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(target, ec);
  if (fs::exists(st)) {
    if (!fs::is_directory(st))
      throw ValueError(
          fmt::format("'{}' exists and is not a directory: give a new directory", out));
    if (!fs::is_empty(target, ec) || ec)
      throw ValueError(fmt::format(
          "'{}' exists and is not empty: give a new or empty directory (nothing is overwritten)",
          out));
  }
  return target;
}

// A new directory beside `target`, named after it, for the files until they are complete.
fs::path make_temporary_beside(const fs::path& target) {
  const fs::path parent = target.parent_path();
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec) throw FileError(fmt::format("cannot create '{}': {}", parent.string(), ec.message()));
  for (int attempt = 0;; ++attempt) {
    const fs::path tmp =
        parent / fmt::format(".{}.tmp-{}-{}", target.filename().string(), ::getpid(), attempt);
    if (fs::create_directory(tmp, ec)) return tmp;
    if (ec || attempt >= 100)
      throw FileError(fmt::format("cannot create a temporary directory in '{}': {}",
                                  parent.string(), ec ? ec.message() : "too many attempts"));
  }
}

// Removes the temporary directory unless dismissed (when it has become the package).
class TemporaryDir {
 public:
  explicit TemporaryDir(fs::path path) : path_(std::move(path)) {}
  ~TemporaryDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  TemporaryDir(const TemporaryDir&) = delete;
  TemporaryDir& operator=(const TemporaryDir&) = delete;
  const fs::path& path() const { return path_; }
  void dismiss() { path_.clear(); }

 private:
  fs::path path_;
};

}  // namespace

ExportResult export_pytorch(const std::string& model_path, const std::string& out) {
  const fs::path target = check_target(out);
  models::SavedModel m = models::load_model(model_path);

  TemporaryDir tmp(make_temporary_beside(target));
  ExportResult result;
  auto write = [&](const char* name, std::string_view text, bool executable = false) {
    write_file(tmp.path() / name, text, executable);
    result.files.push_back(name);
  };
  write("model.py", pytorch_model_py(m.model->config().arch));
  write("preprocess.py", pytorch_preprocess_py());
  write("translate.py", pytorch_translate_py(), true);
  write("README.md", pytorch_readme(m, model_path));
  write("config.json", pretty(nlohmann::json::parse(m.model->config().to_json()), 2));
  write("src_vocab.json", pretty(m.src.tokens(), 1));
  write("tgt_vocab.json", pretty(m.tgt.tokens(), 1));
  nlohmann::json preprocess = nlohmann::json::parse(m.preprocess.to_json());
  if (m.preprocess.mode == models::Preprocess::Mode::subword) {
    // The SentencePiece models as files of their own, which Python's sentencepiece loads.
    write("source.model", m.preprocess.src_subword->proto());
    preprocess["subword"]["source"] = "source.model";
    if (!m.preprocess.joint()) {
      write("target.model", m.preprocess.tgt_subword->proto());
      preprocess["subword"]["target"] = "target.model";
    }
  }
  write("preprocess.json", pretty(preprocess, 2));

  nn::NamedTensors tensors;
  for (auto& [name, p] : m.model->named_parameters()) tensors.emplace_back(name, p->value);
  nn::save_safetensors((tmp.path() / "weights.safetensors").string(), tensors);
  result.files.push_back("weights.safetensors");

  // rename() replaces an empty directory and fails on one that has gained files meanwhile.
  std::error_code ec;
  fs::rename(tmp.path(), target, ec);
  if (ec)
    throw FileError(fmt::format("cannot move the package into '{}': {}", out,
                                ec == std::errc::directory_not_empty
                                    ? "it is no longer empty (nothing is overwritten)"
                                    : ec.message()));
  tmp.dismiss();
  result.dir = out;
  while (result.dir.size() > 1 && result.dir.back() == '/') result.dir.pop_back();
  return result;
}

}  // namespace tapestry::cli
