"""Shaw et al. (2018) relative positions, causal: learned key and value vectors per clipped distance.

Logit term for query i, key j:  q_i . aK[min(i - j, k_max)] / sqrt(d_h), gathered from
``qA = q @ aK^T`` ([B, H, T, k_max+1]); never a [T, T, d_h] tensor.
Value term: sum_j a_ij aV[min(i - j, k_max)] = sum_d (attention mass at clipped distance d) aV[d].
The mass at d < k_max is one probability a_{i,i-d} = exp(s_{i,i-d} - lse_i), recomputed on a band of
k_max diagonals; whatever is left (1 - band mass) sits at d = k_max. So only the row log-sum-exp is
needed from the attention backend. One (aK, aV) pair per layer, as in the paper.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ...util.errors import UsageError
from .base import SCHEMES, PositionalEncoding, RelativeVectors, ScoreMod, band_scores


@dataclass
class ShawOptions:
    k_max: int = 64

    def validate(self):
        if self.k_max < 1:
            raise UsageError(f"shaw k_max must be >= 1, got {self.k_max}")


class ShawScoreMod(ScoreMod):
    needs_lse = True

    def __init__(self, qa: torch.Tensor, a_k: torch.Tensor, a_v: torch.Tensor, k_max: int):
        self.qa, self.a_k, self.a_v, self.k_max = qa, a_k, a_v, k_max
        self.band = k_max
        self.relative = RelativeVectors(a_k, a_v)

        def fn(score, b, h, q_idx, kv_idx):
            return score + qa[b, h, q_idx, (q_idx - kv_idx).clamp(0, k_max)]

        super().__init__(fn, qa.dtype)

    def bias(self, b, h, q_idx, kv_idx):
        # Same term as ``fn``, as one gather along the distance axis: [B, H, Tq, Tk] from [B, H, T, k_max+1].
        qa = self.qa[:, :, q_idx.flatten()]
        dist = (q_idx - kv_idx).clamp(0, self.k_max).reshape(q_idx.shape[-2], kv_idx.shape[-1])
        return qa.gather(-1, dist.expand(*qa.shape[:2], *dist.shape))

    def value_term(self, q, k, lse, scale):
        T = q.shape[2]
        kmax = self.k_max
        band = min(kmax, T)
        s = band_scores(q, k, band) * scale + self.qa[..., :band]  # logit of key i-d, d < band
        valid = torch.arange(T, device=q.device)[:, None] >= torch.arange(band, device=q.device)[None, :]
        p = torch.exp(s - lse.unsqueeze(-1)).masked_fill(~valid, 0.0)
        far = (1.0 - p.sum(-1, keepdim=True)).clamp(min=0.0)  # mass at distances >= k_max
        p = F.pad(p, (0, kmax - band))  # short sequences never reach distance k_max
        mass = torch.cat([p, far], dim=-1)  # [B, H, T, k_max + 1]
        return mass.to(q.dtype) @ self.a_v.to(q.dtype)


@SCHEMES.add
class Shaw(PositionalEncoding):
    name = "shaw"
    description = "learned relative key/value vectors per clipped distance, per layer (Shaw 2018)"
    Options = ShawOptions

    def __init__(self, ctx, options=None):
        super().__init__(ctx, options)
        n = self.options.k_max + 1
        self.a_k = nn.Parameter(torch.randn(ctx.n_layers, n, ctx.head_dim) * 0.02)
        self.a_v = nn.Parameter(torch.randn(ctx.n_layers, n, ctx.head_dim) * 0.02)

    def score_mod(self, q, layer, k=None, x=None):
        a_k = self.a_k[layer]
        qa = (q @ a_k.to(q.dtype).t()) * q.shape[-1] ** -0.5
        return ShawScoreMod(qa, a_k, self.a_v[layer], self.options.k_max)  # full-precision vectors kept
