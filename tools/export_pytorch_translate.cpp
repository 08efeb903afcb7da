// translate.py of a PyTorch export: translates (and scores) as `tapestry translate` does.
// One fixed source for every configuration: it reads config.json and the other files beside it.
#include "tools/export_pytorch.h"

namespace tapestry::cli {

std::string_view pytorch_translate_py() {
  return R"PY(#!/usr/bin/env python3
"""Translates one sentence per line with the exported model, as `tapestry translate` does.

    python3 translate.py < input.txt                  greedy, one translation per line
    python3 translate.py --beam 5 --input input.txt   beam search
    python3 translate.py --beam 5 --nbest 3 < in.txt  Moses' n-best lines: INDEX ||| TEXT ||| SCORE
    python3 translate.py --loss src.txt ref.txt       teacher-forced loss of the pairs, as JSON

An empty line (or one with no tokens) gives an empty line. Unknown words become <unk>.
"""

import argparse
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model import MAX_SOURCE_TOKENS, DecodeOptions, decode, load_model, make_batch  # noqa: E402
from preprocess import Preprocess, Vocab  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def split_lines(data, where):
    """UTF-8 lines as tapestry reads them: a byte-order mark at the start is dropped, lines end at
    "\\n" (a "\\r" before it, or at the very end, belongs to the ending), a final newline ends the
    last line; invalid UTF-8 and control characters other than tab are refused with the line."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    out = []
    for number, line in enumerate(lines, 1):
        if line.endswith(b"\r"):
            line = line[:-1]
        try:
            text = line.decode("utf-8")
            bad = len(line)
        except UnicodeDecodeError as e:
            text, bad = None, e.start
        control = next((i for i, b in enumerate(line[:bad]) if (b < 0x20 and b != 9) or b == 0x7F),
                       None)
        if control is not None:
            raise ValueError(f"{where}:{number}: control character U+{line[control]:04X} at byte "
                             f"{control + 1} of the line")
        if text is None:
            raise ValueError(f"{where}:{number}: invalid UTF-8 at byte {bad + 1} of the line")
        out.append(text)
    return out


def read_file_lines(path):
    """A file's lines, right-stripped of whitespace (as tapestry reads --input, --src, --ref)."""
    with open(path, "rb") as f:
        return [line.rstrip() for line in split_lines(f.read(), path)]


def batches_by_length(pairs, batch_size):
    """Indices of the pairs in batches of similar source length (stable sort by length)."""
    order = sorted(range(len(pairs)), key=lambda i: len(pairs[i][0]))
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]


def translate_lines(model, prep, src_vocab, tgt_vocab, lines, options, batch_size):
    """Per line, its n-best (text, score) list; [] for a line with no tokens. A line of more
    than MAX_SOURCE_TOKENS tokens is cut to its first MAX_SOURCE_TOKENS, as tapestry translate
    cuts it (said on standard error: the first 5 lines, then a count)."""
    pairs, where, cut = [], [], 0
    for i, line in enumerate(lines):
        tokens = prep.tokenize(line)
        if len(tokens) > MAX_SOURCE_TOKENS:
            cut += 1
            if cut <= 5:
                print(f"translate.py: line {i + 1}: {len(tokens)} tokens, more than the "
                      f"{MAX_SOURCE_TOKENS} a sentence may have; translating its first "
                      f"{MAX_SOURCE_TOKENS}", file=sys.stderr)
            tokens = tokens[:MAX_SOURCE_TOKENS]
        if tokens:
            pairs.append((src_vocab.encode(tokens), None))
            where.append(i)
    if cut > 5:
        print(f"translate.py: {cut} lines were cut to their first {MAX_SOURCE_TOKENS} tokens",
              file=sys.stderr)
    out = [[] for _ in lines]
    for rows in batches_by_length(pairs, batch_size):
        hyps = decode(model, make_batch([pairs[r] for r in rows]), options)
        for r, nbest in zip(rows, hyps):
            out[where[r]] = [(prep.detokenize(tgt_vocab.decode(h.tokens)), h.score) for h in nbest]
    return out


def pair_losses(model, prep, src_vocab, tgt_vocab, src_lines, ref_lines, batch_size):
    """The teacher-forced loss of every pair: the sum of -log p over its target tokens (with
    <eos>) and their count."""
    if len(src_lines) != len(ref_lines):
        raise ValueError(f"the source has {len(src_lines)} lines but the reference has "
                         f"{len(ref_lines)}: they must align")
    pairs = []
    for number, (src, ref) in enumerate(zip(src_lines, ref_lines), 1):
        src_tokens = prep.tokenize(src)
        if not src_tokens:
            raise ValueError(f"source line {number}: empty source sentence")
        pairs.append((src_vocab.encode(src_tokens), tgt_vocab.encode(prep.tokenize_target(ref))))
    sums, counts = [0.0] * len(pairs), [0] * len(pairs)
    with torch.no_grad():
        for rows in batches_by_length(pairs, batch_size):
            batch = make_batch([pairs[r] for r in rows])
            losses = model.token_losses(batch).double()  # each token's loss, summed in float64
            for k, r in enumerate(rows):
                sums[r] = float(losses[k].sum())
                counts[r] = len(pairs[r][1]) + 1
    return sums, counts


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="translate.py",
        description="Translate one sentence per line with the exported Tapestry model.")
    p.add_argument("--input", help="read sentences from this file instead of standard input")
    p.add_argument("--beam", type=int, default=1, help="beam width (1: greedy) [1]")
    p.add_argument("--nbest", type=int, default=1,
                   help="translations per sentence, at most the beam width [1]")
    p.add_argument("--max-len-ratio", type=float, default=2.0,
                   help="stop after ratio * source length + max-len-extra tokens, at most "
                        "4096 [2]")
    p.add_argument("--max-len-extra", type=int, default=5, help="see --max-len-ratio [5]")
    p.add_argument("--length-penalty", type=float, default=1.0,
                   help="rank by log p / length^alpha [1]")
    p.add_argument("--batch-size", type=int, default=64, help="sentences decoded together [64]")
    p.add_argument("--loss", nargs=2, metavar=("SRC", "REF"),
                   help="print the teacher-forced loss of these aligned files as JSON instead")
    p.add_argument("--dtype", choices=["float32", "float64"], default="float32",
                   help="compute in this precision [float32, as the model was trained]")
    args = p.parse_args(argv)
    if args.beam < 1 or args.nbest < 1 or args.batch_size < 1:
        p.error("--beam, --nbest and --batch-size must be at least 1")
    if args.nbest > args.beam:
        p.error(f"--nbest {args.nbest} is larger than --beam {args.beam}")
    if not (args.max_len_ratio >= 0 and args.max_len_extra >= 0 and args.length_penalty >= 0):
        p.error("--max-len-ratio, --max-len-extra and --length-penalty must not be negative")
    return args


