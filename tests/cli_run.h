// Runs the built tapestry program for end-to-end tests and captures what it prints.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

#include "shell_run.h"

namespace tapestry::testing {

// Runs `tapestry <args>` (args are passed to the shell as written) in `dir`, or the current
// directory when empty.
inline CommandResult run_tapestry(const std::string& args, const std::string& dir = "") {
  std::string cmd;
  if (!dir.empty()) cmd = "cd '" + dir + "' && ";
  // Appended piece by piece: GCC 12 warns (-Wrestrict, falsely) on "'" + std::string(...).
  cmd.append("'").append(TAPESTRY_BINARY_DIR).append("/tapestry' ").append(args).append(" 2>&1");
  return run_command(cmd);
}

// A fresh temporary directory, removed with the object.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& tag) {
    static int counter = 0;
    path = std::filesystem::temp_directory_path() /
           ("tapestry_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
  std::string str() const { return path.string(); }
};

}  // namespace tapestry::testing
