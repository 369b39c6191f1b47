"""``nope-rope-alt``: global layers alternating between no positional encoding and RoPE, NoPE first (the
interleaving studied by Yang et al. 2025, "Rope to Nope and back again"); no window anywhere."""

from __future__ import annotations

from .base import PATTERNS, LayerSpec


@PATTERNS.register("nope-rope-alt")
def nope_rope_alt(n_layers: int, context: int) -> list[LayerSpec]:
    """alternating NoPE and RoPE global layers, NoPE first"""
    return [LayerSpec("none" if i % 2 == 0 else "rope") for i in range(n_layers)]
