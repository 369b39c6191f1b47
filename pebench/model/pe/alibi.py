"""ALiBi (Press et al. 2021): a per-head linear penalty -m_h (i - j) on the logits."""

from __future__ import annotations

import math

import torch

from .base import SCHEMES, PositionalEncoding, ScoreMod


def alibi_slopes(n_heads: int) -> list[float]:
    """The paper's slopes: geometric 2^(-8h/H) for powers of two; otherwise the reference interleave."""

    def power_of_two(n: int) -> list[float]:
        start = 2.0 ** (-(2.0 ** -(math.log2(n) - 3)))
        return [start ** (i + 1) for i in range(n)]

    if n_heads <= 0:
        raise ValueError("n_heads must be positive")
    if math.log2(n_heads).is_integer():
        return power_of_two(n_heads)
    closest = 2 ** math.floor(math.log2(n_heads))
    return power_of_two(closest) + power_of_two(2 * closest)[0::2][: n_heads - closest]


def add_slopes(scheme: PositionalEncoding, n_heads: int) -> None:
    """The paper's slopes as the scheme's (non-persistent) ``slopes`` buffer, which ``ALiBi.score_mod`` reads."""
    scheme.register_buffer("slopes", torch.tensor(alibi_slopes(n_heads)), persistent=False)


@SCHEMES.add
class ALiBi(PositionalEncoding):
    name = "alibi"
    continuous_positions = True  # positions as numbers: real-valued ones too
    description = "linear distance penalty per head on the logits (Press 2021)"
    static_bias = True

    def __init__(self, ctx, options=None):
        super().__init__(ctx, options)
        add_slopes(self, ctx.n_heads)

    def score_mod(self, q, layer, k=None, x=None):
        slopes = self.slopes.to(q.dtype)

        def fn(score, b, h, q_idx, kv_idx):
            return score - slopes[h] * (q_idx - kv_idx)

        mod = ScoreMod(fn, q.dtype)
        mod.key = lambda: (type(self), tuple(slopes.tolist()))
        return mod
