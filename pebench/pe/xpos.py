"""xPos (Sun et al. 2023): RoPE with an exponential decay per frequency pair. Query n is scaled by
zeta_k^(n/B) and key m by zeta_k^(-m/B) on pair k, zeta_k = (2k/d_h + 0.4) / 1.4, so each pair's part of the
logit gains zeta_k^((n-m)/B) <= 1, a decay with distance that is strongest on the fastest-rotating pairs.
Positions are centred on the sequence's middle, as in x-transformers (the logits do not change; the scales stay
within float32 at long lengths). Every RoPE scaling applies to the rotation, and the decay stays."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..errors import UsageError
from . import SCHEMES
from .rope import RoPE, RopeOptions


@dataclass
class XposOptions(RopeOptions):
    scale_base: float = 512.0  # B
    gamma: float = 0.4

    def validate(self):
        super().validate()
        if not self.scale_base > 0:
            raise UsageError(f"xpos scale_base must be > 0, got {self.scale_base}")


def xpos_zeta(head_dim: int, gamma: float = 0.4) -> torch.Tensor:
    """zeta_k = (2k/d_h + gamma) / (1 + gamma) for k = 0 .. d_h/2 - 1 (float64)."""
    return (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim + gamma) / (1 + gamma)


@SCHEMES.register("xpos")
class XPos(RoPE):
    name = "xpos"
    description = "RoPE with a per-frequency exponential decay of the logit with distance (Sun 2023)"
    Options = XposOptions

    def __init__(self, ctx, options=None):
        super().__init__(ctx, options)
        self._xcache: dict = {}

    def _decay(self, positions: torch.Tensor, dtype: torch.dtype):
        T = positions.shape[0]
        key = ("xpos", T, positions.device, dtype, self.consecutive)
        if self.consecutive and key in self._xcache:
            return self._xcache[key]
        zeta = xpos_zeta(self.ctx.head_dim, self.options.gamma).to(positions.device)
        power = (positions.to(torch.float64) - T // 2)[:, None] / self.options.scale_base
        s = zeta[None, :] ** power  # [T, d_h/2]
        s = torch.cat([s, s], dim=-1)  # the halves pairing: pair k is dims k and k + d_h/2
        out = s.to(dtype), (1.0 / s).to(dtype)
        if self.consecutive:
            self._xcache = {key: out}
        return out

    def rotate(self, q, k, positions, layer):
        q, k = super().rotate(q, k, positions, layer)
        sq, sk = self._decay(positions, q.dtype)
        return q * sq, k * sk
