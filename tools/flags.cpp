// Flags: parsing, value checks, suggestions for misspelt options, and the generated help.
#include "tools/flags.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <type_traits>

namespace tapestry::cli {

namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1])});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

std::string format_number(double v) {
  return fmt::format("{}", v);
}

// " [min, max]" for messages; nothing where both bounds are the type's own limits.
template <typename T>
std::string bounds(T min, T max) {
  if (min == std::numeric_limits<T>::lowest() && max == std::numeric_limits<T>::max()) return "";
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isinf(max)) return fmt::format(" (at least {})", format_number(min));
    return fmt::format(" [{}, {}]", format_number(min), format_number(max));
  } else {
    return fmt::format(" [{}, {}]", min, max);
  }
}

}  // namespace

int64_t parse_int(const std::string& flag, const std::string& text, int64_t min, int64_t max,
                  const char* expected) {
  int64_t x = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, x);
  if (ptr != end || (ec != std::errc() && ec != std::errc::result_out_of_range))
    throw UsageError{fmt::format("{}: '{}' is not {}", flag, text, expected)};
  if (ec == std::errc::result_out_of_range)
    throw UsageError{fmt::format("{}: {} is out of range{}", flag, text, bounds(min, max))};
  if (x < min || x > max)
    throw UsageError{fmt::format("{}: {} is outside [{}, {}]", flag, x, min, max)};
  return x;
}

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

double parse_number(const std::string& flag, const std::string& text, double min, double max) {
  double x = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, x);
  if (ptr != end || (ec != std::errc() && ec != std::errc::result_out_of_range))
    throw UsageError{fmt::format("{}: '{}' is not a number", flag, text)};
  if (ec == std::errc::result_out_of_range) {
    // from_chars leaves x unset here: strtod (the program keeps the "C" locale) tells an overflow
    // (HUGE_VAL) from an underflow, which is the nearest number and may well be in range.
    x = std::strtod(text.c_str(), nullptr);
    if (std::isinf(x))
      throw UsageError{fmt::format("{}: {} is out of range{}", flag, text, bounds(min, max))};
  }
  if (!std::isfinite(x))
    throw UsageError{fmt::format("{}: '{}' is not a finite number", flag, text)};
  if (x < min || x > max)
    throw UsageError{fmt::format("{}: {} is outside{}", flag, text, bounds(min, max))};
  return x;
}

Flags::Flags(std::string usage, std::string about)
    : usage_(std::move(usage)), about_(std::move(about)) {}

Flags::Option& Flags::option(const std::string& name) {
  Option& o = options_.emplace_back();
  o.name = name;
  o.section = section_;
  return o;
}

void Flags::section(const std::string& title) {
  section_ = title;
}

void Flags::add(const std::string& name, std::string* target, const std::string& help,
                std::vector<std::string> choices) {
  Option& o = option(name);
  o.help = help;
  o.metavar = choices.empty() ? "TEXT" : join(choices, "|");
  o.default_text = target->empty() ? "" : *target;
  o.choices = std::move(choices);
  o.set = [target, name, choices = o.choices](const std::string& v) {
    if (!choices.empty() && std::find(choices.begin(), choices.end(), v) == choices.end())
      throw UsageError{
          fmt::format("--{}: '{}' is not a valid value (valid: {})", name, v, join(choices))};
    *target = v;
  };
}

void Flags::add(const std::string& name, int64_t* target, const std::string& help, int64_t min,
                int64_t max) {
  Option& o = option(name);
  o.help = help;
  o.metavar = std::string(1, 'N');
  o.default_text = fmt::format("{}", *target);
  o.set = [target, name, min, max](const std::string& v) {
    *target = parse_int("--" + name, v, min, max);
  };
}

void Flags::add(const std::string& name, double* target, const std::string& help, double min,
                double max) {
  Option& o = option(name);
  o.help = help;
  o.metavar = std::string(1, 'X');
  o.default_text = format_number(*target);
  o.set = [target, name, min, max](const std::string& v) {
    *target = parse_number("--" + name, v, min, max);
  };
}

void Flags::add_switch(const std::string& name, bool* target, const std::string& help) {
  Option& o = option(name);
  o.help = help;
  o.is_switch = true;
  o.default_text = *target ? "on" : "off";
  o.set = [target](const std::string& v) { *target = v == "1"; };
}

