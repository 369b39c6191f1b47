"""``local-global``: Gemma 3's interleaving (Gemma Team 2025): five sliding-window RoPE layers (base 10,000) to one
global RoPE layer with base 1,000,000; the last layer is always global, so a 4-layer model is three local, one
global. Gemma 3's window is 1,024 tokens of a 32K context; here it defaults to a quarter of the training context (a
window of 1/32 is 4 tokens at 128)."""

from __future__ import annotations

from .base import PATTERNS, LayerSpec, default_span, every


@PATTERNS.register("local-global")
def local_global(
    n_layers: int, context: int, window: int = 0, ratio: int = 5, global_base: float = 1_000_000.0
) -> list[LayerSpec]:
    """sliding-window RoPE layers, one global RoPE (base 1e6) per `ratio` (Gemma 3, 5:1); window default context/4"""
    w = default_span(context, window)
    return [
        LayerSpec("rope", {"base": global_base}) if g else LayerSpec("rope", window=w)
        for g in every(n_layers, ratio + 1)
    ]
