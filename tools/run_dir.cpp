// RunDir: file layout, atomic writes and the resumable state (parameters plus optimizer slots).
#include "tools/run_dir.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tapestry/models/saved_model.h"
#include "tapestry/models/text_input.h"
#include "tapestry/nn/checkpoint.h"

namespace tapestry::cli {

namespace fs = std::filesystem;

std::string read_file(const std::string& path) {
  // Refused from its stat: a named pipe would block the read, a device never end it.
  if (const std::string kind = models::special_file_kind(path); !kind.empty())
    throw Error(fmt::format("'{}' is {}, not a regular file", path, kind));
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error(fmt::format("cannot read '{}': {}", path,
                            errno != 0 ? std::strerror(errno) : "it cannot be opened"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

RunDir RunDir::create(const std::string& dir) {
  check_new(dir);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error(fmt::format("cannot create '{}': {}", dir, ec.message()));
  return RunDir(dir);
}

void RunDir::check_new(const std::string& dir) {
  std::error_code ec;
  if (fs::exists(dir + "/model.safetensors", ec) || fs::exists(dir + "/command.json", ec))
    throw Error(fmt::format(
        "'{}' already holds a run: continue it with --resume {} or choose another --out", dir,
        dir));
  if (fs::exists(dir, ec)) {
    if (!fs::is_directory(dir, ec))
      throw Error(fmt::format("--out '{}' exists and is not a directory", dir));
    if (!fs::is_empty(dir, ec))
      throw Error(fmt::format(
          "--out '{}' holds other files and is not a Tapestry run: choose another --out (a run "
          "never writes over a directory's files)",
          dir));
  }
}

RunDir RunDir::open(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw Error(fmt::format("'{}' is not a run directory", dir));
  if (!fs::exists(dir + "/command.json", ec))
    throw Error(fmt::format("'{}' has no command.json: not a run to resume", dir));
  return RunDir(dir);
}

bool RunDir::has_state() const {
  std::error_code ec;
  return fs::exists(file("last.safetensors"), ec);
}

void RunDir::write_command(const Args& args) const {
  Args kept;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--resume" || args[i] == "--out") {  // a resumed run lives where it is
      ++i;
      continue;
    }
    kept.push_back(args[i]);
  }
  write_file_atomic(file("command.json"), nlohmann::json(kept).dump(2) + "\n");
}

Args RunDir::read_command() const {
  const std::string path = file("command.json");
  try {
    return nlohmann::json::parse(read_file(path)).get<Args>();
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("'{}': not a list of flags: {}", path, e.what()));
  }
}

void RunDir::write_test_split(const std::vector<models::Example>& test,
                              const models::Preprocess& prep) const {
  std::string src, ref;
  for (const auto& e : test) {
    src += prep.detokenize_source(e.src) + "\n";
    ref += prep.detokenize_target(e.tgt) + "\n";
  }
  write_file_atomic(file("test.src"), src);
  write_file_atomic(file("test.ref"), ref);
  // The true alignment, where the data knows it (the toy tasks): per reference token, the
  // position of the source token it translates, or -1.
  if (std::all_of(test.begin(), test.end(), [](const auto& e) { return !e.align.empty(); })) {
    std::string align;
    for (const auto& e : test) {
      for (size_t t = 0; t < e.align.size(); ++t)
        align += fmt::format("{}{}", t ? " " : "", e.align[t]);
      align += "\n";
    }
    write_file_atomic(file("test.align"), align);
  }
}

void RunDir::append_metrics(const std::string& json_line) const {
  append_file(file("metrics.jsonl"), json_line + "\n");
}

void RunDir::write_result(const std::string& json) const {
  write_file_atomic(file("result.json"), json + "\n");
}

void RunDir::save_state(nn::Module& model, const nn::Optimizer& opt, RunState st) const {
  std::error_code ec;
  const auto size = fs::file_size(file("metrics.jsonl"), ec);
  st.metrics_bytes = ec ? 0 : static_cast<int64_t>(size);
  nn::NamedTensors tensors;
  for (auto& [name, p] : model.named_parameters()) tensors.emplace_back("model." + name, p->value);
  for (auto& [name, t] : opt.state()) tensors.emplace_back("optimizer." + name, t);
  nn::save_safetensors(file("last.safetensors"), tensors,
                       {{"epoch", std::to_string(st.epoch)},
                        {"best_valid_loss", fmt::format("{}", st.best_valid_loss)},
                        {"seconds", fmt::format("{}", st.seconds)},
                        {"best_epoch", std::to_string(st.best_epoch)},
                        {"metrics_bytes", std::to_string(st.metrics_bytes)}});
}

void RunDir::promote_next_model() const {
  rename_file(next_model_path(), model_path());
}

std::vector<std::string> RunDir::recover(const RunState& st) const {
  std::vector<std::string> notes;
  std::error_code ec;
  // Temporary files of writes that were killed: "<name>.tmp.<pid>.<n>".
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    const std::string name = entry.path().filename().string();
    const size_t tmp = name.find(".tmp.");
    if (tmp == std::string::npos || tmp == 0 ||
        name.find_first_not_of("0123456789.", tmp + 5) != std::string::npos)
      continue;
    if (fs::remove(entry.path(), ec))
      notes.push_back(fmt::format("removed '{}', left by an interrupted write", name));
  }
  // A better model written in an epoch that was not committed is undone; one whose epoch was
  // committed but not yet renamed into place is finished.
  if (fs::exists(next_model_path(), ec)) {
    int64_t epoch = -1;
    try {
      epoch = std::stoll(nn::load_safetensors(next_model_path()).metadata.at("epoch"));
    } catch (const std::exception&) {  // unreadable: never committed, since the commit follows it
    }
    if (epoch > 0 && epoch == st.best_epoch && epoch <= st.epoch) {
      promote_next_model();
      notes.push_back(
          fmt::format("model.safetensors: the best model of epoch {} put in place", epoch));
    } else {
      fs::remove(next_model_path(), ec);
      notes.push_back(
          "removed model.next.safetensors, written in an epoch whose save did not finish");
    }
  }
  if (st.epoch == 0 && fs::exists(model_path(), ec)) {  // no epoch committed: no best model yet
    fs::remove(model_path(), ec);
    notes.push_back("removed model.safetensors: no epoch's save finished");
  }
  // The log back to the committed length (what follows is from the epoch being redone).
  const std::string log = file("metrics.jsonl");
  const int64_t keep = st.epoch == 0 ? 0 : st.metrics_bytes;
  const auto size = fs::file_size(log, ec);
  if (!ec && keep >= 0 && static_cast<int64_t>(size) > keep) {
    const std::string text = read_file(log);
    const auto dropped =
        std::count(text.begin() + keep, text.end(), '\n') + (text.back() == '\n' ? 0 : 1);
    write_file_atomic(log, std::string_view(text).substr(0, static_cast<size_t>(keep)));
    notes.push_back(fmt::format("metrics.jsonl: dropped {} line{} logged after epoch {}'s save",
                                dropped, dropped == 1 ? "" : "s", st.epoch));
  } else if (!ec && keep > static_cast<int64_t>(size)) {
    throw Error(fmt::format("'{}' is {} bytes, shorter than the {} its last saved state recorded",
                            log, size, keep));
  }
  return notes;
}