def main(argv=None, stdin=None, stdout=None):
    args = parse_args(argv)
    stdout = stdout or sys.stdout
    dtype = torch.float64 if args.dtype == "float64" else torch.float32
    try:
        model = load_model(HERE, dtype)
        prep = Preprocess.load(os.path.join(HERE, "preprocess.json"))
        src_vocab = Vocab.load(os.path.join(HERE, "src_vocab.json"))
        tgt_vocab = Vocab.load(os.path.join(HERE, "tgt_vocab.json"))
        if args.loss:
            src_lines, ref_lines = (read_file_lines(path) for path in args.loss)
            sums, counts = pair_losses(model, prep, src_vocab, tgt_vocab, src_lines, ref_lines,
                                       args.batch_size)
            loss = sum(sums) / max(sum(counts), 1)
            stdout.write(json.dumps({
                "loss": loss, "perplexity": math.exp(loss), "tokens": sum(counts),
                "dtype": args.dtype,
                "sentences": [{"loss": s / n, "tokens": n} for s, n in zip(sums, counts)],
            }) + "\n")
            return 0
        if args.input:
            lines = read_file_lines(args.input)
        else:
            lines = split_lines((stdin or sys.stdin.buffer).read(), "<stdin>")
        options = DecodeOptions(args.beam, args.nbest, args.max_len_ratio, args.max_len_extra,
                                args.length_penalty)
        outputs = translate_lines(model, prep, src_vocab, tgt_vocab, lines, options,
                                  args.batch_size)
    except (OSError, ValueError) as e:
        print(f"translate.py: error: {e}", file=sys.stderr)
        return 1
    for i, nbest in enumerate(outputs):
        if args.nbest > 1:
            if not nbest:
                stdout.write(f"{i} |||  ||| 0\n")
            for text, score in nbest:
                stdout.write(f"{i} ||| {text} ||| {score:.4f}\n")
        else:
            stdout.write((nbest[0][0] if nbest else "") + "\n")
    return 0


if __name__ == "__main__":
    sys.stdout.reconfigure(encoding="utf-8")
    sys.exit(main())
)PY";
}

}  // namespace tapestry::cli
