"""RoPE frequency variants against Hugging Face's modeling_rope_utils formulas (float64) and the
papers' reference values (summarised beside the repository in ../shared/reference/positional-encodings.md)."""

import math

import numpy as np
import pytest
import torch

from pebench.model.pe import PEContext
from pebench.model.pe.rope import ROPE_VARIANTS, RoPE, rope_frequencies
from pebench.util.errors import UsageError

VARIANTS = ["default", "linear", "ntk", "dynamic-ntk", "yarn", "llama3"]


# --- independent float64 transcriptions of the Hugging Face formulas ---------------------------------
def hf_default(D, base):
    return 1.0 / base ** (np.arange(0, D, 2, dtype=np.float64) / D)


def hf_yarn(D, base, s, T, beta_fast=32, beta_slow=1, truncate=True):
    def corr_dim(n_rot):
        return (D * math.log(T / (n_rot * 2 * math.pi))) / (2 * math.log(base))

    low, high = corr_dim(beta_fast), corr_dim(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, D - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(D // 2, dtype=np.float64) - low) / (high - low), 0, 1)
    extrap_factor = 1 - ramp
    pos = base ** (np.arange(0, D, 2, dtype=np.float64) / D)
    inv = (1.0 / (s * pos)) * (1 - extrap_factor) + (1.0 / pos) * extrap_factor
    return inv, (0.1 * math.log(s) + 1.0 if s > 1 else 1.0)


def hf_llama3(D, base, s, T, lo=1.0, hi=4.0):
    inv = hf_default(D, base)
    wl = 2 * math.pi / inv
    out = np.where(wl > T / lo, inv / s, inv)
    smooth = (T / wl - lo) / (hi - lo)
    smoothed = (1 - smooth) * out / s + smooth * out
    medium = ~(wl < T / hi) & ~(wl > T / lo)
    return np.where(medium, smoothed, out)


def hf_dynamic(D, base, f, T, L):
    if L > T:
        base = base * ((f * L / T) - (f - 1)) ** (D / (D - 2))
    return hf_default(D, base)


CASES = [(64, 10000.0, 2.0, 128), (128, 10000.0, 4.0, 2048), (32, 500000.0, 8.0, 512), (16, 10000.0, 16.0, 128)]


def _close(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    assert np.all(np.abs(a - b) <= 1e-5 * np.abs(b)), np.max(np.abs(a - b) / np.abs(b))


@pytest.mark.parametrize("D,base,s,T", CASES)
def test_variants_match_hugging_face_formulas(D, base, s, T):
    _close(rope_frequencies("default", D, base, 1.0, T)[0], hf_default(D, base))
    _close(rope_frequencies("linear", D, base, s, T)[0], hf_default(D, base) / s)
    _close(rope_frequencies("ntk", D, base, s, T)[0], hf_default(D, base * s ** (D / (D - 2))))
    for L in (T // 2, T, 3 * T, 16 * T):
        _close(rope_frequencies("dynamic-ntk", D, base, 2.0, T, seq_len=L)[0], hf_dynamic(D, base, 2.0, T, L))
    inv, att = rope_frequencies("yarn", D, base, s, T)
    ref, ref_att = hf_yarn(D, base, s, T)
    _close(inv, ref)
    assert math.isclose(att, ref_att, rel_tol=1e-12)
    inv, _ = rope_frequencies("yarn", D, base, s, T, truncate=False)
    _close(inv, hf_yarn(D, base, s, T, truncate=False)[0])
    _close(rope_frequencies("llama3", D, base, s, T)[0], hf_llama3(D, base, s, T))


def test_reference_values():
    inv = rope_frequencies("default", 128, 10000, 1, 2048)[0]
    assert float(inv[1]) == pytest.approx(0.865964, rel=1e-5)
    assert float(inv[16]) == pytest.approx(0.1, rel=1e-5)
    assert float(inv[63]) == pytest.approx(1.15478e-4, rel=1e-5)
    assert float(rope_frequencies("linear", 128, 10000, 4, 2048)[0][1]) == pytest.approx(0.216491, rel=1e-5)
    dyn = rope_frequencies("dynamic-ntk", 128, 10000, 10, 2048, seq_len=16384)[0]
    assert float(dyn[1]) == pytest.approx(0.80931, rel=1e-5)
    assert float(dyn[63]) == pytest.approx(1.62645e-6, rel=1e-5)
    base_prime = 10000 * (10 * 16384 / 2048 - 9) ** (128 / 126)
    assert base_prime == pytest.approx(759702, rel=1e-5)
    yarn, att = rope_frequencies("yarn", 128, 10000, 10, 2048)
    from pebench.model.pe.rope import yarn_correction_range

    assert yarn_correction_range(128, 10000, 2048) == (16, 41)
    assert float(yarn[17]) == pytest.approx(0.083479, rel=1e-5)
    assert float(yarn[18]) == pytest.approx(0.0695902, rel=1e-5)
    assert torch.allclose(yarn[41:], inv[41:] / 10, rtol=1e-12)
    assert att == pytest.approx(1.2302585, rel=1e-7)
    ll = rope_frequencies("llama3", 128, 10000, 10, 2048)[0]
    assert float(ll[31]) == pytest.approx(0.0107302, rel=1e-5)
    assert float(ll[32]) == pytest.approx(0.00777848, rel=1e-5)


@pytest.mark.parametrize("variant", VARIANTS)
def test_factor_one_gives_default(variant):
    for D, base, _, T in CASES:
        inv, att = rope_frequencies(variant, D, base, 1.0, T)
        _close(inv, hf_default(D, base))
        assert att == 1.0


@pytest.mark.parametrize("D,base,s,T", CASES)
def test_yarn_between_interpolated_and_default(D, base, s, T):
    inv = rope_frequencies("yarn", D, base, s, T)[0].numpy()
    d = hf_default(D, base)
    assert np.all(inv <= d * (1 + 1e-12)) and np.all(inv >= d / s * (1 - 1e-12))


def test_dynamic_equals_default_up_to_training_length():
    for L in (1, 64, 128):
        _close(rope_frequencies("dynamic-ntk", 64, 10000, 4.0, 128, seq_len=L)[0], hf_default(64, 10000))
    assert not np.allclose(rope_frequencies("dynamic-ntk", 64, 10000, 4.0, 128, seq_len=129)[0], hf_default(64, 10000))


def test_registry_and_validation():
    assert ROPE_VARIANTS.names()[: len(VARIANTS)] == VARIANTS  # the built-in ones first; others may follow
    with pytest.raises(UsageError, match="did you mean 'yarn'"):
        rope_frequencies("yarm", 64, 10000, 2, 128)
    with pytest.raises(UsageError, match=">= 1"):
        rope_frequencies("linear", 64, 10000, 0.5, 128)
    with pytest.raises(UsageError, match="even"):
        rope_frequencies("default", 63, 10000, 1, 128)
    with pytest.raises(UsageError, match="beta_fast"):
        rope_frequencies("linear", 64, 10000, 2, 128, beta_fast=3)


def test_rope_module_uses_automatic_factor_and_yarn_temperature():
    rope = RoPE(PEContext(64, 2, 1, 128), {"scaling": "yarn"})
    inv, att, factor = rope.resolved(512)
    assert factor == 4.0 and att == pytest.approx(0.1 * math.log(4) + 1)
    _close(inv, hf_yarn(32, 10000.0, 4.0, 128)[0])
    # logits scale by the square of the attention factor at the same relative position
    q = torch.randn(1, 1, 512, 32, dtype=torch.float64)
    qr, kr = rope.rotate(q, q, torch.arange(512), 0)
    assert torch.allclose(qr.norm(dim=-1), q.norm(dim=-1) * att, atol=1e-9)
    fixed = rope.with_variant("linear", 2.0)
    assert fixed.resolved(4096)[2] == 2.0
    assert rope.with_variant("none").resolved(4096)[2] == 1.0
