// Corpus BLEU as sacreBLEU 2.x computes it by default: 13a tokenisation, exp smoothing, BLEU-4.
#include "tapestry/models/bleu.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <unordered_map>

#include "tapestry/core/errors.h"
#include "tapestry/models/text.h"

namespace tapestry::models {

namespace {

// Python's str.isspace(): sacreBLEU splits and strips with it, so NBSP separates words too.
bool is_python_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

// One-to-one lowercase mappings: codepoints first, first+stride, ..., last map to cp + delta.
// Generated from Python 3.11's str.lower() (Unicode 14.0) over all codepoints whose lowercase
// is a single different codepoint.
struct LowerRun {
  char32_t first, last;
  int stride, delta;
};
constexpr LowerRun kLowerRuns[] = {
    {0x41, 0x5A, 1, 32},         {0xC0, 0xD6, 1, 32},         {0xD8, 0xDE, 1, 32},
    {0x100, 0x12E, 2, 1},        {0x132, 0x136, 2, 1},        {0x139, 0x147, 2, 1},
    {0x14A, 0x176, 2, 1},        {0x178, 0x178, 1, -121},     {0x179, 0x17D, 2, 1},
    {0x181, 0x181, 1, 210},      {0x182, 0x184, 2, 1},        {0x186, 0x186, 1, 206},
    {0x187, 0x187, 1, 1},        {0x189, 0x18A, 1, 205},      {0x18B, 0x18B, 1, 1},
    {0x18E, 0x18E, 1, 79},       {0x18F, 0x18F, 1, 202},      {0x190, 0x190, 1, 203},
    {0x191, 0x191, 1, 1},        {0x193, 0x193, 1, 205},      {0x194, 0x194, 1, 207},
    {0x196, 0x196, 1, 211},      {0x197, 0x197, 1, 209},      {0x198, 0x198, 1, 1},
    {0x19C, 0x19C, 1, 211},      {0x19D, 0x19D, 1, 213},      {0x19F, 0x19F, 1, 214},
    {0x1A0, 0x1A4, 2, 1},        {0x1A6, 0x1A6, 1, 218},      {0x1A7, 0x1A7, 1, 1},
    {0x1A9, 0x1A9, 1, 218},      {0x1AC, 0x1AC, 1, 1},        {0x1AE, 0x1AE, 1, 218},
    {0x1AF, 0x1AF, 1, 1},        {0x1B1, 0x1B2, 1, 217},      {0x1B3, 0x1B5, 2, 1},
    {0x1B7, 0x1B7, 1, 219},      {0x1B8, 0x1B8, 1, 1},        {0x1BC, 0x1BC, 1, 1},
    {0x1C4, 0x1C4, 1, 2},        {0x1C5, 0x1C5, 1, 1},        {0x1C7, 0x1C7, 1, 2},
    {0x1C8, 0x1C8, 1, 1},        {0x1CA, 0x1CA, 1, 2},        {0x1CB, 0x1DB, 2, 1},
    {0x1DE, 0x1EE, 2, 1},        {0x1F1, 0x1F1, 1, 2},        {0x1F2, 0x1F4, 2, 1},
    {0x1F6, 0x1F6, 1, -97},      {0x1F7, 0x1F7, 1, -56},      {0x1F8, 0x21E, 2, 1},
    {0x220, 0x220, 1, -130},     {0x222, 0x232, 2, 1},        {0x23A, 0x23A, 1, 10795},
    {0x23B, 0x23B, 1, 1},        {0x23D, 0x23D, 1, -163},     {0x23E, 0x23E, 1, 10792},
    {0x241, 0x241, 1, 1},        {0x243, 0x243, 1, -195},     {0x244, 0x244, 1, 69},
    {0x245, 0x245, 1, 71},       {0x246, 0x24E, 2, 1},        {0x370, 0x372, 2, 1},
    {0x376, 0x376, 1, 1},        {0x37F, 0x37F, 1, 116},      {0x386, 0x386, 1, 38},
    {0x388, 0x38A, 1, 37},       {0x38C, 0x38C, 1, 64},       {0x38E, 0x38F, 1, 63},
    {0x391, 0x3A1, 1, 32},       {0x3A3, 0x3AB, 1, 32},       {0x3CF, 0x3CF, 1, 8},
    {0x3D8, 0x3EE, 2, 1},        {0x3F4, 0x3F4, 1, -60},      {0x3F7, 0x3F7, 1, 1},
    {0x3F9, 0x3F9, 1, -7},       {0x3FA, 0x3FA, 1, 1},        {0x3FD, 0x3FF, 1, -130},
    {0x400, 0x40F, 1, 80},       {0x410, 0x42F, 1, 32},       {0x460, 0x480, 2, 1},
    {0x48A, 0x4BE, 2, 1},        {0x4C0, 0x4C0, 1, 15},       {0x4C1, 0x4CD, 2, 1},
    {0x4D0, 0x52E, 2, 1},        {0x531, 0x556, 1, 48},       {0x10A0, 0x10C5, 1, 7264},
    {0x10C7, 0x10C7, 1, 7264},   {0x10CD, 0x10CD, 1, 7264},   {0x13A0, 0x13EF, 1, 38864},
    {0x13F0, 0x13F5, 1, 8},      {0x1C90, 0x1CBA, 1, -3008},  {0x1CBD, 0x1CBF, 1, -3008},
    {0x1E00, 0x1E94, 2, 1},      {0x1E9E, 0x1E9E, 1, -7615},  {0x1EA0, 0x1EFE, 2, 1},
    {0x1F08, 0x1F0F, 1, -8},     {0x1F18, 0x1F1D, 1, -8},     {0x1F28, 0x1F2F, 1, -8},
    {0x1F38, 0x1F3F, 1, -8},     {0x1F48, 0x1F4D, 1, -8},     {0x1F59, 0x1F5F, 2, -8},
    {0x1F68, 0x1F6F, 1, -8},     {0x1F88, 0x1F8F, 1, -8},     {0x1F98, 0x1F9F, 1, -8},
    {0x1FA8, 0x1FAF, 1, -8},     {0x1FB8, 0x1FB9, 1, -8},     {0x1FBA, 0x1FBB, 1, -74},
    {0x1FBC, 0x1FBC, 1, -9},     {0x1FC8, 0x1FCB, 1, -86},    {0x1FCC, 0x1FCC, 1, -9},
    {0x1FD8, 0x1FD9, 1, -8},     {0x1FDA, 0x1FDB, 1, -100},   {0x1FE8, 0x1FE9, 1, -8},
    {0x1FEA, 0x1FEB, 1, -112},   {0x1FEC, 0x1FEC, 1, -7},     {0x1FF8, 0x1FF9, 1, -128},
    {0x1FFA, 0x1FFB, 1, -126},   {0x1FFC, 0x1FFC, 1, -9},     {0x2126, 0x2126, 1, -7517},
    {0x212A, 0x212A, 1, -8383},  {0x212B, 0x212B, 1, -8262},  {0x2132, 0x2132, 1, 28},
    {0x2160, 0x216F, 1, 16},     {0x2183, 0x2183, 1, 1},      {0x24B6, 0x24CF, 1, 26},
    {0x2C00, 0x2C2F, 1, 48},     {0x2C60, 0x2C60, 1, 1},      {0x2C62, 0x2C62, 1, -10743},
    {0x2C63, 0x2C63, 1, -3814},  {0x2C64, 0x2C64, 1, -10727}, {0x2C67, 0x2C6B, 2, 1},
    {0x2C6D, 0x2C6D, 1, -10780}, {0x2C6E, 0x2C6E, 1, -10749}, {0x2C6F, 0x2C6F, 1, -10783},
    {0x2C70, 0x2C70, 1, -10782}, {0x2C72, 0x2C72, 1, 1},      {0x2C75, 0x2C75, 1, 1},
    {0x2C7E, 0x2C7F, 1, -10815}, {0x2C80, 0x2CE2, 2, 1},      {0x2CEB, 0x2CED, 2, 1},
    {0x2CF2, 0x2CF2, 1, 1},      {0xA640, 0xA66C, 2, 1},      {0xA680, 0xA69A, 2, 1},
    {0xA722, 0xA72E, 2, 1},      {0xA732, 0xA76E, 2, 1},      {0xA779, 0xA77B, 2, 1},
    {0xA77D, 0xA77D, 1, -35332}, {0xA77E, 0xA786, 2, 1},      {0xA78B, 0xA78B, 1, 1},
    {0xA78D, 0xA78D, 1, -42280}, {0xA790, 0xA792, 2, 1},      {0xA796, 0xA7A8, 2, 1},
    {0xA7AA, 0xA7AA, 1, -42308}, {0xA7AB, 0xA7AB, 1, -42319}, {0xA7AC, 0xA7AC, 1, -42315},
    {0xA7AD, 0xA7AD, 1, -42305}, {0xA7AE, 0xA7AE, 1, -42308}, {0xA7B0, 0xA7B0, 1, -42258},
    {0xA7B1, 0xA7B1, 1, -42282}, {0xA7B2, 0xA7B2, 1, -42261}, {0xA7B3, 0xA7B3, 1, 928},
    {0xA7B4, 0xA7C2, 2, 1},      {0xA7C4, 0xA7C4, 1, -48},    {0xA7C5, 0xA7C5, 1, -42307},
    {0xA7C6, 0xA7C6, 1, -35384}, {0xA7C7, 0xA7C9, 2, 1},      {0xA7D0, 0xA7D0, 1, 1},
    {0xA7D6, 0xA7D8, 2, 1},      {0xA7F5, 0xA7F5, 1, 1},      {0xFF21, 0xFF3A, 1, 32},
    {0x10400, 0x10427, 1, 40},   {0x104B0, 0x104D3, 1, 40},   {0x10570, 0x1057A, 1, 39},
    {0x1057C, 0x1058A, 1, 39},   {0x1058C, 0x10592, 1, 39},   {0x10594, 0x10595, 1, 39},
    {0x10C80, 0x10CB2, 1, 64},   {0x118A0, 0x118BF, 1, 32},   {0x16E40, 0x16E5F, 1, 32},
    {0x1E900, 0x1E921, 1, 34},
};

char32_t lower_codepoint(char32_t cp) {
  auto it = std::upper_bound(std::begin(kLowerRuns), std::end(kLowerRuns), cp,
                             [](char32_t c, const LowerRun& r) { return c < r.first; });
  if (it == std::begin(kLowerRuns)) return cp;
  const LowerRun& r = *(it - 1);
  if (cp > r.last || (cp - r.first) % r.stride != 0) return cp;
  return static_cast<char32_t>(static_cast<int64_t>(cp) + r.delta);
}

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  // One left-to-right pass, like Python's str.replace: text formed by a replacement is not
  // scanned again ("<skip<skipped>ped>" becomes "<skipped>").
  std::string out;
  size_t pos = 0;
  for (size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size()) {
    out.append(s, pos, hit - pos);
    out += to;
  }
  if (pos == 0) return;
  out.append(s, pos, std::string::npos);
  s = std::move(out);
}

// re.sub of a two-character pattern (first)(second) -> repl(first, second): matches are found
// left to right and never overlap. Working on bytes gives the same result as Python working on
// codepoints: in each pattern one of the two classes is ASCII-only, so a match never begins or
// ends inside a multi-byte character and never swallows one that Python would have left.
template <class First, class Second, class Repl>
std::string sub_pairs(const std::string& s, First first, Second second, Repl repl) {
  std::string out;
  out.reserve(s.size() * 2);
  size_t i = 0;
  while (i < s.size()) {
    if (i + 1 < s.size() && first(s[i]) && second(s[i + 1])) {
      repl(out, s[i], s[i + 1]);
      i += 2;
    } else {
      out += s[i++];
    }
  }
  return out;
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_period_or_comma(char c) {
  return c == '.' || c == ',';
}

// mteval-v13a's punctuation class [{-~[-` -&(-+:-@/]: everything ASCII except letters,
// digits, the apostrophe, ',', '-' and '.' (the space is in it, which only adds spaces).
bool is_13a_punct(char c) {
  return (c >= '{' && c <= '~') || (c >= '[' && c <= '`') || (c >= ' ' && c <= '&') ||
         (c >= '(' && c <= '+') || (c >= ':' && c <= '@') || c == '/';
}

// Length-prefixed tokens, so that no token content can make two different n-grams collide.
std::string ngram_key(const std::vector<std::string>& tokens, size_t start, size_t n) {
  std::string key;
  for (size_t k = start; k < start + n; ++k) {
    key += fmt::format("{}:", tokens[k].size());
    key += tokens[k];
  }
  return key;
}

using NgramCounts = std::array<std::unordered_map<std::string, int64_t>, 4>;

NgramCounts count_ngrams(const std::vector<std::string>& tokens) {
  NgramCounts counts;
  for (size_t n = 1; n <= 4; ++n)
    for (size_t i = 0; i + n <= tokens.size(); ++i) ++counts[n - 1][ngram_key(tokens, i, n)];
  return counts;
}

std::vector<std::string> preprocess(std::string_view text, const BleuOptions& options) {
  std::string lowered;
  if (options.lowercase) {
    lowered = lowercase_utf8(text);
    text = lowered;
  }
  text = rstrip_whitespace(text);
  return options.tokenizer == BleuTokenizer::k13a ? tokenize_13a(text) : split_whitespace(text);
}

// sacreBLEU's my_log: log floored at -9999999999 for a zero precision, so the score becomes 0.
double floored_log(double x) {
  return x == 0.0 ? -9999999999.0 : std::log(x);
}

}  // namespace

std::vector<std::string> split_whitespace(std::string_view line) {
  std::vector<std::string> words;
  std::string word;
  for (size_t i = 0; i < line.size();) {
    char32_t cp;
    size_t len = utf8_decode_at(line, i, cp);
    if (len && is_python_space(cp)) {
      if (!word.empty()) words.push_back(std::move(word));
      word.clear();
    } else {
      word.append(line.substr(i, len ? len : 1));
    }
    i += len ? len : 1;
  }
  if (!word.empty()) words.push_back(std::move(word));
  return words;
}

std::string_view rstrip_whitespace(std::string_view line) {
  size_t end = 0;  // just past the last character that is not whitespace
  for (size_t i = 0; i < line.size();) {
    char32_t cp;
    size_t len = utf8_decode_at(line, i, cp);
    i += len ? len : 1;
    if (!len || !is_python_space(cp)) end = i;
  }
  return line.substr(0, end);
}

std::string lowercase_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    char32_t cp;
    size_t len = utf8_decode_at(text, i, cp);
    if (!len) {
      out += text[i++];
      continue;
    }
    if (cp == 0x130) {  // İ lowercases to two codepoints: i and a combining dot above
      out += 'i';
      utf8_append(out, 0x307);
    } else {
      utf8_append(out, lower_codepoint(cp));
    }
    i += len;
  }
  return out;
}

