"""Scale-invariant attention (Anson et al., NeurIPS 2025, arXiv 2505.17083). The oracle is the paper's two
conditions under its Gaussian assumption, computed in closed form (a key's expected weight exp(m_t + a_t^2 / 2)):
the total over distances [t, 2t] the same at every scale, and a_t growing as the largest of t unit Gaussians; a
planted transform without the variance correction (m_t = -log(1 + t / tau)) fails the first. The attention is
checked element by element against the transform written out, and a micro run trains with --scale-invariant."""

import json
import math

import pytest
import torch

from pebench.model.decoder import DecoderLM
from pebench.model.scale_invariant import attend_scale_invariant, si_coefficients
from support import invoke, micro_file, tiny_model_config


def range_totals(m_of, a_of, tau, scales):
    """Expected total weight over distances [t, 2t) for t = tau * 2^s, unit-Gaussian logits."""
    out = []
    for s in scales:
        t0 = int(tau * 2**s)
        out.append(sum(math.exp(m_of(t) + a_of(t) ** 2 / 2) for t in range(t0, 2 * t0)))
    return out


def test_total_attention_is_scale_invariant_and_sparsity_grows_as_the_max_of_t_gaussians():
    tau = 10.0

    def a(t):
        return float(si_coefficients(torch.tensor([t]), tau)[0][0])

    def m(t):
        return float(si_coefficients(torch.tensor([t]), tau)[1][0])

    totals = range_totals(m, a, tau, range(5, 12))  # t from 320 to 20,480 tokens back
    assert max(totals) / min(totals) < 1.03  # each tends to e^(1/2) tau log 2 (2% off at t = 32 tau)
    assert totals[-1] == pytest.approx(math.exp(0.5) * tau * math.log(2), rel=0.01)
    wrong = range_totals(lambda t: -math.log1p(t / tau), a, tau, range(2, 12))  # no a^2 / 2 correction
    assert max(wrong) / min(wrong) > 10
    for t in (1e3, 1e5, 1e7):  # a_t^2 / (2 log t) -> 1
        assert a(t) ** 2 / (2 * math.log(t / tau)) == pytest.approx(1.0, abs=0.15)
    assert a(0) == 1.0 and m(0) == 0.0


def test_attention_is_the_transform_element_by_element():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 9, 4, generator=g) for _ in range(3))
    tau = 3.0
    want = torch.zeros(1, 2, 9, 4, dtype=torch.float64)
    for h in range(2):
        for i in range(9):
            logits = []
            for j in range(i + 1):
                t = i - j
                a, m = math.sqrt(1 + 2 * math.log(1 + t / tau)), -2 * math.log(1 + t / tau)
                logits.append(a * float(q[0, h, i] @ k[0, h, j]) / 2 + m)
            w = torch.softmax(torch.tensor(logits, dtype=torch.float64), 0)
            want[0, h, i] = (w[:, None] * v[0, h, : i + 1].double()).sum(0)
    got = attend_scale_invariant(q, k, v, None, tau, block=4)
    assert torch.allclose(got.double(), want, atol=1e-5)
    assert torch.allclose(
        attend_scale_invariant(q, k, v, None, tau, start=5)[:, :, :].double(), want[:, :, 5:], atol=1e-5
    )


def test_a_model_with_it_trains_and_differs_from_one_without():
    torch.manual_seed(0)
    model = DecoderLM(tiny_model_config("p-rope", scale_invariant_tau=10.0))
    x = torch.randint(0, 256, (2, 24))
    model(x).float().logsumexp(-1).sum().backward()
    assert model.blocks[0].attn.qkv.weight.grad.abs().sum() > 0
    plain = DecoderLM(tiny_model_config("p-rope"))
    plain.load_state_dict(model.state_dict())
    with torch.no_grad():
        assert not torch.allclose(model(x), plain(x), atol=1e-5)
        assert torch.allclose(model(x)[:, :1], plain(x)[:, :1], atol=1e-5)  # the first query sees itself only


def test_train_with_scale_invariant(tmp_path_factory, tmp_path):
    cfg = micro_file(tmp_path_factory)
    r = invoke("train", "--pe", "p-rope", "--config", cfg, "--scale-invariant", "10", "--results", tmp_path)
    assert r.exit_code == 0, r.output
    r = invoke("eval", "--run", "p-rope-micro-si10-s0", "--lengths", "2x", "--rope-scaling", "", "--results", tmp_path)
    assert r.exit_code == 0, r.output
    (rec,) = [json.loads(p.read_text()) for p in (tmp_path / "records").rglob("*.json")]
    assert rec["label"] == "p-rope si10"
    r = invoke("train", "--pe", "p-rope", "--config", cfg, "--scale-invariant", "-1", "--results", tmp_path)
    assert r.exit_code == 2 and "--scale-invariant must be > 0" in r.output
