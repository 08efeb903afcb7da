// Flags: declarative command-line options for the subcommands, with generated help and errors that
// list the valid choices.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "tapestry/core/errors.h"
#include "tools/cli.h"

namespace tapestry::cli {

// `text` as a whole number, for the value of `flag` ("--epochs"). Throws UsageError saying which
// is wrong: "'x' is not <expected>", "99999999999999999999 is out of range" (beyond what an int64
// holds), or "0 is outside [1, 100]". Bounds at the type's limits are not shown.
int64_t parse_int(const std::string& flag, const std::string& text, int64_t min, int64_t max,
                  const char* expected = "a whole number");
// The comma-separated items of a flag's value, empty ones included ("a,,b" gives "a", "", "b";
// "" gives one empty item), for the caller to check or drop.
std::vector<std::string> split_commas(const std::string& text);
// The same for a finite real number ("inf" and "nan" are refused; so is "1e999", as out of range;
// an underflow such as "1e-400" reads as the nearest number, 0 or denormal).
double parse_number(const std::string& flag, const std::string& text, double min, double max);

class Flags {
 public:
  // usage: "tapestry train [options]"; about: a paragraph printed under it by --help.
  Flags(std::string usage, std::string about);

  // --name VALUE options; `help` is one line; choices (if any) are the only accepted values.
  void add(const std::string& name, std::string* target, const std::string& help,
           std::vector<std::string> choices = {});
  void add(const std::string& name, int64_t* target, const std::string& help, int64_t min,
           int64_t max);
  void add(const std::string& name, double* target, const std::string& help, double min,
           double max);
  // --name sets true, --no-name sets false.
  void add_switch(const std::string& name, bool* target, const std::string& help);
  // Positional arguments, in order; `required` ones must be given.
  void add_positional(const std::string& name, std::string* target, const std::string& help,
                      bool required = true);
  // Any number of further positional arguments.
  void add_rest(const std::string& name, std::vector<std::string>* target, const std::string& help);
  // A section title shown in --help before the options added after it.
  void section(const std::string& title);

  // Returns false if --help was given (the help has been printed). Throws UsageError for an
  // unknown option (naming the closest valid one and listing all), a missing or bad value.
  bool parse(const Args& args);
  bool given(const std::string& name) const;
  std::string help() const;

 private:
  struct Option {
    std::string name, help, section, metavar, default_text;
    std::vector<std::string> choices;
    bool is_switch = false;
    std::function<void(const std::string&)> set;
  };
  struct Positional {
    std::string name, help;
    std::string* target;
    bool required;
  };
  Option& option(const std::string& name);
  [[noreturn]] void unknown(const std::string& arg) const;

  std::string usage_, about_, section_;
  std::vector<Option> options_;
  std::vector<Positional> positionals_;
  std::vector<std::string>* rest_ = nullptr;
  std::string rest_name_, rest_help_;
  std::vector<std::string> given_;
};

// A size flag: its name ("hidden") and the field of a settings struct that holds its value.
template <class Settings>
struct SizeFlag {
  const char* flag;
  int64_t Settings::*field;
};

// The size flag most to blame when need(settings) is too large: the one whose default (its value
// in Settings{}) would shrink the need most, or nullptr when none would. A default that makes no
// valid configuration with the other settings (need throws ValueError) is passed over.
template <class Settings, class Need>
const SizeFlag<Settings>* most_to_blame(const Settings& s,
                                        std::span<const SizeFlag<Settings>> sizes, Need need) {
  const Settings defaults{};
  const SizeFlag<Settings>* blamed = nullptr;
  double least = need(s);
  for (const SizeFlag<Settings>& z : sizes) {
    if (s.*z.field == defaults.*z.field) continue;
    Settings t = s;
    t.*z.field = defaults.*z.field;
    double n = 0;
    try {
      n = need(t);
    } catch (const ValueError&) {
      continue;
    }
    if (n < least) least = n, blamed = &z;
  }
  return blamed;
}

}  // namespace tapestry::cli
