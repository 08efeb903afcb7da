// preprocess.py of a PyTorch export: tokens and vocabularies, as models/text.cpp makes them.
// One fixed source for every configuration: it reads config.json and the other files beside it.
#include "tools/export_pytorch.h"

namespace tapestry::cli {

std::string_view pytorch_preprocess_py() {
  return R"PY("""Text <-> tokens exactly as the Tapestry model's training data was tokenised.

A port of Tapestry's models/text.cpp and models/preprocess.cpp. preprocess.json names the mode:

  words     split at whitespace; optionally lower-case first and split punctuation off words
  chars     one token per character, a space becoming "_"
  tutorial  the normalisation of PyTorch's "Translation with a Sequence to Sequence Network and
            Attention" tutorial (lower-case, fold accents, keep a-z . ! ?), then split at spaces
  subword   SentencePiece pieces, by the models source.model and target.model beside this file
            (one file, source.model, for a joint vocabulary); needs Python's sentencepiece

Lower-casing and accent folding cover exactly the letters Tapestry's tables cover (ASCII,
Latin-1, Latin Extended-A, Greek, Cyrillic), so they are tables here too: Python's str.lower()
and unicodedata would change letters Tapestry leaves alone.
"""

import json
import os

SPACE_TOKEN = "_"  # chars mode: the token of a space

# The base letter of each Latin-1 (U+00C0..U+00FF) and Latin Extended-A (U+0100..U+017F) letter
# whose canonical decomposition is a letter and combining marks; '-' where there is none (so
# ß, æ, œ, ø, ł ... stay as they are, as unicodedata's NFD keeps them).
_LATIN1_BASE = "AAAAAA-CEEEEIIII-NOOOOO--UUUUY--aaaaaa-ceeeeiiii-nooooo--uuuuy-y"
_LATIN_EXT_A_BASE = (
    "AaAaAaCcCcCcCcDd--EeEeEeEeEeGgGgGgGgHh--IiIiIiIiI---JjKk-LlLlLl----NnNnNn---OoOoOo--"
    "RrRrRrSsSsSsSsTtTt--UuUuUuUuUuUuWwYyYZzZzZz-"
)

_WHITESPACE = {" ", "\t", "\n", "\r", "\v", "\f", "\u00a0"}
# . , ! ? ; : " ( ) [ ] { } and « » ¿ ¡ „ “ ” … — –
_SPLIT_PUNCTUATION = set('.,!?;:"()[]{}') | {"\u00ab", "\u00bb", "\u00bf", "\u00a1", "\u201e",
                                              "\u201c", "\u201d", "\u2026", "\u2014", "\u2013"}


def lower_char(ch):
    """Lower case of one character, for the scripts Tapestry handles (others unchanged)."""
    c = ord(ch)
    if 0x41 <= c <= 0x5A:  # A-Z
        return chr(c + 32)
    if c < 0xC0:
        return ch
    if c <= 0xDE:  # Latin-1 capitals, but not the multiplication sign
        return ch if c == 0xD7 else chr(c + 32)
    if c == 0x130:  # İ: Python gives i + a combining dot; Tapestry gives i
        return "i"
    if 0x100 <= c <= 0x137 or 0x14A <= c <= 0x177:  # pairs: capital even, small odd
        return chr(c | 1)
    if 0x139 <= c <= 0x148 or 0x179 <= c <= 0x17E:  # pairs: capital odd, small even
        return chr(c + 1) if c & 1 else ch
    if c == 0x178:  # Ÿ -> ÿ
        return "\u00ff"
    if 0x391 <= c <= 0x3A9 and c != 0x3A2:  # Greek capitals
        return chr(c + 32)
    if 0x410 <= c <= 0x42F:  # Cyrillic А..Я
        return chr(c + 32)
    if 0x400 <= c <= 0x40F:  # Cyrillic Ѐ..Џ
        return chr(c + 80)
    return ch


def to_lower(text):
    return "".join(lower_char(ch) for ch in text)


def base_letter(ch):
    """The letter without its accents ("é" -> "e"), for Latin-1 and Latin Extended-A."""
    c = ord(ch)
    base = "-"
    if 0xC0 <= c <= 0xFF:
        base = _LATIN1_BASE[c - 0xC0]
    elif 0x100 <= c <= 0x17F:
        base = _LATIN_EXT_A_BASE[c - 0x100]
    return ch if base == "-" else base


def fold_accents(text):
    return "".join(base_letter(ch) for ch in text)


def tokenize_words(line, lowercase=False, split_punctuation=False):
    """Whitespace tokens; punctuation split off as tokens of its own when asked. An apostrophe or
    hyphen inside a word stays ("l'homme", "t-shirt")."""
    tokens, current = [], []
    for ch in line:
        if lowercase:
            ch = lower_char(ch)
        if ch in _WHITESPACE:
            if current:
                tokens.append("".join(current))
            current = []
        elif split_punctuation and ch in _SPLIT_PUNCTUATION:
            if current:
                tokens.append("".join(current))
            tokens.append(ch)
            current = []
        else:
            current.append(ch)
    if current:
        tokens.append("".join(current))
    return tokens


_CLOSING = {".", ",", "!", "?", ";", ":", ")", "]", "}", "\u00bb", "\u201d", "\u2026"}
_OPENING = {"(", "[", "{", "\u00ab", "\u00bf", "\u00a1"}


def _is_letter(token):  # one ASCII letter
    return len(token) == 1 and token.isascii() and token.isalpha()


def detokenize_words(tokens, split_punctuation=False):
    """The inverse of tokenize_words for text as it is usually spaced: closing marks join the word
    before, opening marks the word after, a straight double quote opens and closes in turn, \u201c
    closes a \u201e and opens otherwise, a . or , between digits joins both, as does a . between
    initials; dashes keep their spaces."""
    out = []
    glue_next = straight_open = low_open = False
    for i, t in enumerate(tokens):
        space = bool(out) and not glue_next
        glue_next = False
        if not split_punctuation:
            pass
        elif t in _CLOSING:
            space = False
            glue_next = (t in (".", ",") and 0 < i < len(tokens) - 1 and tokens[i - 1][-1:].isascii()
                         and tokens[i - 1][-1:].isdigit() and tokens[i + 1][:1].isascii()
                         and tokens[i + 1][:1].isdigit())
            glue_next = glue_next or (t == "." and 0 < i < len(tokens) - 2
                                      and _is_letter(tokens[i - 1]) and _is_letter(tokens[i + 1])
                                      and tokens[i + 2] == ".")
        elif t in _OPENING:
            glue_next = True
        elif t == '"':
            if straight_open:
                space = False
            glue_next = not straight_open
            straight_open = not straight_open
        elif t == "\u201e":
            glue_next = low_open = True
        elif t == "\u201c":
            if low_open:
                space = low_open = False
            else:
                glue_next = True
        if space:
            out.append(" ")
        out.append(t)
    return "".join(out)


def tutorial_normalize(text):
    """normalizeString of the PyTorch tutorial: lower-case, fold accents, strip, " \\1" before
    each of . ! ?, then every run of characters other than a-z . ! ? becomes one space."""
    chars = [base_letter(lower_char(ch)) for ch in text]
    begin, end = 0, len(chars)
    while begin < end and chars[begin] in _WHITESPACE:
        begin += 1
    while end > begin and chars[end - 1] in _WHITESPACE:
        end -= 1
    out = []
    in_run = False  # inside a run of characters other than a-z . ! ?
    for ch in chars[begin:end]:
        if ch in ".!?":  # re.sub(r"([.!?])", r" \1"): that space joins a run already open
            if not in_run:
                out.append(" ")
            in_run = False
            out.append(ch)
        elif "a" <= ch <= "z":
            in_run = False
            out.append(ch)
        elif not in_run:
            out.append(" ")
            in_run = True
    return "".join(out)


class Preprocess:
    """How a line of text becomes tokens, and tokens a line (preprocess.json)."""

    def __init__(self, mode="words", lowercase=False, split_punctuation=False, subword=None,
                 here="."):
        if mode not in ("words", "chars", "tutorial", "subword"):
            raise ValueError(
                f"preprocess: unknown mode '{mode}' (valid: words, chars, tutorial, subword)")
        self.mode = mode
        self.lowercase = lowercase  # words and subword modes
        self.split_punctuation = split_punctuation  # words mode only
        self.source_pieces = self.target_pieces = None
        if mode == "subword":
            try:
                import sentencepiece
            except ImportError:
                raise ImportError("preprocess: this model's subword units need Python's "
                                  "sentencepiece (Debian: apt-get install python3-sentencepiece; "
                                  "pip install sentencepiece)") from None

            def load(name):
                return sentencepiece.SentencePieceProcessor(model_file=os.path.join(here, name))

            self.source_pieces = load(subword["source"])
            self.target_pieces = self.source_pieces if subword["joint"] else load(subword["target"])

    @classmethod
    def load(cls, path):
        with open(path, encoding="utf-8") as f:
            j = json.load(f)
        return cls(j["mode"], j["lowercase"], j["split_punctuation"], j.get("subword"),
                   os.path.dirname(os.path.abspath(path)))

    def _split(self, line, pieces):
        if self.mode == "words":
            return tokenize_words(line, self.lowercase, self.split_punctuation)
        if self.mode == "tutorial":
            return tokenize_words(tutorial_normalize(line))
        if self.mode == "subword":
            return pieces.encode(to_lower(line) if self.lowercase else line, out_type=str)
        return [SPACE_TOKEN if ch == " " else ch for ch in line]

    def tokenize(self, line):
        """A source sentence's tokens."""
        return self._split(line, self.source_pieces)

