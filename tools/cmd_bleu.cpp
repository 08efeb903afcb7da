// tapestry bleu: corpus BLEU and chrF of a hypothesis file against reference files, as sacreBLEU.
#include <fmt/format.h>

#include <limits>
#include <optional>

#include "tapestry/core/errors.h"
#include "tapestry/models/bleu.h"
#include "tapestry/models/chrf.h"
#include "tools/cli.h"
#include "tools/flags.h"
#include "tools/text_files.h"

namespace tapestry::cli {

namespace {

void usage() {
  fmt::print(
      "usage: tapestry bleu HYP REF [REF2 ...] [--metrics bleu,chrf] [--lowercase]\n"
      "                     [--tokenize 13a|none] [--smooth-method exp|floor|add-k|none]\n"
      "                     [--smooth-value X] [--effective-order] [--chrf-word-order N]\n"
      "                     [--chrf-whitespace] [--chrf-lowercase] [--score-only] [--width N]\n\n"
      "Corpus BLEU of the hypotheses in HYP (UTF-8, one sentence per line) against one or more\n"
      "reference files with as many lines, computed as sacreBLEU 2.x does by default: mteval-v13a\n"
      "tokenisation, case-sensitive, BLEU-4, corpus sums of clipped n-gram matches, brevity\n"
      "penalty from the closest reference length, exp smoothing. Lines are right-stripped; an\n"
      "empty reference line means that file has no reference for the line. Prints sacreBLEU's\n"
      "line and the signature of the settings.\n\n"
      "With --metrics chrf, chrF as sacreBLEU 2.x computes it by default (chrF2): character\n"
      "n-grams up to 6 without whitespace, case-sensitive, recall weighted twice as much as\n"
      "precision, per line the reference that scores best; --chrf-word-order 2 is chrF++.\n\n"
      "  --metrics, -m LIST       bleu (default), chrf or bleu,chrf (printed in that order)\n"
      "BLEU:\n"
      "  --lowercase, -lc         case-insensitive BLEU\n"
      "  --tokenize, -tok NAME    13a (default) or none (split on whitespace only)\n"
      "  --smooth-method, -s M    exp (default), floor, add-k or none\n"
      "  --smooth-value, -sv X    the value for floor (default 0.1) and add-k (default 1)\n"
      "  --effective-order        average only over the n-gram orders the hypotheses have\n"
      "chrF:\n"
      "  --chrf-word-order, -cw N word n-grams up to N as well (default 0; 2 is chrF++)\n"
      "  --chrf-whitespace        keep whitespace in the character n-grams\n"
      "  --chrf-lowercase         case-insensitive chrF\n"
      "Both:\n"
      "  --score-only, -b         print only the score\n"
      "  --width, -w N            decimals of the score (default 2)\n");
}

// What the command line asks for.
struct Settings {
  std::vector<std::string> files;
  bool bleu = true;
  bool chrf = false;
  models::BleuOptions bleu_options;
  models::ChrfOptions chrf_options;
  bool score_only = false;
  int width = 2;
  // The metric-specific flags given, to refuse those whose metric is not computed.
  std::vector<std::string> bleu_flags, chrf_flags;
};

std::string value_of(const Args& args, size_t& i, const char* what) {
  if (i + 1 >= args.size()) throw UsageError{fmt::format("{} needs a value ({})", args[i], what)};
  return args[++i];
}

void parse_metrics(const std::string& list, Settings& s) {
  s.bleu = s.chrf = false;
  for (const std::string& m : split_commas(list)) {
    if (m == "bleu")
      s.bleu = true;
    else if (m == "chrf")
      s.chrf = true;
    else
      throw UsageError{fmt::format("--metrics: unknown metric '{}' (valid: bleu, chrf)", m)};
  }
}

models::BleuTokenizer parse_tokenizer(const std::string& v) {
  if (v == "13a") return models::BleuTokenizer::k13a;
  if (v == "none") return models::BleuTokenizer::kNone;
  throw UsageError{fmt::format("unknown tokenizer '{}' (valid: 13a, none)", v)};
}

models::BleuSmooth parse_smooth(const std::string& v) {
  if (v == "exp") return models::BleuSmooth::kExp;
  if (v == "floor") return models::BleuSmooth::kFloor;
  if (v == "add-k") return models::BleuSmooth::kAddK;
  if (v == "none") return models::BleuSmooth::kNone;
  throw UsageError{
      fmt::format("unknown smoothing method '{}' (valid: exp, floor, add-k, none)", v)};
}

// Reads args[i] (and its value) if it is a BLEU option; false if it is not one.
bool parse_bleu_flag(const Args& args, size_t& i, Settings& s) {
  const std::string& a = args[i];
  models::BleuOptions& o = s.bleu_options;
  if (a == "--lowercase" || a == "-lc") {
    o.lowercase = true;
  } else if (a == "--tokenize" || a == "-tok") {
    o.tokenizer = parse_tokenizer(value_of(args, i, "13a or none"));
  } else if (a == "--smooth-method" || a == "-s") {
    o.smooth = parse_smooth(value_of(args, i, "exp, floor, add-k or none"));
  } else if (a == "--smooth-value" || a == "-sv") {
    o.smooth_value = parse_number("--smooth-value", value_of(args, i, "a number >= 0"), 0,
                                  std::numeric_limits<double>::infinity());
  } else if (a == "--effective-order") {
    o.effective_order = true;
  } else {
    return false;
  }
  s.bleu_flags.push_back(a);
  return true;
}

// Reads args[i] (and its value) if it is a chrF option; false if it is not one.
bool parse_chrf_flag(const Args& args, size_t& i, Settings& s) {
  const std::string& a = args[i];
  models::ChrfOptions& o = s.chrf_options;
  if (a == "--chrf-word-order" || a == "-cw") {
    o.word_order = static_cast<int>(
        parse_int("--chrf-word-order", value_of(args, i, "a whole number, 0..10"), 0, 10));
  } else if (a == "--chrf-whitespace") {
    o.whitespace = true;
  } else if (a == "--chrf-lowercase") {
    o.lowercase = true;
  } else {
    return false;
  }
  s.chrf_flags.push_back(a);
  return true;
}

int parse_width(const std::string& v) {
  if (v.empty() || v.size() > 2 || v.find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(v) > 10)
    throw UsageError{fmt::format("--width '{}' is not a whole number from 0 to 10", v)};
  return std::stoi(v);
}

// The settings, or nothing when --help was given (and answered).
std::optional<Settings> parse_args(const Args& args) {
  Settings s;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      usage();
      return std::nullopt;
    } else if (a == "--metrics" || a == "-m") {
      parse_metrics(value_of(args, i, "bleu, chrf or bleu,chrf"), s);
    } else if (parse_bleu_flag(args, i, s) || parse_chrf_flag(args, i, s)) {
      continue;
    } else if (a == "--score-only" || a == "-b") {
      s.score_only = true;
    } else if (a == "--width" || a == "-w") {
      s.width = parse_width(value_of(args, i, "decimals of the score, 0..10"));
    } else if (a.size() > 1 && a[0] == '-') {
      throw UsageError{fmt::format(
          "unknown option '{}' (valid: --lowercase, --tokenize 13a|none, --smooth-method "
          "exp|floor|add-k|none, --smooth-value X, --effective-order, --metrics bleu,chrf, "
          "--chrf-word-order N, --chrf-whitespace, --chrf-lowercase, --score-only, --width N, "
          "--help)",
          a)};
    } else {
      s.files.push_back(a);
    }
  }
  return s;
}

