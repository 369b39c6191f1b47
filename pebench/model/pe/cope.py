"""CoPE, contextual position encoding (Golovneva et al. 2024). Positions are counted by content: gates
g_ij = sigmoid(q_i . k_j / sqrt(d_h)) (the attention logit, as x-transformers computes them), the position of key
j for query i is p_ij = sum_{t=j..i} g_it, clamped to p_max - 1, and the logit gains q_i . e[p_ij] with e a learned
[p_max, d_h] table per layer, interpolated between floor and ceil of the fractional position.

The gates of a query need its whole row of scores (a suffix sum over keys), which a score function cannot see,
so the term is materialized: whole at training lengths, one block of queries at a time beyond
``max_materialize`` (memory: a block x T per head, never T x T at 8192)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ...util.errors import UsageError
from .base import SCHEMES, PositionalEncoding, ScoreMod


@dataclass
class CopeOptions:
    p_max: int = 64

    def validate(self):
        if self.p_max < 2:
            raise UsageError(f"cope p_max must be >= 2, got {self.p_max}")


def cope_positions(logits: torch.Tensor, q_idx: torch.Tensor, kv_idx: torch.Tensor, p_max: int) -> torch.Tensor:
    """p_ij = sum_{t=j..i} sigmoid(logit_it) (causal keys only), clamped to p_max - 1. ``logits`` [..., n, K]."""
    gates = torch.sigmoid(logits).masked_fill(kv_idx > q_idx, 0.0)
    suffix = gates.flip(-1).cumsum(-1).flip(-1)
    return suffix.clamp(max=p_max - 1)


def cope_term(q: torch.Tensor, pos: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
    """q_i . e[p] interpolated linearly between floor(p) and ceil(p): q [B, H, n, d], pos [B, H, n, K]."""
    qe = q @ e.t().to(q.dtype)  # [B, H, n, p_max]
    lo = pos.floor().long()
    hi = (lo + 1).clamp(max=e.shape[0] - 1)
    w = (pos - lo.to(pos.dtype)).to(q.dtype)
    return qe.gather(-1, lo) * (1 - w) + qe.gather(-1, hi) * w


@SCHEMES.add
class CoPE(PositionalEncoding):
    name = "cope"
    description = "contextual positions: counts of gated keys, a learned table per layer (Golovneva 2024)"
    Options = CopeOptions

    def __init__(self, ctx, options=None):
        super().__init__(ctx, options)
        self.e = nn.Parameter(torch.randn(ctx.n_layers, self.options.p_max, ctx.head_dim) * 0.02)

    def decayed(self, name, param):
        return False  # a position table

    def score_mod(self, q, layer, k=None, x=None):
        if k is None:
            raise UsageError("cope's logit term needs the keys")
        e, p_max, scale = self.e[layer], self.options.p_max, q.shape[-1] ** -0.5

        def bias(b, h, q_idx, kv_idx):
            rows = q_idx.reshape(-1)
            K = kv_idx.shape[-1]
            qb = q[:, :, rows]
            logits = (qb @ k[:, :, :K].transpose(-1, -2)) * scale
            pos = cope_positions(logits, q_idx.reshape(1, 1, -1, 1), kv_idx.reshape(1, 1, 1, -1), p_max)
            return cope_term(qb, pos, e)

        def fn(score, b, h, q_idx, kv_idx):
            return score + bias(b, h, q_idx, kv_idx)

        mod = ScoreMod(fn, q.dtype)
        mod.bias = bias
        mod.flex_ok, mod.max_materialize, mod.uses_positions = False, 512, False
        return mod
