"""Sinusoidal absolute positions (Vaswani et al. 2017), computed on the fly for any length."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .base import SCHEMES, PositionalEncoding


def sinusoidal_frequencies(d_model: int, base: float = 10000.0) -> torch.Tensor:
    """omega_k = base^(-2k/d) for k = 0 .. d/2-1 (float64)."""
    return torch.exp(-math.log(base) * torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)


def sinusoidal_table(positions: torch.Tensor, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """PE[p, 2k] = sin(p omega_k), PE[p, 2k+1] = cos(p omega_k); shape [len(positions), d_model]."""
    angles = positions.to(torch.float64)[:, None] * sinusoidal_frequencies(d_model, base)[None, :]
    pe = torch.stack([angles.sin(), angles.cos()], dim=-1)  # [T, d/2, 2] -> interleaved
    return pe.reshape(len(positions), d_model)


@dataclass
class SinusoidalOptions:
    # Amplitude of the sin/cos table against the sqrt(d)-scaled token embeddings (1: Vaswani et al.).
    # Examined by `pebench tune --option table_scale=...` (docs/findings/baselines.md): at this scale the unit-amplitude
    # table starts out several times larger than the token term.
    table_scale: float = 1.0


@SCHEMES.add
class Sinusoidal(PositionalEncoding):
    name = "sinusoidal"
    continuous_positions = True  # positions as numbers: real-valued ones too
    description = "fixed sin/cos absolute positions added to the embeddings (Vaswani 2017)"
    Options = SinusoidalOptions

    def position_table(self, length):
        return self.options.table_scale * sinusoidal_table(torch.arange(length), self.ctx.d_model)

    def embed(self, x, positions):
        # Vaswani et al. scale the token embeddings by sqrt(d) before adding the table; without it the
        # unit-amplitude sinusoids drown the small-initialised embeddings after the first LayerNorm.
        # The table is computed in float64 and cast: exact far beyond training, no buffer to outgrow.
        table = sinusoidal_table(positions, x.shape[-1]).to(x.dtype)
        return x * math.sqrt(x.shape[-1]) + self.options.table_scale * table
