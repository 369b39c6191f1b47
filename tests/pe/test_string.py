"""STRING (An et al., ICLR 2025, arXiv 2410.18745) at evaluation: the oracle is written from the reference code's
semantics (its two flash-attention passes: the diagonal band of width S at the original positions, the rest with the
queries at position i - S + W, merged in one softmax), as a relative-position matrix and an explicit rotation per
(query, key) pair in float64, never pebench's own maths; planted wrong maps (no local window, the band one wider)
are caught.
A micro RoPE run evaluates with ``--rope-scaling string`` end to end (tests/pe/test_rope_extension.py)."""

from __future__ import annotations

import pytest
import torch

from pebench.config import ModelConfig
from pebench.model.decoder import DecoderLM
from pebench.model.pe import SCHEMES
from pebench.model.pe.rope_string import string_positions, string_scores, string_shift


def rot(x: torch.Tensor, pos: float, base: float = 10000.0) -> torch.Tensor:
    """x [d] rotated to position ``pos`` in the halves pairing (k, k + d/2), by its 2x2 matrices."""
    d = x.shape[0]
    out = x.clone()
    for i in range(d // 2):
        a = pos * base ** (-2 * i / d)
        c, s = torch.cos(torch.tensor(a, dtype=torch.float64)), torch.sin(torch.tensor(a, dtype=torch.float64))
        out[i], out[i + d // 2] = c * x[i] - s * x[i + d // 2], s * x[i] + c * x[i + d // 2]
    return out


def oracle_scores(q, k, rel) -> torch.Tensor:
    """score[i, j] = q_i . R(rel(i - j)) k_j / sqrt(d): the key at j, the query at j + rel(i - j)."""
    T, d = q.shape
    s = torch.full((T, T), float("-inf"), dtype=torch.float64)
    for i in range(T):
        for j in range(i + 1):
            p = rel(i - j)
            s[i, j] = rot(q[i], j + p) @ rot(k[j], j) / d**0.5
    return s


def reference_map(shift, local):
    return lambda d: d if d < shift else d - shift + local


def pebench_scores(q, k, shift_fraction, local):
    rope = SCHEMES.get("rope")(ctx(), {}).with_variant("string", offset=shift_fraction, local=local)
    T = q.shape[0]
    pos = torch.arange(T)
    qr, kr = rope.rotate(q[None, None], k[None, None], pos, 0)
    return string_scores(rope, qr, kr, 0, T)[0, 0]


def ctx():
    from pebench.model.pe import PEContext

    return PEContext(8, 1, 1, 16, 0)


@pytest.mark.parametrize("T,offset,local", [(24, 0.5, 3), (24, 9.0, 4), (32, 0.33, 128), (20, 0.25, 0)])
def test_string_scores_are_the_references_two_passes(T, offset, local):
    torch.manual_seed(T)
    q, k = torch.randn(T, 8, dtype=torch.float64), torch.randn(T, 8, dtype=torch.float64)
    shift, w = string_shift(T, offset, local)
    assert shift == (int(offset * T) if offset < 1 else int(offset)) and w == min(local, shift)
    want = oracle_scores(q, k, reference_map(shift, w))
    got = pebench_scores(q, k, offset, local)
    assert torch.allclose(got, want, rtol=1e-9, atol=1e-9)
    # the largest relative position read is T - 1 - S + W; the S - W largest are never read
    d = torch.arange(T)
    assert int(string_positions(d, shift, w).max()) == max(T - 1 - shift + w, min(shift - 1, T - 1))


def test_a_planted_wrong_map_is_caught():
    T, offset, local = 24, 0.5, 3
    torch.manual_seed(1)
    q, k = torch.randn(T, 8, dtype=torch.float64), torch.randn(T, 8, dtype=torch.float64)
    got = pebench_scores(q, k, offset, local)
    for wrong in (lambda d: d if d < 12 else d - 12, lambda d: d if d <= 12 else d - 12 + 3):
        assert not torch.allclose(got, oracle_scores(q, k, wrong), rtol=1e-6, atol=1e-6)


def test_string_is_named_only_and_its_bad_settings_are_one_line():
    rope = SCHEMES.get("rope")
    assert "string" in rope.named_variants() and "string" not in rope.variants()
    with pytest.raises(Exception, match="offset must be > 0"):
        string_shift(10, 0.0)
    with pytest.raises(Exception, match="local must be >= 0"):
        string_shift(10, 0.33, -1)


def test_a_model_under_string_equals_rope_where_no_distance_reaches_the_shift():
    """With S past every distance STRING is RoPE exactly; with a small S it differs (and stays finite)."""
    torch.manual_seed(0)
    cfg = ModelConfig(d_model=32, n_layers=2, n_heads=2, d_mlp=64, context=16, pe="rope")
    model = DecoderLM(cfg).eval()
    x = torch.randint(0, 256, (2, 40))
    with torch.no_grad():
        plain = model(x)
        model.pe = model.pe.with_variant("string", offset=40.0, local=4)
        same = model(x)
        model.pe = model.pe.with_variant("string", offset=0.33, local=4)
        shifted = model(x)
    assert torch.allclose(same, plain, atol=1e-5)
    assert (shifted[:, 20:] - plain[:, 20:]).abs().max() > 1e-4 and torch.isfinite(shifted).all()
    assert torch.allclose(shifted[:, :13], plain[:, :13], atol=1e-5)  # distances below S = 13: as trained