std::vector<std::string> tokenize_13a(std::string_view line) {
  std::string s(line);
  replace_all(s, "<skipped>", "");
  replace_all(s, "-\n", "");
  replace_all(s, "\n", " ");
  replace_all(s, "&quot;", "\"");
  replace_all(s, "&amp;", "&");
  replace_all(s, "&lt;", "<");
  replace_all(s, "&gt;", ">");
  s = " " + s + " ";

  std::string spaced;
  spaced.reserve(s.size() * 2);
  for (char c : s) {
    if (is_13a_punct(c)) {
      spaced += ' ';
      spaced += c;
      spaced += ' ';
    } else {
      spaced += c;
    }
  }
  auto not_digit = [](char c) { return !is_digit(c); };
  // Period and comma split off unless preceded by a digit ...
  spaced = sub_pairs(spaced, not_digit, is_period_or_comma,
                     [](std::string& o, char a, char b) { o += a, o += ' ', o += b, o += ' '; });
  // ... or unless followed by one, so "1,000.5" stays whole but "3.14." loses its final period.
  spaced = sub_pairs(spaced, is_period_or_comma, not_digit,
                     [](std::string& o, char a, char b) { o += ' ', o += a, o += ' ', o += b; });
  // A dash splits off only after a digit: "1-2" -> "1 - 2", "well-known" stays.
  spaced = sub_pairs(
      spaced, is_digit, [](char c) { return c == '-'; },
      [](std::string& o, char a, char b) { o += a, o += ' ', o += b, o += ' '; });
  return split_whitespace(spaced);
}

