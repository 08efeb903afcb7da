// Runs a shell command for the tests and captures what it prints on standard output.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace tapestry::testing {

struct CommandResult {
  int status = -1;     // exit status, -1 if the command did not start or exit normally (a crash)
  std::string output;  // standard output (and standard error where the command sends it there)
};

// Runs `cmd` through /bin/sh and reads its standard output to the end; standard error goes where
// the command says (append 2>&1 to capture it as well).
inline CommandResult run_command(const std::string& cmd) {
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return {};
  CommandResult r;
  std::array<char, 4096> buf;
  size_t got;
  while ((got = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.output.append(buf.data(), got);
  const int status = pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace tapestry::testing