void check_settings(const Settings& s) {
  if (s.files.size() < 2)
    throw UsageError{fmt::format(
        "needs a hypothesis file and at least one reference file, got {} file{} (see --help)",
        s.files.size(), s.files.size() == 1 ? "" : "s")};
  // An option of a metric that is not computed would be silently ignored (sacreBLEU does that).
  if (!s.bleu && !s.bleu_flags.empty())
    throw UsageError{fmt::format("{} is a BLEU option, but --metrics does not include bleu{}",
                                 s.bleu_flags[0],
                                 s.bleu_flags[0] == "--lowercase" || s.bleu_flags[0] == "-lc"
                                     ? " (chrF's is --chrf-lowercase)"
                                     : "")};
  if (!s.chrf && !s.chrf_flags.empty())
    throw UsageError{fmt::format(
        "{} is a chrF option, but --metrics does not include chrf (add --metrics bleu,chrf or "
        "--metrics chrf)",
        s.chrf_flags[0])};
  const models::BleuSmooth smooth = s.bleu_options.smooth;
  if (s.bleu_options.smooth_value && smooth != models::BleuSmooth::kFloor &&
      smooth != models::BleuSmooth::kAddK)
    throw UsageError{"--smooth-value applies only to --smooth-method floor or add-k"};
}

