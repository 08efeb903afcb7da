// Entry point of the tapestry program: dispatches to subcommands.
#include <execinfo.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <string_view>

#include "tapestry/core/blas.h"
#include "tapestry/core/cpu_kernels.h"
#include "tapestry/core/errors.h"
#include "tools/cli.h"
#include "tools/heap_count.h"

namespace {

using tapestry::cli::Args;

struct Command {
  const char* name;
  int (*run)(const Args&);
  const char* summary;
};

constexpr Command kCommands[] = {
    {"train", tapestry::cli::cmd_train, "train an attention model on a toy task or a corpus"},
    {"translate", tapestry::cli::cmd_translate, "translate sentences with a trained model"},
    {"eval", tapestry::cli::cmd_eval,
     "score a model: BLEU, exact match, perplexity, by source length"},
    {"gradcheck", tapestry::cli::cmd_gradcheck,
     "check every op's gradient against finite differences (float64)"},
    {"report", tapestry::cli::cmd_report, "an HTML page about a run: curves, attention, BLEU"},
    {"explain", tapestry::cli::cmd_explain,
     "backprop through attention at any decoder step, value by value, in words, checked"},
    {"bleu", tapestry::cli::cmd_bleu,
     "corpus BLEU (and chrF) of a hypothesis file, as sacreBLEU computes them"},
    {"bench", tapestry::cli::cmd_bench, "time training and decoding against the PyTorch reference"},
    {"products", tapestry::cli::cmd_products,
     "time each path of a matrix product (small_gemm, OpenBLAS, ...) by shape"},
    {"export", tapestry::cli::cmd_export, "write a trained model as a PyTorch package"},
    {"average", tapestry::cli::cmd_average,
     "average the parameters of a run's checkpoints into one model"},
    {"plot", tapestry::cli::cmd_plot,
     "draw BLEU by source length of several models (eval --json files) as SVG"},
};

void print_help() {
  fmt::print("usage: tapestry <command> [options]\n\ncommands:\n");
  for (const auto& c : kCommands) fmt::print("  {:<12} {}\n", c.name, c.summary);
  fmt::print("  {:<12} {}\n", "help", "show this list");
  fmt::print("\n'tapestry <command> --help' describes a command's options.\n");
}

// One line on standard error; returns `status`.
int fail(std::string_view command, std::string_view message, int status) {
  fmt::print(stderr, "tapestry {}: {}\n", command, message);
  return status;
}

// Standard output's last buffered block, written and checked: output that could not be written
// (a full disk, >/dev/full) is an error, never a silent exit 0.
int finish_stdout(std::string_view command, int status) {
  errno = 0;
  const bool flushed = std::fflush(stdout) == 0;
  const int flush_errno = errno;
  const bool failed = !flushed || std::ferror(stdout);
  errno = 0;
  const bool closed = std::fclose(stdout) == 0;
  if (!failed && closed) return status;
  const int e = !flushed ? flush_errno : errno;
  fail(command,
       fmt::format("error: cannot write standard output: {}",
                   e != 0 ? std::strerror(e) : "a write failed (the output is incomplete)"),
       1);
  return status != 0 ? status : 1;
}

}  // namespace

int main(int argc, char** argv) {
  // A write past the file-size limit then fails with EFBIG, which the writers report, instead of
  // the signal killing the program with no word said.
  std::signal(SIGXFSZ, SIG_IGN);
  if (const char* trace = std::getenv("TAPESTRY_HEAP_TRACE"); trace && *trace && *trace != '0') {
    void* frame[1];
    backtrace(frame, 1);  // loads the unwinder now, not inside a counted allocation
    tapestry::cli::heap_counter.trace = true;
  }
  tapestry::blas::use_fastest_kernels(argv);
  // A bad TAPESTRY_KERNELS stops the program before any work, not at the first product.
  try {
    tapestry::cpu::kernels();
  } catch (const tapestry::Error& e) {
    fmt::print(stderr, "tapestry: {}\n", e.what());
    return 2;
  }
  if (argc < 2) {
    print_help();
    return 2;
  }
  std::string_view name = argv[1];
  if (name == "help" || name == "--help" || name == "-h") {
    print_help();
    return finish_stdout("help", 0);
  }
  Args args(argv + 2, argv + argc);
  for (const auto& c : kCommands) {
    if (name != c.name) continue;
    int status = 0;
    try {
      status = c.run(args);
    } catch (const tapestry::cli::UsageError& e) {
      status = fail(c.name, e.message, 2);
    } catch (const std::bad_alloc&) {
      status = fail(c.name,
                    "error: out of memory (a size given by a flag or a file is too large for this "
                    "machine)",
                    1);
    } catch (const std::exception& e) {
      status = fail(c.name, fmt::format("error: {}", e.what()), 1);
    }
    return finish_stdout(c.name, status);
  }
  std::string valid;
  for (const auto& c : kCommands) valid += fmt::format("{}{}", valid.empty() ? "" : ", ", c.name);
  fmt::print(stderr, "tapestry: unknown command '{}' (valid: {}, help)\n", name, valid);
  return 2;
}
