"""clip-soft and clip-hard (CoPE, Li et al. 2026, arXiv 2602.05258): RoPE's lowest frequencies tapered by a half Hann
window, or cut to zero, at evaluation. The oracle is written from the paper's reference code's semantics (its
rotary module: ``mask = 0.5 (1 + cos(linspace(0, pi, n)))`` over the last ``n`` inverse frequencies; the hard clip sets
them to 0), in float64 here, never pebench's own maths; a planted wrong taper (rising instead of falling, and the
full Hann window) is caught. They are evaluated only when named, never under a run's ``all``."""

from __future__ import annotations

import math

import pytest
import torch

from pebench.model.pe import SCHEMES, all_variants
from pebench.model.pe.rope import long_period_count, rope_frequencies


def oracle(head_dim: int, base: float, n: int, hard: bool = False) -> torch.Tensor:
    inv = [base ** (-2 * i / head_dim) for i in range(head_dim // 2)]
    start = len(inv) - n
    for j in range(n):
        t = math.pi * j / (n - 1) if n > 1 else 0.0
        inv[start + j] = 0.0 if hard else inv[start + j] * 0.5 * (1 + math.cos(t))
    return torch.tensor(inv, dtype=torch.float64)


def by_period(head_dim: int, base: float, context: int) -> int:
    """Components whose period 2 pi / theta exceeds the training context, counted directly."""
    return sum(2 * math.pi * base ** (2 * i / head_dim) > context for i in range(head_dim // 2))


@pytest.mark.parametrize("head_dim,base,context", [(32, 10000.0, 128), (64, 10000.0, 512), (128, 500000.0, 8192)])
@pytest.mark.parametrize("n", [0, 1, 3, 20])
def test_clip_soft_and_hard_are_copes_tapers(head_dim, base, context, n):
    k = min(n or by_period(head_dim, base, context), head_dim // 2)
    soft, att = rope_frequencies("clip-soft", head_dim, base, 4.0, context, n=n)
    hard, _ = rope_frequencies("clip-hard", head_dim, base, 4.0, context, n=n)
    assert torch.allclose(soft, oracle(head_dim, base, k), rtol=1e-12, atol=0) and att == 1.0
    assert torch.allclose(hard, oracle(head_dim, base, k, hard=True), rtol=1e-12, atol=0)
    if k > 1:  # the highest clipped frequency kept whole, the lowest at zero, none above it touched
        plain = oracle(head_dim, base, 0)
        assert math.isclose(soft[-k], plain[-k], rel_tol=1e-12) and soft[-1] == 0
        assert torch.allclose(soft[:-k], plain[:-k], rtol=1e-12, atol=0)


def test_a_planted_wrong_taper_is_caught():
    """A taper rising instead of falling, and the full Hann window (0 at both ends), differ from the oracle."""
    head_dim, base, k = 32, 10000.0, 10
    right = oracle(head_dim, base, k)
    plain = oracle(head_dim, base, 0)
    t = torch.linspace(0, math.pi, k, dtype=torch.float64)
    rising, full = plain.clone(), plain.clone()
    rising[-k:] *= 0.5 * (1 - torch.cos(t))
    full[-k:] *= 0.5 * (1 - torch.cos(2 * t))
    for wrong in (rising, full):
        assert not torch.allclose(wrong, right, rtol=1e-6)


def test_the_count_by_period_and_the_bad_n_is_one_line():
    inv = oracle(32, 10000.0, 0)
    assert long_period_count(inv, 128) == by_period(32, 10000.0, 128) == 10
    with pytest.raises(Exception, match="n is a number of components >= 0"):
        rope_frequencies("clip-soft", 32, 10000.0, 1.0, 128, n=-1)


def test_clips_are_named_only():
    rope = SCHEMES.get("rope")
    assert "clip-soft" in rope.named_variants() and "clip-soft" not in rope.variants()
    assert {"clip-soft", "clip-hard"} <= set(all_variants())


def test_clip_soft_on_an_outside_model_sets_the_global_layers_frequencies():
    """`eval --hf --rope-scaling clip-soft` on a Gemma 3 model: the global layers' built frequencies are pebench's
    clipped ones, the sliding layers' as trained; on a Llama every layer's."""
    pytest.importorskip("transformers")
    from test_streaming import CONTEXT, built  # tests/, beside this folder's parent

    from pebench.eval import hf

    for kind, scaled in (("gemma3", "full_attention"), ("llama", None)):
        model = built(kind)
        o = hf.Outside("tiny", hf.HFLM(model, hf.OutsidePE(None)), None, model.config, CONTEXT, True, {})
        (s,) = hf.parse_hf_scalings("clip-soft")
        state = hf.apply_scaling(o, s, 4 * CONTEXT)
        mod = model.model.rotary_emb
        assert state["rope_parameters"] == {"rope_type": "clip-soft", "n": 0, "original_max_position_embeddings": 64}
        for t, params in hf.rope_types(model.config).items():
            prefix = f"{t}_" if scaled else ""
            want_variant = "clip-soft" if scaled in (None, t) else "default"
            dim = hf.rope_dim(model.config)
            want, _ = rope_frequencies(want_variant, dim, float(params["rope_theta"]), 1.0, CONTEXT)
            assert torch.allclose(getattr(mod, f"{prefix}inv_freq").double(), want, rtol=1e-6), (kind, t)
