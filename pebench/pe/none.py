"""NoPE: no positional signal; only the causal mask breaks permutation symmetry."""

from .base import SCHEMES, PositionalEncoding


@SCHEMES.add
class NoPE(PositionalEncoding):
    name = "none"
    description = "no positional signal (NoPE); the causal mask alone orders tokens"
