// model.py of a PyTorch export, a Transformer's part: torch.nn.Transformer between the embeddings
// with positions and the output layer, under Tapestry's parameter names, and decoding over the
// prefix.
#include "tools/export_pytorch.h"

namespace tapestry::cli {

std::string_view pytorch_transformer_py() {
  return R"PY("""A Tapestry Transformer encoder-decoder, as PyTorch modules.

Exported by `tapestry export --to pytorch`. The architecture is read from config.json and the
parameters from weights.safetensors, under the names Tapestry gives them, which are this module's
state_dict keys: src_emb.weight, transformer.encoder.layers.0.self_attn.in_proj_weight,
transformer.decoder.norm.bias, generator.weight, ... The model is torch.nn.Transformer between
scaled embeddings with positions and an output layer: the model of Tapestry's PyTorch reference,
torch_transformer.py (after bentrevett's pytorch-seq2seq notebook 6 and PyTorch's
translation_transformer tutorial), with two options more, learned positions and the target
embedding shared with the output layer. It computes what Tapestry's models/transformer.cpp and
models/decode.cpp compute, so the translations and losses are Tapestry's (to float32 rounding).

    model = load_model("export_dir")           # eval mode, float32 (dtype=torch.float64 too)
    batch = make_batch([([5, 6, 7], [8, 9])])  # (source ids, target ids) pairs
    loss = model.loss(batch)                   # mean -log p over the real target tokens
    hyps = decode(model, batch, DecodeOptions(beam=5))

Notation: B batch rows, S source positions, T target positions, d the model's width, V the
target vocabulary.
"""

import json
import math
import os
import struct
import warnings
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.nn import functional as F

PAD, BOS, EOS, UNK = 0, 1, 2, 3  # the special token ids of both vocabularies

# In eval mode without gradients, PyTorch runs the encoder on nested tensors that skip the
# padding (its "fast path"): the same results, and a warning that the API is a prototype (1.13),
# or that a pre-norm encoder cannot (2.x). Neither concerns the user of this model.
warnings.filterwarnings("ignore", message="The PyTorch API of nested tensors")
warnings.filterwarnings("ignore", message="enable_nested_tensor is True")


@dataclass
class Config:
    """The model's shape (config.json)."""

    src_vocab: int
    tgt_vocab: int
    d_model: int  # d
    heads: int  # attention heads, d / heads wide each
    ffn: int  # the feed-forward block's inner width (dim_feedforward)
    enc_layers: int
    dec_layers: int
    norm: str  # "post": x = LN(x + sublayer(x)) (2017); "pre": x = x + sublayer(LN(x))
    activation: str  # the feed-forward block's nonlinearity: "relu" or "gelu" (exact, erf)
    positions: str  # "sinusoidal" (fixed) or "learned" (tables of max_positions rows)
    max_positions: int  # learned positions: the longest source, or <bos> + target
    share_embeddings: bool  # the output layer's weight is the target embedding
    dropout: float  # on the embedded inputs, sublayer outputs, inside the feed-forward block and
    # on attention weights (training only)

    @classmethod
    def load(cls, path):
        with open(path, encoding="utf-8") as f:
            j = json.load(f)
        if j.get("arch") != "transformer":
            raise ValueError(f"{path}: not a Transformer's configuration (arch "
                             f"{j.get('arch', 'rnn')!r}), and this model.py holds a Transformer")
        return cls(**{k: j[k] for k in cls.__dataclass_fields__})


def sinusoidal_positions(start, n, d, dtype):
    """The positions of Vaswani et al. 2017 for positions start .. start + n - 1, (n,d):
    PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(p / 10000^(2i/d)). Computed in float64
    and rounded, as Tapestry computes them (torch_transformer.py's table, computed in float32,
    can differ in the last bit)."""
    freq = torch.exp(torch.arange(0, d, 2, dtype=torch.float64) * (-math.log(10000.0) / d))
    angle = torch.arange(start, start + n, dtype=torch.float64).unsqueeze(1) * freq  # (n,d/2)
    pe = torch.empty(n, d, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe.to(dtype)


class SharedOutput(nn.Module):
    """The output layer of a model whose target embedding is shared (Press and Wolf 2017): its
    weight is tgt_emb.weight, so it holds only its bias (generator.bias; there is no
    generator.weight)."""

    def __init__(self, v, d):
        super().__init__()
        bound = 1.0 / math.sqrt(d)  # as nn.Linear(d, v) starts its bias
        self.bias = nn.Parameter(torch.empty(v).uniform_(-bound, bound))


# -------------------------------------------------------------------------------------------------
# The whole model


class Seq2Seq(nn.Module):
    """torch_transformer.py's TransformerSeq2Seq, with Tapestry's options:

        x_src = dropout(E_src[src] sqrt(d) + P[0 .. S))       P: sinusoidal positions, or the
        x_tgt = dropout(E_tgt[tgt_in] sqrt(d) + P[0 .. T))       rows of src_pos / tgt_pos
        h = nn.Transformer(x_src, x_tgt): post- or pre-norm layers, a final LayerNorm after each
            stack; masks: the source's padding (encoder self-attention and cross-attention), the
            causal mask (decoder self-attention: position t sees positions <= t) and, under
            teacher forcing, the target's padding
        logits = h W^T + b     W = generator.weight, or tgt_emb.weight when shared

    Every matrix starts Xavier-uniform, as in torch_transformer.py and in Tapestry.
    """

    def __init__(self, config):
        super().__init__()
        self.config = config
        d, v = config.d_model, config.tgt_vocab
        self.scale = math.sqrt(d)
        self.src_emb = nn.Embedding(config.src_vocab, d)
        self.tgt_emb = nn.Embedding(v, d)
        if config.positions == "learned":
            self.src_pos = nn.Embedding(config.max_positions, d)
            self.tgt_pos = nn.Embedding(config.max_positions, d)
            self.position_limit = config.max_positions  # decoding stops at the last position
        self.dropout = nn.Dropout(config.dropout)
        self.transformer = nn.Transformer(
            d_model=d, nhead=config.heads, num_encoder_layers=config.enc_layers,
            num_decoder_layers=config.dec_layers, dim_feedforward=config.ffn,
            dropout=config.dropout, activation=config.activation, batch_first=True,
            norm_first=config.norm == "pre")
        self.generator = SharedOutput(v, d) if config.share_embeddings else nn.Linear(d, v)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def embed(self, ids, target, start=0):
        """dropout(E[ids] sqrt(d) + P[start .. start + L)) for ids (B,L) -> (B,L,d)."""
        n = ids.size(1)
        learned = self.config.positions == "learned"
        if learned and start + n > self.config.max_positions:
            raise ValueError(f"transformer: a {'target' if target else 'source'} of {start + n} "
                             f"positions is longer than the {self.config.max_positions} "
                             f"learned positions")
        x = (self.tgt_emb if target else self.src_emb)(ids) * self.scale
        if learned:
            positions = torch.arange(start, start + n, device=ids.device)
            p = (self.tgt_pos if target else self.src_pos)(positions)
        else:
            p = sinusoidal_positions(start, n, self.config.d_model, x.dtype).to(x.device)
        return self.dropout(x + p)

    def encode(self, src, lengths):
        """The encoder's output (B,S,d) and the real source positions `valid` (B,S)."""
        valid = torch.arange(src.size(1), device=src.device)[None, :] < lengths[:, None]
        memory = self.transformer.encoder(self.embed(src, False), src_key_padding_mask=~valid)
        # The fast path returns the output padded only to the longest real source.
        return memory, valid[:, :memory.size(1)]

    def decode(self, tgt_in, memory, valid, tgt_valid=None):
        """The decoder's output (B,T,d) for the target tokens tgt_in (B,T) read from position 0:
        each position sees itself and the positions before it, the memory (B,S,d) at its real
        positions `valid` (B,S), and, given tgt_valid (B,T), only the target's real positions."""
        t = tgt_in.size(1)
        causal = torch.ones(t, t, dtype=torch.bool, device=tgt_in.device).triu(1)  # True: hidden
        return self.transformer.decoder(
            self.embed(tgt_in, True), memory, tgt_mask=causal,
            tgt_key_padding_mask=None if tgt_valid is None else ~tgt_valid,
            memory_key_padding_mask=~valid)

    def logits(self, h):
        """(..., d) -> (..., V): h W^T + b."""
        weight = self.tgt_emb.weight if self.config.share_embeddings else self.generator.weight
        return F.linear(h, weight, self.generator.bias)

    def token_losses(self, batch):
        """-log p(y_t | y_<t, x) under teacher forcing, (B,T), 0 at padding."""
        memory, valid = self.encode(batch.src, batch.src_lengths)
        z = self.logits(self.decode(batch.tgt_in, memory, valid, batch.tgt_in != PAD))  # (B,T,V)
        real = batch.tgt_out != PAD
        losses = torch.zeros(batch.tgt_out.shape, dtype=z.dtype, device=z.device)
        losses[real] = cross_entropy(z[real], batch.tgt_out[real])
        return losses

    def loss(self, batch):
        """Mean cross-entropy over the batch's real target tokens (each row's y_1..y_n and <eos>),
        as Tapestry's Seq2Seq::loss (without label smoothing)."""
        losses = self.token_losses(batch)
        return losses.sum() / (batch.tgt_out != PAD).sum()

    def start_decoding(self, batch, rows=None):
        """The state of greedy or beam search over the batch (see TransformerDecoding); `rows`
        repeats the batch's rows (beam search: k rows per sentence)."""
        return TransformerDecoding(self, batch, rows)


class TransformerDecoding:
    """Decoding a batch one position at a time: the encoder's output, computed once, and the
    tokens read so far. Each step runs the decoder over the whole prefix <bos> y_1 .. y_t and
    predicts y_{t+1} from its last position, where Tapestry's step computes only that position
    against its key/value caches: the same numbers (to rounding), since a position sees nothing
    after it. The target's padding needs no mask here: a hypothesis' prefix holds no padding (a
    dead beam slot's may, and its scores are never read)."""

    def __init__(self, model, batch, rows=None):
        self.model = model
        self.memory, self.valid = model.encode(batch.src, batch.src_lengths)
        if rows is not None:
            self.memory, self.valid = self.memory[rows], self.valid[rows]
        self.prefix = torch.empty(self.memory.size(0), 0, dtype=torch.long,
                                  device=self.memory.device)

    def step(self, y, t):
        """Feeds the previous tokens y (B,) at position t (from 0): the logits (B,V) of the next."""
        assert t == self.prefix.size(1), (t, self.prefix.size(1))
        self.prefix = torch.cat([self.prefix, y.unsqueeze(1)], dim=1)
        h = self.model.decode(self.prefix, self.memory, self.valid)
        return self.model.logits(h[:, -1])

    def select(self, rows):
        """Row i continues from row rows[i] (beam search's parents)."""
        self.prefix = self.prefix[rows]
)PY";
}

}  // namespace tapestry::cli
