// model.py of a PyTorch export: an RNN model's modules (encoder, attention variants, decoder,
// Seq2Seq), and model.py put together for either architecture from its part and the shared one.
#include "tools/export_pytorch.h"

namespace tapestry::cli {

std::string_view pytorch_rnn_py() {
  return R"PY("""A Tapestry encoder-decoder with attention, as PyTorch modules.

Exported by `tapestry export --to pytorch`. The architecture is read from config.json and the
parameters from weights.safetensors, under the names Tapestry gives them (which are PyTorch's:
encoder.rnn.weight_ih_l0_reverse, decoder.cells.0.bias_hh, ...). The computations follow
Tapestry's models/encoder.cpp, models/decoder.cpp, nn/attention.cpp and models/decode.cpp step
for step, so the translations and losses are Tapestry's (to float32 rounding).

    model = load_model("export_dir")           # eval mode, float32 (dtype=torch.float64 too)
    batch = make_batch([([5, 6, 7], [8, 9])])  # (source ids, target ids) pairs
    loss = model.loss(batch)                   # mean -log p over the real target tokens
    hyps = decode(model, batch, DecodeOptions(beam=5))

Notation: B batch rows, S source positions, T target steps, E embedding size, H hidden size,
K = H or 2H the encoder states' size (unidirectional or bidirectional), A the attention's hidden
size, L layers, V the target vocabulary. h_j (K) are the encoder states ("annotations"),
s_t the decoder state, y_t the target tokens, E y the embedding of a token.
"""

import json
import math
import os
import struct
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

PAD, BOS, EOS, UNK = 0, 1, 2, 3  # the special token ids of both vocabularies

@dataclass
class Config:
    """The model's shape (config.json)."""

    src_vocab: int
    tgt_vocab: int
    emb: int  # E
    hidden: int  # H
    layers: int  # L, encoder and decoder alike
    bidirectional: bool  # encoder directions
    cell: str  # "rnn" (tanh), "gru" or "lstm"
    attention: str  # a key of ATTENTION_CLASSES
    decoder: str  # "bahdanau" or "luong"
    attn_size: int  # A for bahdanau, concat and local-p attention (0: H)
    window: int  # D, the half width of local attention's window
    dropout: float  # on embeddings, between layers and before the output layer (training only)
    deep_output: bool  # Bahdanau decoder: the output layer reads [s_t; c_t; E y_{t-1}], else s_t

    @classmethod
    def load(cls, path):
        with open(path, encoding="utf-8") as f:
            j = json.load(f)
        return cls(**{k: j[k] for k in cls.__dataclass_fields__})

    @property
    def key_size(self):  # K
        return self.hidden * (2 if self.bidirectional else 1)

    @property
    def attention_size(self):  # A
        return self.attn_size if self.attn_size > 0 else self.hidden


# -------------------------------------------------------------------------------------------------
# Encoder


class Encoder(nn.Module):
    """Embedding, then a (multi-layer, bidirectional) RNN over the padded batch.

    states   h_j (B,S,K): the top layer's directions concatenated, 0 at padding
    summary  (B,K): the top layer's final state of each direction, [forward; backward]; the
             forward one after the last real token, the backward one after reading back to the
             first (the backward half of h_0). For an LSTM it is the hidden state h, not the
             cell c.
    """

    def __init__(self, config):
        super().__init__()
        self.config = config
        rnn_class = {"rnn": nn.RNN, "gru": nn.GRU, "lstm": nn.LSTM}[config.cell]
        self.embedding = nn.Embedding(config.src_vocab, config.emb, padding_idx=PAD)
        self.dropout = nn.Dropout(config.dropout)
        self.rnn = rnn_class(config.emb, config.hidden, num_layers=config.layers,
                             bidirectional=config.bidirectional, batch_first=True,
                             dropout=config.dropout if config.layers > 1 else 0.0)

    def forward(self, src, lengths):
        x = self.dropout(self.embedding(src))  # (B,S,E)
        # Packed, so padded steps are never read and never change a row's state.
        packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        out, final = self.rnn(packed)
        states, _ = pad_packed_sequence(out, batch_first=True, total_length=src.size(1))
        h_n = final[0] if self.config.cell == "lstm" else final  # (L*D,B,H), layer-major
        directions = 2 if self.config.bidirectional else 1
        summary = torch.cat(list(h_n[-directions:]), dim=1)  # the top layer's directions
        return states, summary


# -------------------------------------------------------------------------------------------------
# Attention: from a query s (B,Hq), the weights a (B,S) over the real source positions (exactly 0
# at padding) and the context c = sum_j a_j h_j (B,K).


class Memory:
    """What attention needs from the encoder, computed once per batch."""

    def __init__(self, keys, lengths, summary, precomputed=None):
        self.keys = keys  # (B,S,K) h_j
        self.lengths = lengths  # (B,) real source lengths S_b
        self.summary = summary  # (B,K) the encoder's summary (the context of `none`)
        self.precomputed = precomputed  # per variant: U h_j, or |h_j| for cosine
        positions = torch.arange(keys.size(1), device=keys.device)
        self.valid = positions[None, :] < lengths[:, None]  # (B,S) True at real positions

    def select(self, rows):
        """The memory of the given batch rows (beam search keeps k rows per sentence)."""
        pre = None if self.precomputed is None else self.precomputed[rows]
        return Memory(self.keys[rows], self.lengths[rows], self.summary[rows], pre)


def masked_softmax(scores, valid):
    """softmax over the positions where valid is True; exactly 0 elsewhere."""
    return scores.masked_fill(~valid, float("-inf")).softmax(dim=-1)


def init_uniform(parameter, fan_in):
    """U(-1/sqrt(fan_in), 1/sqrt(fan_in)), Tapestry's initialisation of attention parameters."""
    bound = 1.0 / math.sqrt(fan_in)
    nn.init.uniform_(parameter, -bound, bound)
    return parameter


def dot_scores(keys, q):
    """q . h_j for every j: (B,S,K) x (B,K) -> (B,S)."""
    return torch.bmm(keys, q.unsqueeze(2)).squeeze(2)


class Attention(nn.Module):
    """The interface of every variant: prepare() once per batch, forward() once per step."""

    def __init__(self, config):
        super().__init__()
        self.query_size = config.hidden  # Hq
        self.key_size = config.key_size  # K

    def precompute(self, keys):
        return None

    def prepare(self, keys, lengths, summary):
        return Memory(keys, lengths, summary, self.precompute(keys))

    def weights(self, query, memory, step):
        raise NotImplementedError

    def forward(self, query, memory, step):
        """query s (B,Hq) at target step t = step -> (weights a (B,S), context c (B,K))."""
        a = self.weights(query, memory, step)
        c = torch.bmm(a.unsqueeze(1), memory.keys).squeeze(1)  # c = sum_j a_j h_j
        return a, c


class NoAttention(Attention):
    """none (Cho et al. 2014): no weights; the context is the encoder's summary at every step."""

    def forward(self, query, memory, step):
        return None, memory.summary


class BahdanauAttention(Attention):
    """bahdanau (Bahdanau et al. 2015, additive): e_j = v . tanh(W s + b + U h_j)."""

    def __init__(self, config):
        super().__init__(config)
        a, hq, k = config.attention_size, self.query_size, self.key_size
        self.W = init_uniform(nn.Parameter(torch.empty(a, hq)), hq)
        self.b = init_uniform(nn.Parameter(torch.empty(a)), hq)
        self.U = init_uniform(nn.Parameter(torch.empty(a, k)), k)
        self.v = init_uniform(nn.Parameter(torch.empty(a)), a)

    def precompute(self, keys):
        return keys @ self.U.t()  # U h_j for every j (B,S,A), once per batch

    def weights(self, query, memory, step):
        wq = query @ self.W.t() + self.b  # W s + b (B,A)
        e = torch.tanh(memory.precomputed + wq.unsqueeze(1)) @ self.v  # (B,S)
        return masked_softmax(e, memory.valid)


class ConcatAttention(Attention):
    """concat (Luong et al. 2015): e_j = v . tanh(W [s; h_j]); W's columns split into the part
    that multiplies s and the part that multiplies h_j, no bias."""

    def __init__(self, config):
        super().__init__(config)
        a, fan_in = config.attention_size, self.query_size + self.key_size
        self.W = init_uniform(nn.Parameter(torch.empty(a, fan_in)), fan_in)
        self.v = init_uniform(nn.Parameter(torch.empty(a)), a)

    def precompute(self, keys):
        return keys @ self.W[:, self.query_size:].t()  # W_h h_j (B,S,A)

    def weights(self, query, memory, step):
        wq = query @ self.W[:, :self.query_size].t()  # W_s s (B,A)
        e = torch.tanh(memory.precomputed + wq.unsqueeze(1)) @ self.v
        return masked_softmax(e, memory.valid)


class DotAttention(Attention):
    """dot (Luong et al. 2015): e_j = s . h_j (needs Hq = K)."""

    def weights(self, query, memory, step):
        return masked_softmax(dot_scores(memory.keys, query), memory.valid)


class ScaledDotAttention(Attention):
    """scaled-dot (Vaswani et al. 2017): e_j = s . h_j / sqrt(K) (needs Hq = K)."""

    def weights(self, query, memory, step):
        e = dot_scores(memory.keys, query) * (1.0 / math.sqrt(self.key_size))
        return masked_softmax(e, memory.valid)


class GeneralAttention(Attention):
    """general (Luong et al. 2015): e_j = s^T W h_j, computed as (s W) . h_j."""

    def __init__(self, config):
        super().__init__(config)
        self.W = init_uniform(nn.Parameter(torch.empty(self.query_size, self.key_size)),
                              self.key_size)

    def weights(self, query, memory, step):
        return masked_softmax(dot_scores(memory.keys, query @ self.W), memory.valid)


class CosineAttention(Attention):
    """cosine (Graves et al. 2014): e_j = beta (s . h_j) / (|s| |h_j|), beta learned (needs
    Hq = K). The norms are sqrt(sum x^2 + 1e-8), so zero vectors (padding) give finite scores."""

    EPS = 1e-8

    def __init__(self, config):
        super().__init__(config)
        self.beta = nn.Parameter(torch.full((1,), 5.0))  # cosines lie in [-1, 1]: some contrast

    def precompute(self, keys):
        return torch.sqrt((keys * keys).sum(dim=2) + self.EPS)  # |h_j| (B,S)

    def weights(self, query, memory, step):
        query_norm = torch.sqrt((query * query).sum(dim=1, keepdim=True) + self.EPS)  # (B,1)
        cos = dot_scores(memory.keys, query) / (query_norm * memory.precomputed)
        return masked_softmax(cos * self.beta, memory.valid)


class LocalAttention(Attention):
    """Local attention (Luong et al. 2015): general scores e_j = s^T W h_j inside the window
    |j - p_t| <= D around a centre p_t in [0, S_b - 1], the softmax over the window times a
    Gaussian of standard deviation D/2 centred on p_t:

        a_j = softmax(e)_j exp(-(j - p_t)^2 / (2 (D/2)^2))

    so the weights sum to at most 1. Subclasses choose p_t."""

    def __init__(self, config):
        super().__init__(config)
        self.window = config.window  # D
        self.W = init_uniform(nn.Parameter(torch.empty(self.query_size, self.key_size)),
                              self.key_size)

    def centre(self, query, last, step):
        """p_t (B,1) from the query, last = S_b - 1 (B,1) and the step t."""
        raise NotImplementedError

    def weights(self, query, memory, step):
        e = dot_scores(memory.keys, query @ self.W)  # (B,S)
        last = (memory.lengths - 1).clamp(min=0).to(e.dtype).unsqueeze(1)  # S_b - 1 (B,1)
        p = self.centre(query, last, step)  # (B,1)
        positions = torch.arange(e.size(1), device=e.device, dtype=e.dtype).unsqueeze(0)  # (1,S)
        # Which positions count is a constant mask (not differentiable; compared in float64 as
        # Tapestry does); the Gaussian carries the gradient into p_t.
        in_window = (positions.double() - p.detach().double()).abs() <= self.window
        sigma = self.window / 2
        offset = positions - p  # j - p_t (B,S)
        gauss = torch.exp((offset * offset) * (-1.0 / (2 * sigma * sigma)))
        return masked_softmax(e, memory.valid & in_window) * gauss


class LocalMAttention(LocalAttention):
    """local-m (monotonic): p_t = min(step, S_b - 1), the step that reads <bos> being step 0
    (so p_t = min(t - 1, S_b - 1) in the decoder's numbering)."""

    def centre(self, query, last, step):
        return torch.full_like(last, float(step)).minimum(last)


class LocalPAttention(LocalAttention):
    """local-p (predictive): p_t = (S_b - 1) sigmoid(v_p . tanh(W_p s))."""

    def __init__(self, config):
        super().__init__(config)
        a = config.attention_size
        self.W_p = init_uniform(nn.Parameter(torch.empty(a, self.query_size)), self.query_size)
        self.v_p = init_uniform(nn.Parameter(torch.empty(a)), a)

    def centre(self, query, last, step):
        z = torch.tanh(query @ self.W_p.t()) @ self.v_p.unsqueeze(1)  # (B,1)
        return torch.sigmoid(z) * last


ATTENTION_CLASSES = {
    "none": NoAttention,
    "bahdanau": BahdanauAttention,
    "dot": DotAttention,
    "general": GeneralAttention,
    "concat": ConcatAttention,
    "scaled-dot": ScaledDotAttention,
    "cosine": CosineAttention,
    "local-m": LocalMAttention,
    "local-p": LocalPAttention,
}


# -------------------------------------------------------------------------------------------------
# Decoder


@dataclass
class DecoderState:
    layers: list  # per layer (h, c): h (B,H), c (B,H) for an LSTM, else None
    feed: torch.Tensor = None  # Luong's input feeding: h~_{t-1} (B,H)

    def select(self, rows):
        """The state of the given rows (beam search: each row continues from its parent's)."""
        layers = [(h[rows], None if c is None else c[rows]) for h, c in self.layers]
        return DecoderState(layers, None if self.feed is None else self.feed[rows])


class Decoder(nn.Module):
    """One target step at a time, in either style. Step t = 1, 2, ... reads y_{t-1} (y_0 = <bos>)
    and predicts y_t; step() takes t - 1 (the position of y_{t-1}) as `step`.

    Bahdanau:  a_t = attend(s_{t-1}),  s_t = RNN([E y_{t-1}; c_t], s_{t-1}),
               features = [s_t; c_t; E y_{t-1}] (deep output) or s_t
    Luong:     h_t = RNN([E y_{t-1}; h~_{t-1}], h_{t-1}),  a_t = attend(h_t),
               h~_t = tanh(W_c [c_t; h_t]),  features = h~_t  (input feeding, h~_0 = 0)
    p(y_t) = softmax(W_o features + b_o).

    The query of attention is the top layer's state; the first layer's cell takes [E y_{t-1}; r]
    (r = c_t or h~_{t-1}), each further layer the state of the layer below.
    Every layer starts from s_0 = tanh(W_b summary + b_b) (the bridge, whose L*H outputs are cut
    into one H-slice per layer, layer 0 first); an LSTM's cells start from c_0 = 0.
    """

    def __init__(self, config):
        super().__init__()
        self.config = config
        h, k, e = config.hidden, config.key_size, config.emb
        luong = config.decoder == "luong"
        self.embedding = nn.Embedding(config.tgt_vocab, e, padding_idx=PAD)
        self.dropout = nn.Dropout(config.dropout)
        self.bridge = nn.Linear(k, h * config.layers)
        self.attention = ATTENTION_CLASSES[config.attention](config)
        cell_class = {"rnn": nn.RNNCell, "gru": nn.GRUCell, "lstm": nn.LSTMCell}[config.cell]
        first_input = e + (h if luong else k)
        self.cells = nn.ModuleList(
            cell_class(first_input if layer == 0 else h, h) for layer in range(config.layers))
        if luong:
            self.combine = nn.Linear(k + h, h, bias=False)  # W_c
            features = h
        else:
            features = h + k + e if config.deep_output else h
        self.out = nn.Linear(features, config.tgt_vocab)  # W_o, b_o

    def start(self, summary):
        """The state before the first step, from the encoder's summary (B,K)."""
        h = self.config.hidden
        s0 = torch.tanh(self.bridge(summary))  # (B,L*H)
        lstm = self.config.cell == "lstm"
        layers = [(s0[:, layer * h:(layer + 1) * h], torch.zeros_like(s0[:, :h]) if lstm else None)
                  for layer in range(self.config.layers)]
        feed = torch.zeros_like(s0[:, :h]) if self.config.decoder == "luong" else None
        return DecoderState(layers, feed)

    def run_cells(self, x, state):
        """The stacked cells on input x: returns the top layer's new h and the new layers."""
        layers = []
        for index, cell in enumerate(self.cells):
            if index > 0:
                x = self.dropout(x)
            h, c = state.layers[index]
            if c is None:
                h = cell(x, h)
            else:
                h, c = cell(x, (h, c))
            layers.append((h, c))
            x = h
        return x, layers

    def step(self, memory, state, y_prev, step):
        """One step from the previous tokens y_prev (B,) at target position `step` (from 0).
        Returns (features (B,F) for the output layer, attention weights (B,S) or None, state)."""
        e = self.dropout(self.embedding(y_prev))  # E y_{t-1} (B,E)
        if self.config.decoder == "bahdanau":
            a, c = self.attention(state.layers[-1][0], memory, step)  # attend with s_{t-1}
            s, layers = self.run_cells(torch.cat([e, c], dim=1), state)
            features = torch.cat([s, c, e], dim=1) if self.config.deep_output else s
            return features, a, DecoderState(layers)
        h, layers = self.run_cells(torch.cat([e, state.feed], dim=1), state)
        a, c = self.attention(h, memory, step)  # attend with h_t
        feed = torch.tanh(self.combine(torch.cat([c, h], dim=1)))  # h~_t
        return feed, a, DecoderState(layers, feed)

    def logits(self, features):
        return self.out(self.dropout(features))


# -------------------------------------------------------------------------------------------------
# The whole model


class Seq2Seq(nn.Module):
    """The encoder, the attention (inside the decoder) and the decoder, trained end to end."""

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.encoder = Encoder(config)
        self.decoder = Decoder(config)

    def encode(self, src, lengths):
        """The attention memory of a batch's sources."""
        states, summary = self.encoder(src, lengths)
        return self.decoder.attention.prepare(states, lengths, summary)

    def token_losses(self, batch):
        """-log p(y_t | y_<t, x) under teacher forcing, (B,T), 0 at padding."""
        memory = self.encode(batch.src, batch.src_lengths)
        state = self.decoder.start(memory.summary)
        features = []
        for t in range(batch.tgt_in.size(1)):
            f, _, state = self.decoder.step(memory, state, batch.tgt_in[:, t], t)
            features.append(f)
        z = self.decoder.logits(torch.stack(features, dim=1))  # (B,T,V)
        real = batch.tgt_out != PAD
        losses = torch.zeros(batch.tgt_out.shape, dtype=z.dtype, device=z.device)
        losses[real] = cross_entropy(z[real], batch.tgt_out[real])
        return losses

    def loss(self, batch):
        """Mean cross-entropy over the batch's real target tokens (each row's y_1..y_n and <eos>),
        as Tapestry's Seq2Seq::loss with full teacher forcing."""
        losses = self.token_losses(batch)
        return losses.sum() / (batch.tgt_out != PAD).sum()

    def start_decoding(self, batch, rows=None):
        """The state of greedy or beam search over the batch (see RnnDecoding); `rows` repeats
        the batch's rows (beam search: k rows per sentence)."""
        return RnnDecoding(self, batch, rows)


class RnnDecoding:
    """Decoding a batch one step at a time: the attention memory, computed once, and the
    decoder's state, carried from step to step."""

    def __init__(self, model, batch, rows=None):
        self.model = model
        self.memory = model.encode(batch.src, batch.src_lengths)
        if rows is not None:
            self.memory = self.memory.select(rows)
        self.state = model.decoder.start(self.memory.summary)

    def step(self, y, t):
        """Feeds the previous tokens y (B,) at step t (from 0): the logits (B,V) of the next."""
        features, _, self.state = self.model.decoder.step(self.memory, self.state, y, t)
        return self.model.decoder.logits(features)

    def select(self, rows):
        """Row i continues from row rows[i] (beam search's parents)."""
        self.state = self.state.select(rows)
)PY";
}

std::string pytorch_model_py(models::Arch arch) {
  std::string py(arch == models::Arch::transformer ? pytorch_transformer_py() : pytorch_rnn_py());
  py += pytorch_common_py();
  return py;
}

}  // namespace tapestry::cli
