// Text handling: UTF-8 checking, lower-casing, accent folding, punctuation splitting and the
// normalisation of PyTorch's seq2seq translation tutorial.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tapestry::models {

// The byte offset of the first invalid UTF-8 sequence in `s`, or nullopt if it is valid.
std::optional<size_t> invalid_utf8_at(std::string_view s);

// Decodes the UTF-8 sequence that starts at s[i] into cp; returns its length in bytes, or 0 where
// the bytes there are not valid UTF-8 (truncated, overlong, a surrogate, beyond U+10FFFF).
size_t utf8_decode_at(std::string_view s, size_t i, char32_t& cp);
// Appends cp as UTF-8.
void utf8_append(std::string& out, char32_t cp);

// Code points <-> UTF-8 (the input must be valid; see invalid_utf8_at).
std::vector<char32_t> utf8_decode(std::string_view s);
std::string utf8_encode(const std::vector<char32_t>& cps);

// Lower case for ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic letters (others unchanged),
// so "Über DAS Café" becomes "über das café".
std::string to_lower(std::string_view s);

// What Python's unicodedata.normalize('NFD', s) followed by dropping combining marks (category
// Mn) does to Latin-1 and Latin Extended-A text: "é" -> "e", "Ü" -> "U". Letters without a
// canonical decomposition (ß, æ, œ, ø, ł, ...) are kept, as NFD keeps them.
std::string fold_accents(std::string_view s);

struct TextOptions {
  bool lowercase = false;
  // Splits punctuation off words: . , ! ? ; : " ( ) [ ] { } and « » „ “ ” ¿ ¡ … — –; an apostrophe
  // or hyphen inside a word stays ("l'homme", "t-shirt").
  bool split_punctuation = false;
};

// Whitespace tokenisation after the options above (UTF-8 survives untouched otherwise).
std::vector<std::string> tokenize(std::string_view line, const TextOptions& options);

// The inverse of tokenize for text as it is usually spaced, so that a word-level model's output
// can be scored against raw references: without split_punctuation the tokens are joined by
// spaces; with it, closing marks (. , ! ? ; : ) ] } » ” …) join the word before, opening marks
// (( [ { « „ ¿ ¡) the word after, a straight double quote opens and closes in turn, “ closes
// a „ and opens otherwise, a . or , between digits joins both ("3 . 5" -> "3.5"), as does
// a . between initials ("E . S . E ." -> "E.S.E."); dashes keep their spaces.
// detokenize(tokenize(s)) == s for such text; lower-casing is not undone.
std::string detokenize(const std::vector<std::string>& tokens, const TextOptions& options);

// normalizeString of the PyTorch tutorial "Translation with a Sequence to Sequence Network and
// Attention": lower-case, strip, fold accents, " \1" before each of . ! ?, then every run of
// characters other than a-z . ! ? becomes one space. Returns the normalised string.
std::string tutorial_normalize(std::string_view s);
// The tutorial's filterPair on normalised strings: both sides under 10 words (split on ' ') and the
// English side starting with "i am ", "i m ", "he is", "he s ", "she is", "she s ", "you are",
// "you re ", "we are", "we re ", "they are" or "they re ".
bool tutorial_keep(std::string_view english, std::string_view other);

}  // namespace tapestry::models