BleuStats& BleuStats::operator+=(const BleuStats& other) {
  for (size_t n = 0; n < 4; ++n) {
    matches[n] += other.matches[n];
    totals[n] += other.totals[n];
  }
  hyp_len += other.hyp_len;
  ref_len += other.ref_len;
  return *this;
}

BleuStats bleu_stats(const std::vector<std::string>& hyp_tokens,
                     const std::vector<std::vector<std::string>>& refs_tokens) {
  if (refs_tokens.empty()) throw ValueError("bleu_stats: no reference for the hypothesis");
  BleuStats stats;
  stats.hyp_len = static_cast<int64_t>(hyp_tokens.size());

  NgramCounts ref_max;  // per n-gram, its largest count in any one reference
  int64_t closest_diff = -1;
  for (const auto& ref : refs_tokens) {
    auto len = static_cast<int64_t>(ref.size());
    int64_t diff = std::abs(stats.hyp_len - len);
    if (closest_diff < 0 || diff < closest_diff || (diff == closest_diff && len < stats.ref_len)) {
      closest_diff = diff;
      stats.ref_len = len;
    }
    NgramCounts counts = count_ngrams(ref);
    for (size_t n = 0; n < 4; ++n)
      for (const auto& [gram, count] : counts[n])
        ref_max[n][gram] = std::max(ref_max[n][gram], count);
  }

  NgramCounts hyp = count_ngrams(hyp_tokens);
  for (size_t n = 0; n < 4; ++n) {
    for (const auto& [gram, count] : hyp[n]) {
      stats.totals[n] += count;
      auto it = ref_max[n].find(gram);
      if (it != ref_max[n].end()) stats.matches[n] += std::min(count, it->second);
    }
  }
  return stats;
}

