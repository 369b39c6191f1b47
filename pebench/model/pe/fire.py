"""FIRE (Li et al. 2024): a learned function of the progressively normalised distance,
b_h(i, j) = MLP(psi(i - j) / psi(max(i, L)))_h with psi(x) = log(c x + 1). The MLP (1 -> 32 -> H, ReLU) is shared
by heads' outputs and by layers; c > 0 (init 0.1) and the threshold L (init the training context, kept > 1 as
|L_raw| + 1) are learned.
The input lies in [0, 1] at any length, which is FIRE's route to extrapolation.

The term needs a small MLP per score, which FlexAttention's score function cannot hold efficiently, so it is
materialized (one block of queries at a time beyond ``max_materialize``)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ...util.errors import UsageError
from .base import SCHEMES, PositionalEncoding, ScoreMod


@dataclass
class FireOptions:
    hidden: int = 32
    c_init: float = 0.1

    def validate(self):
        if self.hidden < 1 or not self.c_init > 0:
            raise UsageError("fire needs hidden >= 1 and c_init > 0")


def fire_input(q_idx: torch.Tensor, kv_idx: torch.Tensor, c: torch.Tensor, L: torch.Tensor) -> torch.Tensor:
    """psi(i - j) / psi(max(i, L)), psi(x) = log(c x + 1): in [0, 1] for causal pairs."""
    r = (q_idx - kv_idx).clamp(min=0).to(c.dtype)
    i = q_idx.to(c.dtype)
    return torch.log1p(c * r) / torch.log1p(c * torch.maximum(i, L))


@SCHEMES.add
class Fire(PositionalEncoding):
    name = "fire"
    description = "learned MLP of the log-normalised distance psi(i-j)/psi(max(i,L)) (Li 2024)"
    Options = FireOptions

    def __init__(self, ctx, options=None):
        super().__init__(ctx, options)
        hdim = self.options.hidden
        self.mlp = nn.Sequential(nn.Linear(1, hdim), nn.ReLU(), nn.Linear(hdim, ctx.n_heads))
        self.c_raw = nn.Parameter(torch.tensor(math.log(math.expm1(self.options.c_init))))  # softplus^-1
        self.L_raw = nn.Parameter(torch.tensor(float(ctx.context - 1)))  # L = |L_raw| + 1 starts at the context

    def decayed(self, name, param):
        return False  # a tiny function of distance: no weight decay (as for the other position terms)

    def c_and_L(self) -> tuple[torch.Tensor, torch.Tensor]:
        return F.softplus(self.c_raw), self.L_raw.abs() + 1.0

    def term(self, q_idx: torch.Tensor, kv_idx: torch.Tensor) -> torch.Tensor:
        """[..., H] on any broadcast grid of query and key indices (float32)."""
        c, L = self.c_and_L()
        return self.mlp(fire_input(q_idx, kv_idx, c, L).unsqueeze(-1))

    def score_mod(self, q, layer, k=None, x=None):
        def bias(b, h, q_idx, kv_idx):
            t = self.term(q_idx[0, 0], kv_idx[0, 0])  # [Tq, Tk, H]: the term depends on i and j only
            return t.permute(2, 0, 1)[h.flatten()].unsqueeze(0).to(q.dtype)  # [1, H, Tq, Tk]

        def fn(score, b, h, q_idx, kv_idx):
            return score + bias(b, h, q_idx, kv_idx)

        mod = ScoreMod(fn, q.dtype)
        mod.bias = bias
        mod.flex_ok, mod.max_materialize = False, 512
        return mod
