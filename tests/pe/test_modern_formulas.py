"""The schemes after ALiBi, each against a direct transcription of its paper's formula."""

import math

import pytest
import torch

from pebench.model.decoder import DecoderLM
from pebench.model.pe import PEContext, build_pe
from pebench.model.pe.base import ScoreMod
from pebench.model.pe.fire import fire_input
from pebench.model.pe.xpos import xpos_zeta
from support import tiny_model_config

CTX = PEContext(32, 4, 2, 16)  # d_model 32, 4 heads of 8, 2 layers, context 16


def _grid_bias(mod: ScoreMod, T: int, H: int = 4) -> torch.Tensor:
    b = torch.zeros(1, 1, 1, 1, dtype=torch.long)
    h = torch.arange(H).view(1, H, 1, 1)
    qi, ki = torch.arange(T).view(1, 1, T, 1), torch.arange(T).view(1, 1, 1, T)
    return mod.bias(b, h, qi, ki).expand(1, H, T, T)[0].detach().double()


def _check_relative_and_decreasing(bias: torch.Tensor, strictly_until: int):
    T = bias.shape[-1]
    for i in range(T):
        for j in range(i + 1):  # depends on i - j only
            assert bias[:, i, j] == pytest.approx(bias[:, i - j, 0], abs=1e-9)
    row = bias[:, T - 1, :].flip(-1)  # distance 0 .. T-1
    assert row[:, 0].abs().max() < 1e-12  # 0 at distance 0
    assert (row[:, 1:strictly_until] < row[:, : strictly_until - 1]).all()  # decreasing with distance


@pytest.mark.parametrize("kind", ["log", "power"])
def test_kerple_is_the_papers_kernel_of_distance(kind):
    pe = build_pe("kerple", CTX, {"kind": kind})
    with torch.no_grad():
        pe.p.copy_(torch.tensor([0.5, 1.0, 1.5, 0.001]))  # the last one is clamped to 0.01
        pe.a.copy_(torch.tensor([0.2, 0.9, 0.05, 0.3]))
    bias = _grid_bias(pe.score_mod(torch.zeros(1, 4, 20, 8), 0), 20)
    p, a = [0.5, 1.0, 1.5, 0.01], [0.2, 0.9, 0.05, 0.3]
    for h in range(4):
        for r in range(20):
            want = -p[h] * math.log(1 + a[h] * r) if kind == "log" else (-a[h] * r ** p[h] if r else 0.0)
            assert bias[h, 19, 19 - r].item() == pytest.approx(want, rel=1e-5, abs=1e-6)
    _check_relative_and_decreasing(bias, 20)


