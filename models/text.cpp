// Text handling: a small UTF-8 codec and tables for case and accents of the Latin scripts.
#include "tapestry/models/text.h"

#include <algorithm>
#include <array>

#include "tapestry/core/errors.h"

namespace tapestry::models {

size_t utf8_decode_at(std::string_view s, size_t i, char32_t& out) {
  const auto c = static_cast<unsigned char>(s[i]);
  size_t n = 0;
  char32_t cp = 0, min = 0;
  if (c < 0x80) {
    out = c;
    return 1;
  } else if ((c & 0xE0) == 0xC0) {
    n = 1, cp = c & 0x1F, min = 0x80;
  } else if ((c & 0xF0) == 0xE0) {
    n = 2, cp = c & 0x0F, min = 0x800;
  } else if ((c & 0xF8) == 0xF0) {
    n = 3, cp = c & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (i + n >= s.size()) return 0;
  for (size_t k = 1; k <= n; ++k) {
    const auto cc = static_cast<unsigned char>(s[i + k]);
    if ((cc & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (cc & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  out = cp;
  return n + 1;
}

void utf8_append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

namespace {

char32_t lower(char32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c < 0xC0) return c;
  if (c <= 0xDE) return c == 0xD7 ? c : c + 32;  // Latin-1 capitals, not the multiplication sign
  if (c == 0x130) return 'i';                    // İ: Python gives i + combining dot
  if (c >= 0x100 && c <= 0x137) return c | 1;    // pairs capital (even), small (odd)
  if (c >= 0x139 && c <= 0x148) return (c & 1) ? c + 1 : c;  // capital odd, small even
  if (c >= 0x14A && c <= 0x177) return c | 1;
  if (c == 0x178) return 0xFF;  // Ÿ -> ÿ
  if (c >= 0x179 && c <= 0x17E) return (c & 1) ? c + 1 : c;
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;  // Greek
  if (c >= 0x410 && c <= 0x42F) return c + 32;                // Cyrillic А..Я
  if (c >= 0x400 && c <= 0x40F) return c + 80;                // Cyrillic Ѐ..Џ
  return c;
}

// The base letter of each Latin-1 (U+00C0..U+00FF) and Latin Extended-A (U+0100..U+017F) letter
// whose canonical decomposition is a letter and combining marks; '-' where there is none.
constexpr std::string_view kLatin1Base =
    "AAAAAA-CEEEEIIII-NOOOOO--UUUUY--aaaaaa-ceeeeiiii-nooooo--uuuuy-y";
constexpr std::string_view kLatinExtABase =
    "AaAaAaCcCcCcCcDd--EeEeEeEeEeGgGgGgGgHh--IiIiIiIiI---JjKk-LlLlLl----NnNnNn---OoOoOo--RrRrRrSsSs"
    "SsSsTtTt--UuUuUuUuUuUuWwYyYZzZzZz-";
static_assert(kLatin1Base.size() == 64 && kLatinExtABase.size() == 128);

char32_t base_letter(char32_t c) {
  char b = '-';
  if (c >= 0xC0 && c <= 0xFF) b = kLatin1Base[c - 0xC0];
  if (c >= 0x100 && c <= 0x17F) b = kLatinExtABase[c - 0x100];
  return b == '-' ? c : static_cast<char32_t>(b);
}

bool is_space(char32_t c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' || c == 0xA0;
}

bool is_split_punctuation(char32_t c) {
  static constexpr std::string_view ascii = ".,!?;:\"()[]{}";
  if (c < 0x80) return ascii.find(static_cast<char>(c)) != std::string_view::npos;
  switch (c) {
    case 0xAB:    // «
    case 0xBB:    // »
    case 0xBF:    // ¿
    case 0xA1:    // ¡
    case 0x201E:  // „
    case 0x201C:  // “
    case 0x201D:  // ”
    case 0x2026:  // …
    case 0x2014:  // —
    case 0x2013:  // –
      return true;
    default:
      return false;
  }
}

}  // namespace

std::optional<size_t> invalid_utf8_at(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    char32_t cp;
    const size_t n = utf8_decode_at(s, i, cp);
    if (n == 0) return i;
    i += n;
  }
  return std::nullopt;
}

std::vector<char32_t> utf8_decode(std::string_view s) {
  std::vector<char32_t> out;
  for (size_t i = 0; i < s.size();) {
    char32_t cp;
    const size_t n = utf8_decode_at(s, i, cp);
    if (n == 0) throw ValueError("utf8: invalid UTF-8 at byte " + std::to_string(i));
    out.push_back(cp);
    i += n;
  }
  return out;
}

std::string utf8_encode(const std::vector<char32_t>& cps) {
  std::string out;
  for (char32_t c : cps) utf8_append(out, c);
  return out;
}

std::string to_lower(std::string_view s) {
  std::vector<char32_t> cps = utf8_decode(s);
  for (char32_t& c : cps) c = lower(c);
  return utf8_encode(cps);
}

std::string fold_accents(std::string_view s) {
  std::vector<char32_t> cps = utf8_decode(s);
  for (char32_t& c : cps) c = base_letter(c);
  return utf8_encode(cps);
}

std::vector<std::string> tokenize(std::string_view line, const TextOptions& options) {
  std::vector<char32_t> cps = utf8_decode(line);
  std::vector<std::string> tokens;
  std::string current;
  auto flush = [&] {
    if (!current.empty()) tokens.push_back(std::move(current));
    current.clear();
  };
  for (char32_t c : cps) {
    if (options.lowercase) c = lower(c);
    if (is_space(c)) {
      flush();
    } else if (options.split_punctuation && is_split_punctuation(c)) {
      flush();
      utf8_append(current, c);
      flush();
    } else {
      utf8_append(current, c);
    }
  }
  flush();
  return tokens;
}

namespace {
enum class Mark { word, closing, opening, straight_quote, low_quote, high_quote };

Mark mark_of(const std::string& token) {
  static constexpr std::string_view closing[] = {".", ",", "!", "?", ";", ":",
                                                 ")", "]", "}", "»", "”", "…"};
  static constexpr std::string_view opening[] = {"(", "[", "{", "«", "¿", "¡"};
  if (token == "\"") return Mark::straight_quote;
  if (token == "„") return Mark::low_quote;
  if (token == "“") return Mark::high_quote;
  for (std::string_view c : closing)
    if (token == c) return Mark::closing;
  for (std::string_view o : opening)
    if (token == o) return Mark::opening;
  return Mark::word;
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_letter(const std::string& token) {  // one ASCII letter
  return token.size() == 1 &&
         ((token[0] >= 'a' && token[0] <= 'z') || (token[0] >= 'A' && token[0] <= 'Z'));
}
}  // namespace

std::string detokenize(const std::vector<std::string>& tokens, const TextOptions& options) {
  std::string out;
  bool glue_next = false;      // the previous token opened: no space before this one
  bool straight_open = false;  // a " has opened and not yet closed
  bool low_open = false;       // a „ has opened: the next “ closes it
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string& t = tokens[i];
    bool space = !out.empty() && !glue_next;
    glue_next = false;
    switch (options.split_punctuation ? mark_of(t) : Mark::word) {
      case Mark::word:
        break;
      case Mark::closing: {
        space = false;
        // "3 . 5" -> "3.5", "1 , 000" -> "1,000": the tokenizer split a number.
        const bool in_number = (t == "." || t == ",") && i > 0 && i + 1 < tokens.size() &&
                               !tokens[i - 1].empty() && is_digit(tokens[i - 1].back()) &&
                               !tokens[i + 1].empty() && is_digit(tokens[i + 1].front());
        // "E . S . E ." -> "E.S.E.": a letter, a full stop, and another letter with its own.
        const bool in_initials = t == "." && i > 0 && i + 2 < tokens.size() &&
                                 is_letter(tokens[i - 1]) && is_letter(tokens[i + 1]) &&
                                 tokens[i + 2] == ".";
        glue_next = in_number || in_initials;
        break;
      }
      case Mark::opening:
        glue_next = true;
        break;
      case Mark::straight_quote:
        if (straight_open) space = false;
        glue_next = !straight_open;
        straight_open = !straight_open;
        break;
      case Mark::low_quote:
        glue_next = true;
        low_open = true;
        break;
      case Mark::high_quote:
        if (low_open) {
          space = false;
          low_open = false;
        } else {
          glue_next = true;
        }
        break;
    }
    if (space) out += ' ';
    out += t;
  }
  return out;
}

std::string tutorial_normalize(std::string_view s) {
  std::vector<char32_t> cps = utf8_decode(s);
  for (char32_t& c : cps) c = base_letter(lower(c));
  // strip()
  size_t begin = 0, end = cps.size();
  while (begin < end && is_space(cps[begin])) ++begin;
  while (end > begin && is_space(cps[end - 1])) --end;
  std::string out;
  bool in_run = false;  // inside a run of characters other than a-z . ! ?
  auto keep = [](char32_t c) { return (c >= 'a' && c <= 'z') || c == '.' || c == '!' || c == '?'; };
  for (size_t i = begin; i < end; ++i) {
    const char32_t c = cps[i];
    if (c == '.' || c == '!' || c == '?') {  // re.sub(r"([.!?])", r" \1"): a space joins the run
      if (!in_run) out += ' ';
      in_run = false;
      out += static_cast<char>(c);
    } else if (keep(c)) {
      in_run = false;
      out += static_cast<char>(c);
    } else if (!in_run) {
      out += ' ';
      in_run = true;
    }
  }
  return out;
}

bool tutorial_keep(std::string_view english, std::string_view other) {
  static constexpr std::array<std::string_view, 12> prefixes = {
      "i am ",   "i m ",    "he is",  "he s ",  "she is",   "she s ",
      "you are", "you re ", "we are", "we re ", "they are", "they re "};
  auto words = [](std::string_view s) { return std::count(s.begin(), s.end(), ' ') + 1; };
  if (words(english) >= 10 || words(other) >= 10) return false;
  return std::any_of(prefixes.begin(), prefixes.end(),
                     [&](std::string_view p) { return english.substr(0, p.size()) == p; });
}

}  // namespace tapestry::models