RunState RunDir::load_state(nn::Module& model, nn::Optimizer& opt) const {
  const std::string path = file("last.safetensors");
  nn::SafetensorsFile f = nn::load_safetensors(path);
  nn::NamedTensors params;
  nn::OptimizerState state;
  for (auto& [name, t] : f.tensors) {
    if (name.rfind("model.", 0) == 0)
      params.emplace_back(name.substr(6), t);
    else if (name.rfind("optimizer.", 0) == 0)
      state.emplace_back(name.substr(10), t);
    else
      throw nn::CheckpointError(fmt::format("'{}': unexpected tensor '{}'", path, name));
  }
  auto named = model.named_parameters();
  if (named.size() != params.size())
    throw nn::CheckpointError(
        fmt::format("'{}': {} parameters, the model has {}", path, params.size(), named.size()));
  for (size_t i = 0; i < named.size(); ++i) {
    auto it = std::find_if(params.begin(), params.end(),
                           [&](const auto& p) { return p.first == named[i].first; });
    if (it == params.end() || it->second.shape() != named[i].second->shape() ||
        it->second.dtype() != named[i].second->value.dtype())
      throw nn::CheckpointError(
          fmt::format("'{}': parameter '{}' is missing or differs", path, named[i].first));
  }
  try {
    opt.load_state(state);
  } catch (const ValueError& e) {
    throw nn::CheckpointError(fmt::format("'{}': optimizer state: {}", path, e.what()));
  }
  for (auto& [name, p] : named)
    for (auto& [n, t] : params)
      if (n == name) p->value.copy_from(t);
  models::check_finite_parameters(path, model);
  // The state's numbers, each checked: a resume must not go on from an absurd one.
  auto field = [&](const char* key) -> const std::string& {
    auto it = f.metadata.find(key);
    if (it == f.metadata.end())
      throw nn::CheckpointError(fmt::format("'{}': metadata has no '{}'", path, key));
    return it->second;
  };
  auto integer = [&](const char* key, int64_t lo, int64_t hi) {
    const std::string& v = field(key);
    int64_t x = 0;
    const auto [end, err] = std::from_chars(v.data(), v.data() + v.size(), x);
    if (err != std::errc() || end != v.data() + v.size() || x < lo || x > hi)
      throw nn::CheckpointError(
          fmt::format("'{}': metadata {} = '{}' is not a whole number in "
                      "[{}, {}]",
                      path, key, v, lo, hi));
    return x;
  };
  auto real = [&](const char* key, bool may_be_infinite) {
    const std::string& v = field(key);
    double x = NAN;
    try {
      size_t used = 0;
      x = std::stod(v, &used);
      if (used != v.size()) x = NAN;
    } catch (const std::exception&) {
    }
    if (std::isnan(x) || x < 0 || (std::isinf(x) && !may_be_infinite))
      throw nn::CheckpointError(fmt::format("'{}': metadata {} = '{}' is not a {}number >= 0", path,
                                            key, v, may_be_infinite ? "" : "finite "));
    return x;
  };
  RunState st;
  st.epoch = integer("epoch", 1, 1'000'000);
  st.best_valid_loss = real("best_valid_loss", true);  // infinite until a loss was finite
  st.seconds = real("seconds", false);
  if (f.metadata.count("metrics_bytes")) {  // older states have neither
    st.best_epoch = integer("best_epoch", 0, st.epoch);
    st.metrics_bytes = integer("metrics_bytes", 0, int64_t{1} << 50);
  }
  return st;
}

std::string RunDir::epoch_model_path(int64_t epoch) const {
  return fmt::format("{}/epochs/epoch-{}.safetensors", dir_, epoch);
}

std::vector<std::pair<int64_t, std::string>> RunDir::epoch_models() const {
  std::vector<std::pair<int64_t, std::string>> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_ + "/epochs", ec)) {
    const std::string name = entry.path().filename().string();
    constexpr std::string_view prefix = "epoch-", suffix = ".safetensors";
    if (name.size() <= prefix.size() + suffix.size() || !name.starts_with(prefix) ||
        !name.ends_with(suffix))
      continue;
    const std::string digits =
        name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    if (digits.empty() || digits.size() > 9 ||
        digits.find_first_not_of("0123456789") != std::string::npos)
      continue;
    out.emplace_back(std::stoll(digits), entry.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace tapestry::cli