BleuStats segment_bleu_stats(std::string_view hyp, const std::vector<std::string_view>& refs,
                             const BleuOptions& options) {
  std::vector<std::vector<std::string>> refs_tokens;
  for (std::string_view ref : refs)
    if (!ref.empty()) refs_tokens.push_back(preprocess(ref, options));
  if (refs_tokens.empty())
    throw ValueError(fmt::format("bleu: all {} references of the hypothesis are empty (hyp: '{}')",
                                 refs.size(), hyp));
  return bleu_stats(preprocess(hyp, options), refs_tokens);
}

BleuScore bleu_from_stats(const BleuStats& stats, const BleuOptions& options) {
  BleuScore s;
  s.hyp_len = stats.hyp_len;
  s.ref_len = stats.ref_len;
  s.ratio = stats.ref_len ? static_cast<double>(stats.hyp_len) / stats.ref_len : 0.0;
  if (stats.hyp_len < stats.ref_len)
    s.bp =
        stats.hyp_len > 0
            ? std::exp(1 - static_cast<double>(stats.ref_len) / static_cast<double>(stats.hyp_len))
            : 0.0;
  else
    s.bp = 1.0;

  // sacreBLEU 2.x returns 0 without smoothing when nothing matches at all (its issue #141).
  if (std::all_of(stats.matches.begin(), stats.matches.end(), [](int64_t m) { return m == 0; }))
    return s;

  double value = options.smooth_value.value_or(options.smooth == BleuSmooth::kFloor ? 0.1 : 1.0);
  double exp_factor = 1.0;
  size_t order = 4;
  for (size_t n = 1; n <= 4; ++n) {
    double correct = static_cast<double>(stats.matches[n - 1]);
    double total = static_cast<double>(stats.totals[n - 1]);
    if (options.smooth == BleuSmooth::kAddK && n > 1) correct += value, total += value;
    // No n-grams of this order (short sentences): the precision stays 0 and, unless the
    // effective order excludes it, zeroes the score.
    if (total == 0) break;
    if (options.effective_order) order = n;
    if (correct == 0) {
      if (options.smooth == BleuSmooth::kExp) {
        // mteval-v13a's smoothing: the k-th order without matches gets 1 / (2^k * total).
        exp_factor *= 2;
        s.precisions[n - 1] = 100.0 / (exp_factor * total);
      } else if (options.smooth == BleuSmooth::kFloor) {
        s.precisions[n - 1] = 100.0 * value / total;
      }
    } else {
      s.precisions[n - 1] = 100.0 * correct / total;
    }
  }
  double log_sum = 0;
  for (size_t n = 0; n < order; ++n) log_sum += floored_log(s.precisions[n]);
  s.score = s.bp * std::exp(log_sum / static_cast<double>(order));
  return s;
}

