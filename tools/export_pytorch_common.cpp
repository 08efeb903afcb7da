// The part of model.py both architectures share: batches, the loss, greedy and beam search as
// models/decode.cpp runs them, and loading the package's weights.
#include "tools/export_pytorch.h"

namespace tapestry::cli {

std::string_view pytorch_common_py() {
  return R"PY(

# -------------------------------------------------------------------------------------------------
# Batches and the loss


@dataclass
class Batch:
    """Padded id tensors. A target y_1..y_n is read as <bos> y_1..y_n (tgt_in) and predicted as
    y_1..y_n <eos> (tgt_out); sources carry neither <bos> nor <eos>."""

    src: torch.Tensor  # (B,S), <pad> after each row's length
    src_lengths: torch.Tensor  # (B,)
    tgt_in: torch.Tensor = None  # (B,T): <bos> y_1 .. y_n, then <pad>
    tgt_out: torch.Tensor = None  # (B,T): y_1 .. y_n <eos>, then <pad>


def make_batch(pairs):
    """A batch from (source ids, target ids) pairs; a target may be None (translation only).
    Every source needs at least one token."""
    b = len(pairs)
    s = max(len(src) for src, _ in pairs)
    src = torch.full((b, s), PAD, dtype=torch.long)
    for r, (ids, _) in enumerate(pairs):
        if not ids:
            raise ValueError(f"batch: row {r} has an empty source (nothing to attend to)")
        src[r, :len(ids)] = torch.tensor(ids, dtype=torch.long)
    lengths = torch.tensor([len(ids) for ids, _ in pairs], dtype=torch.long)
    if any(tgt is None for _, tgt in pairs):
        return Batch(src, lengths)
    t = max(len(tgt) for _, tgt in pairs) + 1
    tgt_in = torch.full((b, t), PAD, dtype=torch.long)
    tgt_out = torch.full((b, t), PAD, dtype=torch.long)
    for r, (_, ids) in enumerate(pairs):
        tgt_in[r, :len(ids) + 1] = torch.tensor([BOS] + list(ids), dtype=torch.long)
        tgt_out[r, :len(ids) + 1] = torch.tensor(list(ids) + [EOS], dtype=torch.long)
    return Batch(src, lengths, tgt_in, tgt_out)


def cross_entropy(logits, targets):
    """-log softmax(z)[t] per row, as Tapestry computes it: log1p(rest) + (m - z_t) with
    m = max_j z_j and rest = sum_j exp(z_j - m) - 1 (the maximum's terms counted exactly). A
    confident model's loss (1e-5, say) keeps its digits, where log(sum exp(z_j - m)) would round
    1 + 1e-5 in float32."""
    m = logits.max(dim=-1, keepdim=True).values
    d = logits - m
    is_max = d == 0
    rest = torch.where(is_max, torch.zeros_like(d), torch.exp(d)).sum(dim=-1)
    rest = rest + (is_max.sum(dim=-1).to(d.dtype) - 1)
    target = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # z_t
    return torch.log1p(rest) + (m.squeeze(-1) - target)


# -------------------------------------------------------------------------------------------------
# Decoding: greedy and beam search, as models/decode.cpp. The model's start_decoding(batch, rows)
# gives the state of the search, whose step(y, t) feeds the previous tokens y (B,) at step t
# (from 0) and returns the logits (B,V) of the next, and whose select(rows) makes row i continue
# from row rows[i].

# Tapestry's bounds, so that decoding's memory stays bounded whatever the input and the options:
# a longer source is refused (translate.py cuts it first, and says so), and no translation runs
# past MAX_OUTPUT_TOKENS steps (it then ends unfinished).
MAX_SOURCE_TOKENS = 1024
MAX_OUTPUT_TOKENS = 4096


@dataclass
class DecodeOptions:
    beam: int = 1  # beam width k (1: greedy)
    nbest: int = 1  # hypotheses returned per sentence, at most k
    max_len_ratio: float = 2.0  # a sentence stops after ceil(ratio * S_b) + extra tokens,
    max_len_extra: int = 5  # <eos> included, and at most MAX_OUTPUT_TOKENS
    length_penalty: float = 1.0  # rank by log p / steps^alpha (0: raw log-probability)


@dataclass
class Hypothesis:
    tokens: list = field(default_factory=list)  # ids, without <eos>
    finished: bool = False  # ended with <eos> (False: stopped at the maximum length)
    log_prob: float = 0.0  # sum of the log-probabilities of every step taken
    score: float = 0.0  # log_prob / steps^length_penalty

    @property
    def steps(self):  # the tokens and the final <eos>
        return len(self.tokens) + (1 if self.finished else 0)

    def copy(self):
        return Hypothesis(list(self.tokens), self.finished, self.log_prob, self.score)


def max_decode_steps(options, src_len):
    """ceil(max_len_ratio * S_b) + max_len_extra, at most MAX_OUTPUT_TOKENS (so that an infinite
    or huge ratio gives the bound, as in Tapestry, and no decoding runs without end)."""
    ratio_steps = options.max_len_ratio * src_len
    if not ratio_steps < MAX_OUTPUT_TOKENS:
        return MAX_OUTPUT_TOKENS
    return min(math.ceil(ratio_steps) + options.max_len_extra, MAX_OUTPUT_TOKENS)


def step_limit(model, options, src_len):
    """max_decode_steps, and for a model with a last position (learned positions) at most that
    many steps: the hypothesis then ends unfinished, as at any other limit."""
    last = getattr(model, "position_limit", MAX_OUTPUT_TOKENS)
    return min(max_decode_steps(options, src_len), last)


def normalised(log_prob, steps, alpha):
    return log_prob if alpha == 0 else log_prob / float(max(steps, 1)) ** alpha


def output_log_probs(logits):
    """log p(y_t = j) (B,V): a log-softmax over the tokens a translation may hold (<eos> and up);
    <pad> and <bos> get exactly -inf. Computed as (z_j - m) - log1p(rest), with m and rest as in
    cross_entropy(), over the ids >= <eos>."""
    z = logits[:, EOS:]
    m = z.max(dim=1, keepdim=True).values
    d = z - m
    is_max = d == 0
    rest = torch.where(is_max, torch.zeros_like(d), torch.exp(d)).sum(dim=1, keepdim=True)
    log_sum = torch.log1p(rest + (is_max.sum(dim=1, keepdim=True).to(d.dtype) - 1))
    out = (logits - m) - log_sum
    out[:, PAD] = float("-inf")
    out[:, BOS] = float("-inf")
    return out


@torch.no_grad()
def greedy_decode(model, batch, options=DecodeOptions()):
    """The most probable token at each step (the lowest id among equals), until <eos> or the
    length limit. Returns one [Hypothesis] per batch row."""
    b = batch.src.size(0)
    decoding = model.start_decoding(batch)
    hyps = [Hypothesis() for _ in range(b)]
    limits = [step_limit(model, options, int(n)) for n in batch.src_lengths]
    done = [False] * b
    y = torch.full((b,), BOS, dtype=torch.long)
    for t in range(max(limits)):
        if all(done):
            break
        lp = output_log_probs(decoding.step(y, t))
        top = lp.max(dim=1, keepdim=True).values
        ids = torch.arange(lp.size(1)).expand_as(lp)
        y = torch.where(lp == top, ids, lp.size(1)).min(dim=1).values  # the first best id
        for r in range(b):
            if done[r]:
                continue
            h = hyps[r]
            h.log_prob += float(top[r])
            token = int(y[r])
            if token == EOS:
                h.finished = True
            else:
                h.tokens.append(token)
            done[r] = h.finished or h.steps >= limits[r]
    for h in hyps:
        h.score = normalised(h.log_prob, h.steps, options.length_penalty)
    return [[h] for h in hyps]


@dataclass
class _BeamSentence:
    alive: list  # k slots; dead ones have log_prob -inf
    limit: int
    finished: list = field(default_factory=list)
    done: bool = False


@torch.no_grad()
def beam_decode(model, batch, options):
    """Beam search with k = options.beam hypotheses per sentence. Each step ranks every
    continuation of every live hypothesis by its total log-probability (ties: lower slot, then
    lower token id first) and walks the best 2k in order: <eos> among the first k finishes a
    hypothesis, other tokens fill the k slots of the next step. The k best finished are kept. A
    sentence is done when none is alive, or k have finished and no live hypothesis scores better
    than the k-th of them at its current length, or its hypotheses reach the length limit (they
    finish as they stand). The finished ones are ranked by log_prob / steps^length_penalty (stable) and the best
    options.nbest returned."""
    b, k = batch.src.size(0), options.beam
    dead = float("-inf")
    rows = torch.arange(b).repeat_interleave(k)  # rows s*k .. s*k+k-1 hold sentence s
    decoding = model.start_decoding(batch, rows)
    sentences = []
    for n in batch.src_lengths.tolist():
        # One live start, so the first step has no twins.
        alive = [Hypothesis(log_prob=0.0 if i == 0 else dead) for i in range(k)]
        sentences.append(_BeamSentence(alive, step_limit(model, options, n)))
    y = torch.full((b * k,), BOS, dtype=torch.long)
    parents = list(range(b * k))
    for t in range(max(s.limit for s in sentences)):
        if all(s.done for s in sentences):
            break
        # float32 -> float64 exactly; totals are summed in float64
        lp = output_log_probs(decoding.step(y, t)).double()
        v = lp.size(1)
        next_y = y.tolist()
        for s, sent in enumerate(sentences):
            row0 = s * k
            if sent.done:
                parents[row0:row0 + k] = [row0] * k
                continue
            live = [i for i in range(k) if sent.alive[i].log_prob != dead]
            totals = torch.stack([sent.alive[i].log_prob + lp[row0 + i] for i in live]).flatten()
            # Candidates are laid out in (slot, token) order; a stable sort keeps that order
            # among equal totals.
            order = torch.sort(totals, descending=True, stable=True).indices[:2 * k].tolist()
            totals = totals.tolist()
            next_hyps, next_parents = [], []
            for rank, flat in enumerate(order):
                if len(next_hyps) >= k:
                    break
                slot, token = live[flat // v], flat % v
                h = sent.alive[slot].copy()
                h.log_prob = totals[flat]
                if token == EOS:
                    if rank >= k:  # only the top k may end here
                        continue
                    h.finished = True
                    h.score = normalised(h.log_prob, h.steps, options.length_penalty)
                    sent.finished.append(h)
                    continue
                h.tokens.append(token)
                next_hyps.append(h)
                next_parents.append(row0 + slot)
            if next_hyps and next_hyps[0].steps >= sent.limit:
                for h in next_hyps:  # at the length limit: finished as they stand
                    h.score = normalised(h.log_prob, h.steps, options.length_penalty)
                    sent.finished.append(h)
                next_hyps = []
            # Keep the k best finished (stable); done when nothing is alive, or k have
            # finished and no live hypothesis scores better than the k-th at its length.
            sent.finished = sorted(sent.finished, key=lambda h: h.score, reverse=True)[:k]
            settled = not next_hyps
            if not settled and len(sent.finished) >= k:
                best_alive = max(normalised(h.log_prob, h.steps, options.length_penalty)
                                 for h in next_hyps)
                settled = best_alive <= sent.finished[-1].score
            if settled:
                sent.done = True
            for i in range(k):
                if not sent.done and i < len(next_hyps):
                    sent.alive[i] = next_hyps[i]
                    parents[row0 + i] = next_parents[i]
                    next_y[row0 + i] = next_hyps[i].tokens[-1]
                else:
                    sent.alive[i].log_prob = dead
                    parents[row0 + i] = row0
                    next_y[row0 + i] = PAD
        y = torch.tensor(next_y, dtype=torch.long)
        decoding.select(torch.tensor(parents, dtype=torch.long))
    return [sorted(s.finished, key=lambda h: h.score, reverse=True)[:options.nbest]
            for s in sentences]


def decode(model, batch, options=DecodeOptions()):
    """Per batch row, the options.nbest best hypotheses, best first."""
    if options.beam < 1 or not 1 <= options.nbest <= options.beam:
        raise ValueError(f"decode: need beam >= 1 and 1 <= nbest <= beam, got beam "
                         f"{options.beam}, nbest {options.nbest}")
    if not options.max_len_ratio >= 0 or options.max_len_extra < 0:
        raise ValueError(f"decode: max length ratio {options.max_len_ratio} and extra "
                         f"{options.max_len_extra} must not be negative")
    for r, n in enumerate(batch.src_lengths.tolist()):
        if n > MAX_SOURCE_TOKENS:
            raise ValueError(f"decode: a source of {n} tokens (batch row {r}) is longer than "
                             f"the {MAX_SOURCE_TOKENS} decoding accepts")
    if options.beam == 1:
        return greedy_decode(model, batch, options)
    return beam_decode(model, batch, options)


# -------------------------------------------------------------------------------------------------
# Loading


def read_safetensors(path):
    """{name: tensor} from a safetensors file: an 8-byte little-endian header length, a JSON
    header {name: {dtype, shape, data_offsets}}, then the raw little-endian data. Uses the
    `safetensors` package when it is installed, else reads the file with the standard library."""
    try:
        from safetensors.torch import load_file
        return load_file(path)
    except ImportError:
        pass
    with open(path, "rb") as f:
        (header_len,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(header_len))
        data = f.read()
    dtypes = {"F32": torch.float32, "F64": torch.float64}
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        flat = torch.frombuffer(bytearray(data[begin:end]), dtype=dtypes[entry["dtype"]])
        tensors[name] = flat.reshape(entry["shape"])
    return tensors


def load_model(directory, dtype=torch.float32):
    """The model of an export directory (config.json, weights.safetensors), in eval mode."""
    config = Config.load(os.path.join(directory, "config.json"))
    model = Seq2Seq(config)
    model.load_state_dict(read_safetensors(os.path.join(directory, "weights.safetensors")))
    return model.to(dtype).eval()
)PY";
}

}  // namespace tapestry::cli
