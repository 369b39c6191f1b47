"""The mathematical properties each scheme must have (reference: the papers; the project keeps a summary beside the
repository, ../shared/reference/positional-encodings.md)."""

import math

import pytest
import torch

from pebench.model.attention import attend
from pebench.model.pe import PEContext, build_pe
from pebench.model.pe.alibi import alibi_slopes
from pebench.model.pe.rope import RoPE, rotate_half
from pebench.model.pe.shaw import band_scores
from pebench.model.pe.sinusoidal import sinusoidal_frequencies, sinusoidal_table
from pebench.model.pe.t5 import t5_bucket


def _attn_nomask(x, wq, wk, wv):
    q, k, v = x @ wq, x @ wk, x @ wv
    return torch.softmax(q @ k.T / math.sqrt(q.shape[-1]), -1) @ v


def test_attention_without_positions_is_permutation_equivariant():
    x = torch.randn(10, 8, dtype=torch.float64)
    w = [torch.randn(8, 8, dtype=torch.float64) for _ in range(3)]
    perm = torch.randperm(10)
    assert torch.allclose(_attn_nomask(x[perm], *w), _attn_nomask(x, *w)[perm], atol=1e-10)


def test_causal_attention_with_none_is_not_permutation_equivariant():
    x = torch.randn(1, 1, 10, 8)
    perm = torch.tensor([3, 1, 4, 0, 9, 2, 6, 5, 8, 7])
    out = attend(x, x, x, None, "math")
    out_p = attend(x[:, :, perm], x[:, :, perm], x[:, :, perm], None, "math")
    assert not torch.allclose(out_p, out[:, :, perm], atol=1e-4)


