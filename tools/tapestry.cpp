// Entry point of the tapestry program: dispatches to subcommands.
#include <fmt/format.h>

#include <cstdio>
#include <exception>
#include <string_view>

#include "tapestry/core/blas.h"
#include "tapestry/core/errors.h"
#include "tools/cli.h"

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
    {"bleu", tapestry::cli::cmd_bleu, "corpus BLEU of a hypothesis file, as sacreBLEU computes it"},
    {"bench", tapestry::cli::cmd_bench, "time training and decoding against the PyTorch reference"},
    {"export", tapestry::cli::cmd_export, "write a trained model as a PyTorch package"},
};

void print_help() {
  fmt::print("usage: tapestry <command> [options]\n\ncommands:\n");
  for (const auto& c : kCommands) fmt::print("  {:<12} {}\n", c.name, c.summary);
  fmt::print("  {:<12} {}\n", "help", "show this list");
  fmt::print("\n'tapestry <command> --help' describes a command's options.\n");
}

}  // namespace

int main(int argc, char** argv) {
  tapestry::blas::use_fastest_kernels(argv);
  if (argc < 2) {
    print_help();
    return 2;
  }
  std::string_view name = argv[1];
  if (name == "help" || name == "--help" || name == "-h") {
    print_help();
    return 0;
  }
  Args args(argv + 2, argv + argc);
  for (const auto& c : kCommands) {
    if (name != c.name) continue;
    try {
      return c.run(args);
    } catch (const tapestry::cli::UsageError& e) {
      fmt::print(stderr, "tapestry {}: {}\n", c.name, e.message);
      return 2;
    } catch (const std::exception& e) {
      fmt::print(stderr, "tapestry {}: error: {}\n", c.name, e.what());
      return 1;
    }
  }
  std::string valid;
  for (const auto& c : kCommands) valid += fmt::format("{}{}", valid.empty() ? "" : ", ", c.name);
  fmt::print(stderr, "tapestry: unknown command '{}' (valid: {}, help)\n", name, valid);
  return 2;
}
