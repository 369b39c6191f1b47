"""T5 relative bias (Raffel et al. 2020): a learned scalar per head and causal log bucket,
one table shared by all layers.

T5 adds its bias to unscaled q.k logits; pebench keeps the 1/sqrt(d_h) scaling of every other scheme
and multiplies the table by ``scale`` (default sqrt(d_h)) instead. Why: Adam moves each entry by at
most about lr per step, so an unscaled table could not leave [-1, 1] within the default 600-step CPU
budget (measured: the trained entries saturated at +-1.0), which left T5 optimization-limited rather
than position-limited."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from ...util.errors import UsageError
from .base import SCHEMES, PositionalEncoding, ScoreMod


@dataclass
class T5Options:
    num_buckets: int = 32
    max_distance: int = 128
    scale: float = 0.0  # multiplier of the table; 0 means sqrt(head_dim)

    def validate(self):
        if self.num_buckets < 2 or self.max_distance < self.num_buckets // 2 + 1:
            raise UsageError("t5 needs num_buckets >= 2 and max_distance > num_buckets / 2")


def t5_bucket(distance: torch.Tensor, num_buckets: int = 32, max_distance: int = 128) -> torch.Tensor:
    """Causal bucket of n = max(i - j, 0): exact below num_buckets/2, logarithmic up to max_distance."""
    n = distance.clamp(min=0)
    max_exact = num_buckets // 2
    # Clamp before the log so n = 0 never reaches it (and FlexAttention never sees -inf).
    log_ratio = torch.log(n.clamp(min=max_exact).to(torch.float32) / max_exact) / math.log(max_distance / max_exact)
    large = (max_exact + (log_ratio * (num_buckets - max_exact)).to(torch.long)).clamp(max=num_buckets - 1)
    return torch.where(n < max_exact, n.to(torch.long), large)


@SCHEMES.add
class T5Bias(PositionalEncoding):
    name = "t5"
    description = "learned scalar bias per head and log-bucketed distance, shared by all layers (Raffel 2020)"
    static_bias = True
    Options = T5Options

    def __init__(self, ctx, options=None):
        super().__init__(ctx, options)
        self.table = nn.Parameter(torch.zeros(ctx.n_heads, self.options.num_buckets))

    def score_mod(self, q, layer, k=None, x=None):
        scale = self.options.scale or self.ctx.head_dim**0.5
        table = (self.table * scale).to(q.dtype)
        nb, md = self.options.num_buckets, self.options.max_distance

        def fn(score, b, h, q_idx, kv_idx):
            return score + table[h, t5_bucket(q_idx - kv_idx, nb, md)]

        mod = ScoreMod(fn, q.dtype)
        mod.key = lambda: (type(self), nb, md, tuple(table.flatten().tolist()))  # one table shared by every layer
        return mod