def test_sinusoidal_shift_is_a_block_rotation():
    d = 16
    omega = sinusoidal_frequencies(d)
    for k in (1, 5, 37):
        Mk = torch.zeros(d, d, dtype=torch.float64)
        for i, w in enumerate(omega):
            c, s = math.cos(w * k), math.sin(w * k)
            # [sin(p w + k w), cos(p w + k w)] = [[c, s], [-s, c]] @ [sin(p w), cos(p w)]
            Mk[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = torch.tensor([[c, s], [-s, c]], dtype=torch.float64)
        for p in (0, 3, 100, 1000):
            pe = sinusoidal_table(torch.tensor([p, p + k]), d)
            assert torch.allclose(pe[1], Mk @ pe[0], atol=1e-9)
            expected = sum(math.cos(w * k) for w in omega.tolist())
            assert math.isclose(float(pe[0] @ pe[1]), expected, abs_tol=1e-9)


def test_sinusoidal_matches_vaswani_formula():
    pe = sinusoidal_table(torch.arange(50), 8)
    p, k = 17, 2
    assert math.isclose(float(pe[p, 2 * k]), math.sin(p / 10000 ** (2 * k / 8)), rel_tol=1e-12)
    assert math.isclose(float(pe[p, 2 * k + 1]), math.cos(p / 10000 ** (2 * k / 8)), rel_tol=1e-12)


def _rope(dh=16, **opts):
    return RoPE(PEContext(d_model=dh, n_heads=1, n_layers=1, context=64), opts)


def test_rope_inner_product_depends_only_on_offset():
    rope = _rope()
    q, k = torch.randn(1, 1, 1, 16, dtype=torch.float64), torch.randn(1, 1, 1, 16, dtype=torch.float64)
    T = 40
    qs, ks = rope.rotate(q.expand(1, 1, T, 16), k.expand(1, 1, T, 16), torch.arange(T), 0)
    dots = qs[0, 0] @ ks[0, 0].T  # [i, j]
    for off in (0, 3, 11):
        diag = torch.diagonal(dots, offset=off)
        assert torch.allclose(diag, diag[0].expand_as(diag), atol=1e-9)
    assert not math.isclose(float(dots[5, 5]), float(dots[5, 8]), abs_tol=1e-6)
    # norms preserved
    assert torch.allclose(qs.norm(dim=-1), q.norm(dim=-1).expand(1, 1, T), atol=1e-9)


def test_rope_rotation_matches_complex_multiplication():
    rope = _rope(dh=8)
    x = torch.randn(1, 1, 5, 8, dtype=torch.float64)
    out, _ = rope.rotate(x, x, torch.arange(5), 0)
    inv, _, _ = rope.resolved(5)
    z = torch.complex(x[..., :4], x[..., 4:]) * torch.exp(1j * torch.arange(5)[:, None] * inv[None, :])
    assert torch.allclose(out, torch.cat([z.real, z.imag], -1), atol=1e-9)
    assert torch.equal(rotate_half(torch.tensor([1.0, 2.0, 3.0, 4.0])), torch.tensor([-3.0, -4.0, 1.0, 2.0]))


def test_alibi_slopes_reference():
    assert alibi_slopes(8) == pytest.approx([2**-i for i in range(1, 9)])
    ref12 = [2**-i for i in range(1, 9)] + [2**-0.5, 2**-1.5, 2**-2.5, 2**-3.5]
    assert alibi_slopes(12) == pytest.approx(ref12)
    assert alibi_slopes(4) == pytest.approx([2**-2, 2**-4, 2**-6, 2**-8])


def test_alibi_bias_is_minus_slope_times_distance():
    pe = build_pe("alibi", PEContext(32, 8, 1, 16))
    mod = pe.score_mod(torch.zeros(1, 8, 6, 4), 0)
    h = torch.arange(8).view(1, 8, 1, 1)
    i = torch.arange(6).view(1, 1, 6, 1)
    j = torch.arange(6).view(1, 1, 1, 6)
    bias = mod(torch.zeros(()), torch.zeros(1, 1, 1, 1, dtype=torch.long), h, i, j)
    slopes = torch.tensor(alibi_slopes(8)).view(1, 8, 1, 1)
    assert torch.allclose(bias, -slopes * (i - j))


T5_TABLE = [
    (0, 15, None),
    (16, 18, 16),
    (19, 20, 17),
    (21, 23, 18),
    (24, 26, 19),
    (27, 30, 20),
    (31, 34, 21),
    (35, 39, 22),
    (40, 45, 23),
    (46, 51, 24),
    (52, 58, 25),
    (59, 66, 26),
    (67, 76, 27),
    (77, 86, 28),
    (87, 98, 29),
    (99, 112, 30),
    (113, 1000, 31),
]


def test_t5_causal_bucket_table_exact():
    n = torch.arange(0, 1001)
    b = t5_bucket(n, 32, 128)
    for lo, hi, bucket in T5_TABLE:
        for d in range(lo, hi + 1):
            assert int(b[d]) == (d if bucket is None else bucket), d
    assert int(t5_bucket(torch.tensor(-5))) == 0  # future keys: bucket 0 (masked anyway)


def test_t5_table_shared_across_layers():
    pe = build_pe("t5", PEContext(32, 4, 3, 16))
    q = torch.randn(1, 4, 6, 8)
    grid = (
        torch.zeros(1, 1, 1, 1, dtype=torch.long),
        torch.arange(4).view(1, 4, 1, 1),
        torch.arange(6).view(1, 1, 6, 1),
        torch.arange(6).view(1, 1, 1, 6),
    )
    with torch.no_grad():
        pe.table.normal_()
    b0 = pe.score_mod(q, 0)(torch.zeros(()), *grid)
    b2 = pe.score_mod(q, 2)(torch.zeros(()), *grid)
    assert torch.equal(b0, b2)
    assert sum(p.numel() for p in pe.parameters()) == 4 * 32


def _shaw(k_max=3, layers=1, dh=4, heads=2):
    pe = build_pe("shaw", PEContext(dh * heads, heads, layers, 16), {"k_max": k_max})
    with torch.no_grad():
        pe.a_k.normal_()
        pe.a_v.normal_()
    return pe


def test_shaw_distances_beyond_kmax_share_one_term():
    pe = _shaw(k_max=3)
    q = torch.randn(1, 2, 10, 4)
    grid = (
        torch.zeros(1, 1, 1, 1, dtype=torch.long),
        torch.arange(2).view(1, 2, 1, 1),
        torch.arange(10).view(1, 1, 10, 1),
        torch.arange(10).view(1, 1, 1, 10),
    )
    bias = pe.score_mod(q, 0)(torch.zeros(()), *grid)
    i = 9
    bias = bias.detach()
    far = [float(bias[0, 0, i, j]) for j in range(0, i - 3 + 1)]  # distances >= 3
    assert all(math.isclose(f, far[0], rel_tol=1e-6) for f in far)
    assert not math.isclose(float(bias[0, 0, i, i - 2]), far[0], rel_tol=1e-3)


def test_shaw_gather_equals_direct_double_loop():
    """Full Shaw attention (logit and value terms) against the paper's formula, written as loops."""
    k_max, dh, H, T = 3, 4, 2, 9
    pe = _shaw(k_max=k_max, dh=dh, heads=H)
    q, k, v = (torch.randn(1, H, T, dh, dtype=torch.float64) for _ in range(3))
    pe = pe.double()
    out = attend(q, k, v, pe.score_mod(q, 0), "math")
    aK, aV = pe.a_k[0], pe.a_v[0]
    ref = torch.zeros_like(out)
    for h in range(H):
        for i in range(T):
            e = torch.tensor(
                [float(q[0, h, i] @ (k[0, h, j] + aK[min(i - j, k_max)])) / math.sqrt(dh) for j in range(i + 1)],
                dtype=torch.float64,
            )
            a = torch.softmax(e, 0)
            ref[0, h, i] = sum(a[j] * (v[0, h, j] + aV[min(i - j, k_max)]) for j in range(i + 1))
    assert torch.allclose(out, ref, atol=1e-10)
    for backend in ("sdpa", "chunked"):
        assert torch.allclose(attend(q, k, v, pe.score_mod(q, 0), backend), ref, atol=1e-10)


def test_shaw_band_scores_blocks_match_loop():
    q, k = torch.randn(2, 3, 50, 8), torch.randn(2, 3, 50, 8)
    s = band_scores(q, k, 7)
    for i in range(50):
        for d in range(min(7, i + 1)):
            assert torch.allclose(s[:, :, i, d], (q[:, :, i] * k[:, :, i - d]).sum(-1), atol=1e-5)
