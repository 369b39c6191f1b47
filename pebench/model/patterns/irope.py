"""``irope``: Llama 4's interleaved RoPE (Meta 2025): RoPE layers with chunked local attention, and every fourth layer
(the last one always) global attention without a positional encoding. The RoPE layers use Llama 4's base, 500,000
(``base``; ``irope:base=10000`` is the base pebench used before, in the records of results/patterns).
``temperature=true`` gives the NoPE layers Llama 4's query temperature (``logit_scales.llama4``), which is 1 within the
training context, so it changes evaluation beyond it only (``eval --logit-scale llama4@none`` applies it to a run
trained without)."""

from __future__ import annotations

from .base import PATTERNS, LayerSpec, default_span, every


@PATTERNS.register("irope")
def irope(
    n_layers: int, context: int, chunk: int = 0, temperature: bool = False, base: float = 500_000.0
) -> list[LayerSpec]:
    """RoPE chunked-local layers (base 5e5), NoPE global every 4th (Llama 4); chunk default context/4"""
    c = default_span(context, chunk)
    scale = "llama4" if temperature else ""
    rope = {"base": base}
    return [LayerSpec("none", logit_scale=scale) if g else LayerSpec("rope", rope, chunk=c) for g in every(n_layers, 4)]
