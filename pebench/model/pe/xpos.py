"""xPos (Sun et al. 2023): RoPE with an exponential decay per frequency pair. Query n is scaled by
zeta_k^(n/B) and key m by zeta_k^(-m/B) on pair k, zeta_k = (2k/d_h + 0.4) / 1.4, so each pair's part of the
logit gains zeta_k^((n-m)/B) <= 1, a decay with distance that is strongest on the fastest-rotating pairs.
Positions are centred on the middle of the positions used (of 0..T-1, or of random training positions drawn from
[0, M)), as in x-transformers: the logits do not change, and the scales zeta^(+-half the span / B) stay in float32's
normal range as long as that exponent's log stays below ``LOG_LIMIT``. Longer spans are refused with one line
(training) or marked undefined (evaluation, via ``max_positions``). Every RoPE scaling applies to the rotation, and
the decay stays."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import torch

from ...util.errors import UsageError
from .base import SCHEMES
from .rope import RoPE, RopeOptions


@dataclass
class XposOptions(RopeOptions):
    scale_base: float = 512.0  # B
    gamma: float = 0.4

    def validate(self):
        super().validate()
        if not self.scale_base > 0:
            raise UsageError(f"xpos scale_base must be > 0, got {self.scale_base}")


LOG_LIMIT = 80.0  # |ln scale| <= 80: the scales and their inverses stay within float32's normal range


def xpos_span_limit(scale_base: float, gamma: float) -> int:
    """The longest span of positions whose scales stay within LOG_LIMIT: (span / 2) / B * ln(1/zeta_0) <= LIMIT."""
    return int(2 * scale_base * LOG_LIMIT / math.log((1 + gamma) / gamma))


def xpos_zeta(head_dim: int, gamma: float = 0.4) -> torch.Tensor:
    """zeta_k = (2k/d_h + gamma) / (1 + gamma) for k = 0 .. d_h/2 - 1 (float64)."""
    return (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim + gamma) / (1 + gamma)


@SCHEMES.add
class XPos(RoPE):
    name = "xpos"
    description = "RoPE with a per-frequency exponential decay of the logit with distance (Sun 2023)"
    Options = XposOptions

    def __init__(self, ctx, options=None):
        super().__init__(ctx, options)
        self._xcache: dict = {}
        limit = xpos_span_limit(self.options.scale_base, self.options.gamma)
        if ctx.positions > limit:
            raise UsageError(
                f"xpos with scale_base {self.options.scale_base:g} keeps its scales finite in float32 for "
                f"positions spanning at most {limit:,}; train.random_positions is {ctx.positions:,}: "
                f"lower it or raise pe_options.xpos.scale_base"
            )

    def max_positions(self) -> Optional[int]:
        return xpos_span_limit(self.options.scale_base, self.options.gamma)

    def _decay(self, positions: torch.Tensor, dtype: torch.dtype):
        T = positions.shape[0]
        key = ("xpos", T, positions.device, dtype, self.consecutive)
        if self.consecutive and key in self._xcache:
            return self._xcache[key]
        zeta = xpos_zeta(self.ctx.head_dim, self.options.gamma).to(positions.device)
        first, span = positions[0], positions[-1] - positions[0] + 1  # positions are sorted
        power = (positions - (first + span // 2)).to(torch.float64)[:, None] / self.options.scale_base
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