struct Corpus {
  std::vector<std::string> hyps;
  std::vector<std::vector<std::string>> refs;  // refs[k][i]: line i of reference file k
};

// Reads the files and refuses what sacreBLEU refuses: files of different lengths, and a line
// whose every reference is empty. Errors name the file (and line).
Corpus read_corpus(const std::vector<std::string>& files) {
  Corpus c;
  c.hyps = read_text_lines(files[0]);
  for (size_t k = 1; k < files.size(); ++k) {
    c.refs.push_back(read_text_lines(files[k]));
    if (c.refs.back().size() != c.hyps.size())
      throw Error(
          fmt::format("'{}' has {} lines but '{}' has {}: every file needs one line per "
                      "sentence",
                      files[0], c.hyps.size(), files[k], c.refs.back().size()));
  }
  for (size_t i = 0; i < c.hyps.size(); ++i) {
    bool any = false;
    for (const auto& r : c.refs) any = any || !r[i].empty();
    if (!any) {
      std::string places;
      for (size_t k = 1; k < files.size(); ++k)
        places += fmt::format("{}{}:{}", k > 1 ? ", " : "", files[k], i + 1);
      throw Error(fmt::format(
          "{}: the reference line is empty{}; sacreBLEU refuses a line without a reference too",
          places, files.size() > 2 ? " in every reference file" : ""));
    }
  }
  return c;
}

void report_bleu(const Settings& s, const Corpus& c) {
  // sacreBLEU warns about this too: tokenised hypotheses lose points against 13a references.
  size_t tokenized = 0;
  for (const auto& h : c.hyps) tokenized += h.ends_with(" .");
  if (tokenized >= 100 && s.bleu_options.tokenizer == models::BleuTokenizer::k13a)
    fmt::print(stderr,
               "tapestry bleu: warning: {} hypotheses end in ' .'; they look tokenized, which "
               "lowers BLEU against detokenized references\n",
               tokenized);

  const models::BleuStats stats = models::corpus_bleu_stats(c.hyps, c.refs, s.bleu_options);
  models::BleuScore score = models::bleu_from_stats(stats, s.bleu_options);
  if (s.score_only) {
    fmt::print("{:.{}f}\n", score.score, s.width);
  } else {
    fmt::print("{}\n", score.str(s.width));
    fmt::print("signature: {}\n", models::bleu_signature(c.refs, s.bleu_options));
  }
  if (const std::string why = models::bleu_zero_reason(stats, s.bleu_options); !why.empty())
    fmt::print(stderr, "tapestry bleu: note: {}\n", why);
}

void report_chrf(const Settings& s, const Corpus& c) {
  const models::ChrfScore score = models::corpus_chrf(c.hyps, c.refs, s.chrf_options);
  if (s.score_only) {
    fmt::print("{:.{}f}\n", score.score, s.width);
  } else {
    fmt::print("{}\n", score.str(s.width));
    fmt::print("signature: {}\n", models::chrf_signature(c.refs, s.chrf_options));
  }
}

}  // namespace

int cmd_bleu(const Args& args) {
  const std::optional<Settings> settings = parse_args(args);
  if (!settings) return 0;
  check_settings(*settings);
  const Corpus corpus = read_corpus(settings->files);
  // sacreBLEU prints its metrics sorted by name, whatever order --metrics gives.
  if (settings->bleu) report_bleu(*settings, corpus);
  if (settings->chrf) report_chrf(*settings, corpus);
  return 0;
}

}  // namespace tapestry::cli
