// Runs Debian's python3 for the PyTorch parity tests: whether it imports torch, and what a script
// prints for a JSON spec.
#pragma once

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>

#include "shell_run.h"

namespace tapestry::testing {

// Debian's interpreter: python3-torch installs torch for it, not for another python3 on the PATH.
inline constexpr const char* kTorchPython = "/usr/bin/python3";

// What a shell command prints on standard output (standard error passes through); empty if the
// command cannot be started.
inline std::string run(const std::string& cmd) {
  return run_command(cmd).output;
}

// Whether kTorchPython imports torch. Asked once per process: the import takes seconds.
inline bool torch_available() {
  static const bool yes =
      std::filesystem::exists(kTorchPython) &&
      run(std::string(kTorchPython) + " -c 'import torch; print(\"yes\")' 2>/dev/null")
              .find("yes") != std::string::npos;
  return yes;
}

// Writes `script` and `spec` into `dir` (as script.py and spec.json), runs the script on the spec
// and parses the one JSON document it prints. A script that fails throws std::runtime_error with
// its standard error, so a failing comparison shows Python's traceback rather than a parse error.
inline nlohmann::json run_torch_script(const std::filesystem::path& dir, const std::string& script,
                                       const nlohmann::json& spec) {
  const std::filesystem::path py = dir / "script.py", json = dir / "spec.json",
                              err = dir / "stderr.txt";
  std::ofstream(py) << script;
  std::ofstream(json) << spec.dump();
  std::string cmd = std::string(kTorchPython) + " '" + py.string() + "' '" + json.string() +
                    "' 2>'" + err.string() + "'";
  const CommandResult r = run_command(cmd);
  if (r.status != 0 || r.output.empty()) {
    std::ostringstream text;
    text << std::ifstream(err).rdbuf();
    throw std::runtime_error(cmd + " failed (status " + std::to_string(r.status) + "):\n" +
                             text.str());
  }
  return nlohmann::json::parse(r.output);
}

}  // namespace tapestry::testing