std::string BleuScore::str(int width) const {
  return fmt::format(
      "BLEU = {:.{}f} {:.1f}/{:.1f}/{:.1f}/{:.1f} (BP = {:.3f} ratio = {:.3f} hyp_len = {} "
      "ref_len = {})",
      score, width, precisions[0], precisions[1], precisions[2], precisions[3], bp, ratio, hyp_len,
      ref_len);
}

std::string bleu_zero_reason(const BleuStats& stats, const BleuOptions& options) {
  if (bleu_from_stats(stats, options).score >= 0.005) return "";
  if (stats.hyp_len == 0) return "BLEU is 0 because the output is empty.";
  for (size_t n = 1; n <= 4; ++n)
    if (stats.totals[n - 1] == 0 && !options.effective_order)
      return fmt::format(
          "BLEU is 0 because the output has no {}-grams (every sentence is shorter than {} "
          "tokens) and BLEU-4 multiplies the precisions of 1- to 4-grams; on so short a corpus it "
          "measures nothing (--effective-order leaves the missing orders out).",
          n, n);
  if (std::all_of(stats.matches.begin(), stats.matches.end(), [](int64_t m) { return m == 0; }))
    return fmt::format(
        "BLEU is 0 because not one word of the output ({} tokens) is in the references.",
        stats.totals[0]);
  std::string counts;
  for (size_t n = 0; n < 4; ++n)
    counts += fmt::format("{}{}/{}", n ? ", " : "", stats.matches[n], stats.totals[n]);
  return fmt::format("BLEU rounds to 0: its n-gram matches are so few ({} for n = 1..4).", counts);
}

