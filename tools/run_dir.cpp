// RunDir: file layout, atomic writes and the resumable state (parameters plus optimizer slots).
#include "tools/run_dir.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tapestry/nn/checkpoint.h"

namespace tapestry::cli {

namespace fs = std::filesystem;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("cannot read '{}': {}", path, std::strerror(errno)));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

RunDir RunDir::create(const std::string& dir) {
  std::error_code ec;
  if (fs::exists(dir + "/model.safetensors", ec) || fs::exists(dir + "/command.json", ec))
    throw Error(fmt::format(
        "'{}' already holds a run: continue it with --resume {} or choose another --out", dir,
        dir));
  fs::create_directories(dir, ec);
  if (ec) throw Error(fmt::format("cannot create '{}': {}", dir, ec.message()));
  return RunDir(dir);
}

RunDir RunDir::open(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw Error(fmt::format("'{}' is not a run directory", dir));
  for (const char* f : {"command.json", "last.safetensors"})
    if (!fs::exists(dir + "/" + f, ec))
      throw Error(
          fmt::format("'{}' has no {}: not a run to resume (or no epoch finished)", dir, f));
  return RunDir(dir);
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
    src += prep.detokenize(e.src) + "\n";
    ref += prep.detokenize(e.tgt) + "\n";
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
  std::ofstream out(file("metrics.jsonl"), std::ios::app);
  out << json_line << "\n";
  if (!out) throw Error(fmt::format("cannot write '{}'", file("metrics.jsonl")));
}

void RunDir::write_result(const std::string& json) const {
  write_file_atomic(file("result.json"), json + "\n");
}

void RunDir::save_state(nn::Module& model, const nn::Optimizer& opt, const RunState& st) const {
  nn::NamedTensors tensors;
  for (auto& [name, p] : model.named_parameters()) tensors.emplace_back("model." + name, p->value);
  for (auto& [name, t] : opt.state()) tensors.emplace_back("optimizer." + name, t);
  nn::save_safetensors(file("last.safetensors"), tensors,
                       {{"epoch", std::to_string(st.epoch)},
                        {"best_valid_loss", fmt::format("{}", st.best_valid_loss)},
                        {"seconds", fmt::format("{}", st.seconds)}});
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
  RunState st;
  try {
    st.epoch = std::stoll(f.metadata.at("epoch"));
    st.best_valid_loss = std::stod(f.metadata.at("best_valid_loss"));
    st.seconds = std::stod(f.metadata.at("seconds"));
  } catch (const std::exception&) {
    throw nn::CheckpointError(
        fmt::format("'{}': missing or bad epoch/best_valid_loss/seconds", path));
  }
  return st;
}

}  // namespace tapestry::cli
