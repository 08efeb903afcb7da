// tapestry bleu: corpus BLEU of a hypothesis file against reference files, as sacreBLEU scores it.
#include <fmt/format.h>

#include <limits>

#include "tapestry/core/errors.h"
#include "tapestry/models/bleu.h"
#include "tools/cli.h"
#include "tools/flags.h"
#include "tools/text_files.h"

namespace tapestry::cli {

namespace {

void usage() {
  fmt::print(
      "usage: tapestry bleu HYP REF [REF2 ...] [--lowercase] [--tokenize 13a|none]\n"
      "                     [--smooth-method exp|floor|add-k|none] [--smooth-value X]\n"
      "                     [--effective-order] [--score-only] [--width N]\n\n"
      "Corpus BLEU of the hypotheses in HYP (UTF-8, one sentence per line) against one or more\n"
      "reference files with as many lines, computed as sacreBLEU 2.x does by default: mteval-v13a\n"
      "tokenisation, case-sensitive, BLEU-4, corpus sums of clipped n-gram matches, brevity\n"
      "penalty from the closest reference length, exp smoothing. Lines are right-stripped; an\n"
      "empty reference line means that file has no reference for the line. Prints sacreBLEU's\n"
      "line and the signature of the settings.\n\n"
      "  --lowercase, -lc         case-insensitive BLEU\n"
      "  --tokenize, -tok NAME    13a (default) or none (split on whitespace only)\n"
      "  --smooth-method, -s M    exp (default), floor, add-k or none\n"
      "  --smooth-value, -sv X    the value for floor (default 0.1) and add-k (default 1)\n"
      "  --effective-order        average only over the n-gram orders the hypotheses have\n"
      "  --score-only, -b         print only the score\n"
      "  --width, -w N            decimals of the score (default 2)\n");
}

std::string value_of(const Args& args, size_t& i, const char* what) {
  if (i + 1 >= args.size()) throw UsageError{fmt::format("{} needs a value ({})", args[i], what)};
  return args[++i];
}

}  // namespace

int cmd_bleu(const Args& args) {
  std::vector<std::string> files;
  models::BleuOptions options;
  bool score_only = false;
  int width = 2;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      usage();
      return 0;
    } else if (a == "--lowercase" || a == "-lc") {
      options.lowercase = true;
    } else if (a == "--tokenize" || a == "-tok") {
      std::string v = value_of(args, i, "13a or none");
      if (v == "13a")
        options.tokenizer = models::BleuTokenizer::k13a;
      else if (v == "none")
        options.tokenizer = models::BleuTokenizer::kNone;
      else
        throw UsageError{fmt::format("unknown tokenizer '{}' (valid: 13a, none)", v)};
    } else if (a == "--smooth-method" || a == "-s") {
      std::string v = value_of(args, i, "exp, floor, add-k or none");
      if (v == "exp")
        options.smooth = models::BleuSmooth::kExp;
      else if (v == "floor")
        options.smooth = models::BleuSmooth::kFloor;
      else if (v == "add-k")
        options.smooth = models::BleuSmooth::kAddK;
      else if (v == "none")
        options.smooth = models::BleuSmooth::kNone;
      else
        throw UsageError{
            fmt::format("unknown smoothing method '{}' (valid: exp, floor, add-k, none)", v)};
    } else if (a == "--smooth-value" || a == "-sv") {
      options.smooth_value = parse_number("--smooth-value", value_of(args, i, "a number >= 0"), 0,
                                          std::numeric_limits<double>::infinity());
    } else if (a == "--effective-order") {
      options.effective_order = true;
    } else if (a == "--score-only" || a == "-b") {
      score_only = true;
    } else if (a == "--width" || a == "-w") {
      std::string v = value_of(args, i, "decimals of the score, 0..10");
      if (v.empty() || v.size() > 2 || v.find_first_not_of("0123456789") != std::string::npos ||
          std::stoi(v) > 10)
        throw UsageError{fmt::format("--width '{}' is not a whole number from 0 to 10", v)};
      width = std::stoi(v);
    } else if (a.size() > 1 && a[0] == '-') {
      throw UsageError{fmt::format(
          "unknown option '{}' (valid: --lowercase, --tokenize 13a|none, --smooth-method "
          "exp|floor|add-k|none, --smooth-value X, --effective-order, --score-only, --width N, "
          "--help)",
          a)};
    } else {
      files.push_back(a);
    }
  }
  if (files.size() < 2)
    throw UsageError{fmt::format(
        "needs a hypothesis file and at least one reference file, got {} file{} (see --help)",
        files.size(), files.size() == 1 ? "" : "s")};
  if (options.smooth_value && options.smooth != models::BleuSmooth::kFloor &&
      options.smooth != models::BleuSmooth::kAddK)
    throw UsageError{"--smooth-value applies only to --smooth-method floor or add-k"};

  std::vector<std::string> hyps = read_text_lines(files[0]);
  std::vector<std::vector<std::string>> refs;
  for (size_t k = 1; k < files.size(); ++k) {
    refs.push_back(read_text_lines(files[k]));
    if (refs.back().size() != hyps.size())
      throw Error(
          fmt::format("'{}' has {} lines but '{}' has {}: every file needs one line per "
                      "sentence",
                      files[0], hyps.size(), files[k], refs.back().size()));
  }
  for (size_t i = 0; i < hyps.size(); ++i) {
    bool any = false;
    for (const auto& r : refs) any = any || !r[i].empty();
    if (!any) {
      std::string places;
      for (size_t k = 1; k < files.size(); ++k)
        places += fmt::format("{}{}:{}", k > 1 ? ", " : "", files[k], i + 1);
      throw Error(fmt::format(
          "{}: the reference line is empty{}; sacreBLEU refuses a line without a reference too",
          places, files.size() > 2 ? " in every reference file" : ""));
    }
  }

  // sacreBLEU warns about this too: tokenised hypotheses lose points against 13a references.
  size_t tokenized = 0;
  for (const auto& h : hyps) tokenized += h.ends_with(" .");
  if (tokenized >= 100 && options.tokenizer == models::BleuTokenizer::k13a)
    fmt::print(stderr,
               "tapestry bleu: warning: {} hypotheses end in ' .'; they look tokenized, which "
               "lowers BLEU against detokenized references\n",
               tokenized);

  const models::BleuStats stats = models::corpus_bleu_stats(hyps, refs, options);
  models::BleuScore score = models::bleu_from_stats(stats, options);
  if (score_only) {
    fmt::print("{:.{}f}\n", score.score, width);
  } else {
    fmt::print("{}\n", score.str(width));
    fmt::print("signature: {}\n", models::bleu_signature(refs, options));
  }
  if (const std::string why = models::bleu_zero_reason(stats, options); !why.empty())
    fmt::print(stderr, "tapestry bleu: note: {}\n", why);
  return 0;
}

}  // namespace tapestry::cli