    def tokenize_target(self, line):
        """A target sentence's tokens (subword models may segment each language its own way)."""
        return self._split(line, self.target_pieces)

    def detokenize(self, tokens):
        """Target tokens -> text. Words are joined by spaces, split punctuation rejoining its word
        (detokenize_words); characters are joined, "_" turning back into a space; SentencePiece
        joins pieces into plain text."""
        if self.mode == "subword":
            return self.target_pieces.decode_pieces(tokens)
        if self.mode == "chars":
            return "".join(" " if t == SPACE_TOKEN else t for t in tokens)
        return detokenize_words(tokens, self.mode == "words" and self.split_punctuation)


class Vocab:
    """Tokens <-> ids. The first four ids are the specials <pad> 0, <bos> 1, <eos> 2, <unk> 3."""

    SPECIALS = ["<pad>", "<bos>", "<eos>", "<unk>"]
    PAD, BOS, EOS, UNK = 0, 1, 2, 3

    def __init__(self, tokens):
        if tokens[:4] != self.SPECIALS:
            raise ValueError("vocab: the list must start with <pad>, <bos>, <eos>, <unk>")
        self.tokens = list(tokens)
        self.index = {t: i for i, t in enumerate(self.tokens)}

    @classmethod
    def load(cls, path):
        with open(path, encoding="utf-8") as f:
            return cls(json.load(f))

    def __len__(self):
        return len(self.tokens)

    def encode(self, tokens):
        """Ids of the tokens; a token not in the vocabulary becomes <unk>."""
        return [self.index.get(t, self.UNK) for t in tokens]

    def decode(self, ids):
        """The tokens of ids up to the first <eos>, without <bos> and <pad>."""
        out = []
        for i in ids:
            if i == self.EOS:
                break
            if i not in (self.BOS, self.PAD):
                out.append(self.tokens[i])
        return out
)PY";
}

}  // namespace tapestry::cli