def test_sandwich_is_the_shifted_sinusoid_inner_product_per_head():
    pe = build_pe("sandwich", CTX)
    bias = _grid_bias(pe.score_mod(torch.zeros(1, 4, 40, 8), 0), 40)
    d = 32
    for h in range(4):
        for r in (0, 1, 5, 39):
            # <PE(i), PE(j)> of (sin, cos) pairs = sum_k cos((i - j) w_k), w_k = 10000^(-2k/d)
            dot = sum(math.cos(r * 10000 ** (-2 * k / d)) for k in range(1, d // 2 + 1))
            want = (dot - d / 2) / (8 * (h + 1) / 4)
            assert bias[h, 39, 39 - r].item() == pytest.approx(want, rel=1e-5, abs=1e-6)
    # the sum of cosines falls monotonically over the near distances (its fastest cosine has period 11 at d' = 32),
    # and far keys lie lower than near ones on average
    _check_relative_and_decreasing(bias, 8)
    row = bias[:, 39].flip(-1)
    assert (row[:, 20:].mean(-1) < row[:, 1:8].mean(-1)).all()


def test_fire_input_is_in_unit_interval_and_a_linear_mlp_gives_an_alibi_like_line():
    c, L = torch.tensor(0.1), torch.tensor(16.0)
    qi, ki = torch.arange(300).view(-1, 1), torch.arange(300).view(1, -1)
    x = fire_input(qi, ki, c, L)
    causal = ki <= qi
    assert x[causal].min() >= 0 and x[causal].max() <= 1 + 1e-6
    assert torch.allclose(x[16:, 0], torch.ones(284, dtype=x.dtype), atol=1e-6)  # the farthest key of i >= L: 1
    pe = build_pe("fire", CTX)
    with torch.no_grad():  # MLP = identity into head h with slope -s_h, and c -> 0: psi(x)/psi(L) -> x / L
        pe.c_raw.fill_(math.log(math.expm1(1e-6)))
        pe.L_raw.fill_(15.0)  # L = |L_raw| + 1 = 16
        pe.mlp[0].weight.fill_(1.0), pe.mlp[0].bias.zero_()
        pe.mlp[2].weight.zero_(), pe.mlp[2].bias.zero_()
        slopes = torch.tensor([1.0, 2.0, 4.0, 8.0])
        pe.mlp[2].weight[:, 0] = -slopes
    bias = _grid_bias(pe.score_mod(torch.zeros(1, 4, 16, 8), 0), 16)
    for h in range(4):
        for i in range(16):
            for j in range(i + 1):
                assert bias[h, i, j].item() == pytest.approx(-slopes[h].item() * (i - j) / 16, abs=1e-4)


def test_xpos_keeps_the_relative_rotation_and_multiplies_the_logit_by_the_decay():
    pe = build_pe("xpos", CTX)
    dh, T = 8, 40
    q, k = torch.randn(1, 1, T, dh, dtype=torch.float64), torch.randn(1, 1, T, dh, dtype=torch.float64)
    q[..., :], k[..., :] = q[:, :, :1].expand_as(q), k[:, :, :1].expand_as(k)  # the same vectors at every position
    qr, kr = pe.rotate(q, k, torch.arange(T), 0)
    logits = (qr @ kr.transpose(-1, -2))[0, 0]
    zeta = xpos_zeta(dh)
    B = 512.0
    for n, m in ((5, 2), (30, 2), (39, 10)):
        want = 0.0  # per frequency pair: the RoPE rotation of the pair times zeta_k^((n - m) / B)
        inv = 10000.0 ** (-torch.arange(0, dh, 2, dtype=torch.float64) / dh)
        for kk in range(dh // 2):
            a, b_ = q[0, 0, 0, [kk, kk + dh // 2]], k[0, 0, 0, [kk, kk + dh // 2]]
            ang = (m - n) * inv[kk]  # R(n t)a . R(m t)b = a . R((m - n) t) b
            rot = (a[0] * b_[0] + a[1] * b_[1]) * math.cos(ang) + (a[1] * b_[0] - a[0] * b_[1]) * math.sin(ang)
            want += rot * zeta[kk] ** ((n - m) / B)
        assert logits[n, m].item() == pytest.approx(want.item(), rel=1e-9)
    assert logits[12, 4].item() == pytest.approx(logits[30, 22].item(), rel=1e-9)  # relative


def test_p_rope_interpolates_exactly_between_none_and_rope():
    x = torch.randint(0, 256, (2, 16))
    outs = {}
    for name, opts in (
        ("rope", None),
        ("none", None),
        ("p-rope", {"fraction": 1.0}),
        ("p-rope", {"fraction": 0.0}),
        ("p-rope", {"fraction": 0.5}),
    ):
        torch.manual_seed(0)
        cfg = tiny_model_config(name, pe_options={name: opts} if opts else {})
        with torch.no_grad():
            outs[(name, (opts or {}).get("fraction"))] = DecoderLM(cfg).eval()(x)
    assert torch.equal(outs[("p-rope", 1.0)], outs[("rope", None)])
    assert torch.equal(outs[("p-rope", 0.0)], outs[("none", None)])
    assert not torch.allclose(outs[("p-rope", 0.5)], outs[("rope", None)])
    pe = build_pe("p-rope", CTX, {"fraction": 0.5})
    inv = pe.resolved(16)[0]
    assert (inv[:2] > 0).all() and (inv[2:] == 0).all()  # the highest half of 4 frequencies kept


def test_fox_term_is_the_explicit_sum_of_log_gates():
    pe = build_pe("fox", CTX)
    with torch.no_grad():
        pe.w.normal_(0, 0.3), pe.b.normal_(1, 0.5)
    T = 12
    x = torch.randn(2, T, 32)
    mod = pe.score_mod(torch.zeros(2, 4, T, 8), 1, None, x)
    b = torch.arange(2).view(2, 1, 1, 1)
    h, qi, ki = torch.arange(4).view(1, 4, 1, 1), torch.arange(T).view(1, 1, T, 1), torch.arange(T).view(1, 1, 1, T)
    bias = mod.bias(b, h, qi, ki)
    for bb in range(2):
        for hh in range(4):
            logf = [math.log(1 / (1 + math.exp(-(x[bb, t] @ pe.w[1, hh] + pe.b[1, hh]).item()))) for t in range(T)]
            for i in range(T):
                for j in range(i + 1):
                    assert bias[bb, hh, i, j].item() == pytest.approx(sum(logf[j + 1 : i + 1]), abs=1e-4)


def test_cope_positions_are_the_explicit_gate_sums():
    pe = build_pe("cope", CTX, {"p_max": 6})
    with torch.no_grad():
        pe.e.normal_(0, 1)
    T = 10
    q, k = torch.randn(1, 4, T, 8, dtype=torch.float64), torch.randn(1, 4, T, 8, dtype=torch.float64)
    pe = pe.double()
    mod = pe.score_mod(q, 0, k)
    bias = _grid_bias(mod, T).view(4, T, T)
    e = pe.e[0].detach()
    for h in range(4):
        for i in range(T):
            gates = [1 / (1 + math.exp(-(q[0, h, i] @ k[0, h, t]).item() / math.sqrt(8))) for t in range(T)]
            for j in range(i + 1):
                p = min(sum(gates[j : i + 1]), 5.0)
                lo, hi = math.floor(p), min(math.floor(p) + 1, 5)
                w = p - lo
                want = (1 - w) * (q[0, h, i] @ e[lo]).item() + w * (q[0, h, i] @ e[hi]).item()
                assert bias[h, i, j].item() == pytest.approx(want, abs=1e-9)


def test_scaled_rope_variants_keep_the_subclass():
    xp = build_pe("xpos", CTX)
    yarn = xp.with_variant("yarn", 4.0)
    assert type(yarn).__name__ == "XPos" and yarn.options.scale_base == 512.0 and yarn.variant == "yarn"
    pr = build_pe("p-rope", CTX, {"fraction": 0.5}).with_variant("linear")
    assert type(pr).__name__ == "PRoPE" and pr.options.fraction == 0.5
    assert (pr.resolved(64)[0][2:] == 0).all()  # still only the kept frequencies rotate under PI