void check_reference_streams(std::string_view caller, size_t n_hyps,
                             const std::vector<std::vector<std::string>>& refs) {
  if (refs.empty()) throw ValueError(fmt::format("{}: no reference stream", caller));
  for (size_t k = 0; k < refs.size(); ++k)
    if (refs[k].size() != n_hyps)
      throw ValueError(fmt::format("{}: {} hypotheses but reference stream {} has {} lines", caller,
                                   n_hyps, k + 1, refs[k].size()));
  for (size_t i = 0; i < n_hyps; ++i) {
    bool any = false;
    for (const auto& stream : refs) any = any || !stream[i].empty();
    if (!any)
      throw ValueError(fmt::format(
          "{}: line {}: every reference is empty (sacreBLEU refuses this too)", caller, i + 1));
  }
}

BleuStats corpus_bleu_stats(const std::vector<std::string>& hyps,
                            const std::vector<std::vector<std::string>>& refs,
                            const BleuOptions& options) {
  check_reference_streams("corpus_bleu", hyps.size(), refs);
  BleuStats total;
  std::vector<std::string_view> line_refs(refs.size());
  for (size_t i = 0; i < hyps.size(); ++i) {
    for (size_t k = 0; k < refs.size(); ++k) line_refs[k] = refs[k][i];
    total += segment_bleu_stats(hyps[i], line_refs, options);
  }
  return total;
}

BleuScore corpus_bleu(const std::vector<std::string>& hyps,
                      const std::vector<std::vector<std::string>>& refs,
                      const BleuOptions& options) {
  return bleu_from_stats(corpus_bleu_stats(hyps, refs, options), options);
}

std::string signature_nrefs(const std::vector<std::vector<std::string>>& refs) {
  std::set<size_t> counts;
  size_t lines = refs.empty() ? 0 : refs[0].size();
  for (size_t i = 0; i < lines; ++i) {
    size_t n = 0;
    for (const auto& stream : refs) n += i < stream.size() && !stream[i].empty();
    counts.insert(n);
  }
  return counts.size() > 1    ? "var"
         : counts.size() == 1 ? std::to_string(*counts.begin())
                              : std::to_string(refs.size());
}

std::string bleu_signature(const std::vector<std::vector<std::string>>& refs,
                           const BleuOptions& options) {
  std::string smooth;
  switch (options.smooth) {
    case BleuSmooth::kNone:
      smooth = "none";
      break;
    case BleuSmooth::kExp:
      smooth = "exp";
      break;
    case BleuSmooth::kFloor:
      smooth = fmt::format("floor[{:.2f}]", options.smooth_value.value_or(0.1));
      break;
    case BleuSmooth::kAddK:
      smooth = fmt::format("add-k[{:.2f}]", options.smooth_value.value_or(1.0));
      break;
  }
  return fmt::format("nrefs:{}|case:{}|eff:{}|tok:{}|smooth:{}|version:tapestry",
                     signature_nrefs(refs), options.lowercase ? "lc" : "mixed",
                     options.effective_order ? "yes" : "no",
                     options.tokenizer == BleuTokenizer::k13a ? "13a" : "none", smooth);
}

}  // namespace tapestry::models
