"""Sandwich (Chi et al. 2023): a parameter-free logit term from the inner product of two sinusoidal embeddings,
sum_{k=1..d'/2} cos(r / 10000^(2k/d')) - d'/2 (0 at r = 0, negative beyond), divided per head by ALiBi-like
ratios 8h/H (h = 1..H), so heads see the same shape compressed to different widths.

d' is the model width by default, the paper's d (its embeddings are model-width sinusoids); NeMo's implementation
uses the head dimension instead. ``pe_options.sandwich.dim`` sets it (e.g. to the head dimension, to follow NeMo).
The term is a lookup in a table of max(T, positions the model was built for) distances; the model refuses
positions beyond what it was built for (``DecoderLM.forward``), so the lookup is never clamped short."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...util.errors import UsageError
from .base import SCHEMES, PositionalEncoding, ScoreMod


@dataclass
class SandwichOptions:
    dim: int = 0  # d' (even); 0: the model width

    def validate(self):
        if self.dim < 0 or self.dim % 2:
            raise UsageError(f"sandwich dim must be 0 (model width) or an even number, got {self.dim}")


def sandwich_base(r: torch.Tensor, dim: int) -> torch.Tensor:
    """sum_{k=1..dim/2} cos(r / 10000^(2k/dim)) - dim/2 at distances r (float64)."""
    k = torch.arange(1, dim // 2 + 1, dtype=torch.float64)
    inv = 10000.0 ** (-2 * k / dim)
    return torch.cos(r.to(torch.float64)[..., None] * inv).sum(-1) - dim / 2


def sandwich_ratios(n_heads: int) -> torch.Tensor:
    return 8.0 * torch.arange(1, n_heads + 1, dtype=torch.float64) / n_heads


@SCHEMES.add
class Sandwich(PositionalEncoding):
    name = "sandwich"
    description = "parameter-free sinusoidal inner-product bias, compressed per head (Chi 2023)"
    Options = SandwichOptions
    static_bias = True

    def __init__(self, ctx, options=None):
        super().__init__(ctx, options)
        self.dim = self.options.dim or ctx.d_model
        self.register_buffer("ratios", sandwich_ratios(ctx.n_heads).float(), persistent=False)
        self._cache: dict = {}

    def _table(self, T: int, device, dtype) -> torch.Tensor:
        """base(r) for r = 0 .. T-1: the term is a lookup, so FlexAttention never sums cosines per score."""
        key = (T, device, dtype)
        if key not in self._cache:
            self._cache = {key: sandwich_base(torch.arange(T), self.dim).to(device=device, dtype=dtype)}
        return self._cache[key]

    def score_mod(self, q, layer, k=None, x=None):
        n = max(q.shape[2], self.ctx.positions)  # every distance of this sequence (or of random positions)
        table, ratios = self._table(n, q.device, q.dtype), self.ratios.to(q.dtype)

        def fn(score, b, h, q_idx, kv_idx):
            return score + table[(q_idx - kv_idx).clamp(0, n - 1)] / ratios[h]

        def bias(b, h, q_idx, kv_idx):  # materialized paths: a table as long as the largest query index
            m = int(q_idx.max()) + 1
            t = table if m <= n else self._table(m, q.device, q.dtype)
            return t[(q_idx - kv_idx).clamp(0, len(t) - 1)] / ratios[h]

        mod = ScoreMod(fn, q.dtype)
        mod.bias = bias
        mod.key = lambda: (type(self), self.dim, tuple(ratios.tolist()))
        return mod
