"""``swan``: SWAN-GPT (Puvvada et al. 2025): sliding-window RoPE layers interleaved with global layers without a
positional encoding, three to one (the last layer always global). The window defaults to a quarter of the training
context."""

from __future__ import annotations

from .base import PATTERNS, LayerSpec, default_span, every


@PATTERNS.register("swan")
def swan(n_layers: int, context: int, window: int = 0, ratio: int = 3) -> list[LayerSpec]:
    """sliding-window RoPE layers, one global NoPE per `ratio` (SWAN-GPT, 3:1); window default context/4"""
    w = default_span(context, window)
    return [LayerSpec("none") if g else LayerSpec("rope", window=w) for g in every(n_layers, ratio + 1)]
