// The tapestry command line: subcommands in the style of git, each in its own file.
#pragma once

#include <string>
#include <vector>

namespace tapestry::cli {

// A subcommand's arguments (everything after its name).
using Args = std::vector<std::string>;

// Thrown for a bad flag or value; main prints the message and exits with status 2.
struct UsageError {
  std::string message;
};

int cmd_gradcheck(const Args& args);
int cmd_bleu(const Args& args);
int cmd_train(const Args& args);
int cmd_translate(const Args& args);
int cmd_eval(const Args& args);
int cmd_report(const Args& args);
int cmd_explain(const Args& args);
int cmd_bench(const Args& args);
int cmd_products(const Args& args);
int cmd_export(const Args& args);
int cmd_plot(const Args& args);
int cmd_average(const Args& args);

}  // namespace tapestry::cli