void Flags::add_positional(const std::string& name, std::string* target, const std::string& help,
                           bool required) {
  positionals_.push_back({name, help, target, required});
}

void Flags::add_rest(const std::string& name, std::vector<std::string>* target,
                     const std::string& help) {
  rest_ = target;
  rest_name_ = name;
  rest_help_ = help;
}

void Flags::unknown(const std::string& arg) const {
  std::string name = arg.substr(arg.rfind('-', 1) == 1 ? 2 : 1);
  std::vector<std::string> all;
  std::string closest;
  size_t best = 3;  // suggest only near misses
  for (const auto& o : options_) {
    all.push_back("--" + o.name);
    for (const std::string& n : {o.name, "no-" + o.name}) {
      if (n.rfind("no-", 0) == 0 && !o.is_switch) continue;
      const size_t d = edit_distance(name, n);
      if (d < best) best = d, closest = n;
    }
  }
  all.push_back("--help");
  throw UsageError{fmt::format("unknown option '{}'{} (valid: {})", arg,
                               closest.empty() ? "" : fmt::format("; did you mean --{}?", closest),
                               join(all))};
}

bool Flags::parse(const Args& args) {
  size_t next_positional = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      fmt::print("{}", help());
      return false;
    }
    if (a.size() > 1 && a[0] == '-' && !(a.size() > 1 && (std::isdigit(a[1]) || a[1] == '.'))) {
      std::string name = a.substr(a.rfind("--", 0) == 0 ? 2 : 1), value;
      bool has_value = false;
      if (auto eq = name.find('='); eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
        has_value = true;
      }
      auto it = std::find_if(options_.begin(), options_.end(),
                             [&](const Option& o) { return o.name == name; });
      bool negated = false;
      if (it == options_.end() && name.rfind("no-", 0) == 0) {
        it = std::find_if(options_.begin(), options_.end(),
                          [&](const Option& o) { return o.is_switch && o.name == name.substr(3); });
        negated = it != options_.end();
      }
      if (it == options_.end()) unknown(a);
      if (it->is_switch) {
        if (has_value) throw UsageError{fmt::format("--{} takes no value", it->name)};
        it->set(negated ? "0" : "1");
      } else {
        if (!has_value) {
          if (i + 1 >= args.size())
            throw UsageError{fmt::format("--{} needs a value ({})", it->name, it->metavar)};
          value = args[++i];
        }
        it->set(value);
      }
      given_.push_back(it->name);
      continue;
    }
    if (next_positional < positionals_.size()) {
      *positionals_[next_positional++].target = a;
    } else if (rest_) {
      rest_->push_back(a);
    } else {
      throw UsageError{fmt::format("unexpected argument '{}' (see --help)", a)};
    }
  }
  for (size_t p = next_positional; p < positionals_.size(); ++p)
    if (positionals_[p].required)
      throw UsageError{fmt::format("missing {} (see --help)", positionals_[p].name)};
  return true;
}

bool Flags::given(const std::string& name) const {
  return std::find(given_.begin(), given_.end(), name) != given_.end();
}

std::string Flags::help() const {
  std::string s = fmt::format("usage: {}\n\n{}\n", usage_, about_);
  if (!positionals_.empty() || rest_) {
    s += "\narguments:\n";
    for (const auto& p : positionals_) s += fmt::format("  {:<28} {}\n", p.name, p.help);
    if (rest_) s += fmt::format("  {:<28} {}\n", rest_name_ + "...", rest_help_);
  }
  std::string section = "\x01";
  for (const auto& o : options_) {
    if (o.section != section) {
      section = o.section;
      s += fmt::format("\n{}:\n", section.empty() ? "options" : section);
    }
    std::string flag =
        o.is_switch ? fmt::format("--[no-]{}", o.name) : fmt::format("--{} {}", o.name, o.metavar);
    std::string line = o.help;
    if (!o.default_text.empty()) line += fmt::format(" [{}]", o.default_text);
    if (flag.size() > 28) {
      s += fmt::format("  {}\n  {:<28} {}\n", flag, "", line);
    } else {
      s += fmt::format("  {:<28} {}\n", flag, line);
    }
  }
  return s;
}

}  // namespace tapestry::cli
