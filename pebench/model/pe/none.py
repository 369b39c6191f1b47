"""NoPE: no positional signal; only the causal mask breaks permutation symmetry."""

from .base import SCHEMES, PositionalEncoding


@SCHEMES.add
class NoPE(PositionalEncoding):
    name = "none"
    continuous_positions = True  # reads no positions: real-valued ones change nothing
    description = "no positional signal (NoPE); the causal mask alone orders tokens"
