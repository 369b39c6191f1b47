"""p-RoPE (Barbero et al. 2025): RoPE on the highest fraction p of its frequencies only; the lowest
(1 - p) are left unrotated (inverse frequency 0), which frees them to carry content. ``fraction: 1`` is
``rope`` and ``fraction: 0`` is ``none``, exactly. The number kept is floor(p * d_h/2), as in the paper's code and
Gemma's (p = 0.1, 0.3, 0.6 of 16 frequencies keep 1, 4, 9). Every RoPE scaling applies to the rotated part."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...util.errors import UsageError
from .base import SCHEMES
from .rope import RoPE, RopeOptions


@dataclass
class PRopeOptions(RopeOptions):
    fraction: float = 0.75

    def validate(self):
        super().validate()
        if not 0 <= self.fraction <= 1:
            raise UsageError(f"p-rope fraction must be in [0, 1], got {self.fraction}")


def kept_frequencies(n_freq: int, fraction: float) -> int:
    """floor(fraction * n_freq), with a tolerance for products that float rounding puts just below an integer."""
    return int(math.floor(fraction * n_freq + 1e-9))


@SCHEMES.add
class PRoPE(RoPE):
    name = "p-rope"
    description = "RoPE on the highest fraction p of frequencies only (Barbero 2025; p=1 rope, p=0 none)"
    Options = PRopeOptions

    def resolved(self, seq_len):
        inv, att, factor = super().resolved(seq_len)
        inv = inv.clone()
        inv[kept_frequencies(len(inv), self.options.fraction) :] = 0.0  # frequencies fall with the index
        return inv, att, factor
