"""PoPE (Gopalakrishnan et al. 2025) against a loop-by-loop transcription of its score, its gradients, and the
properties the paper builds it for: relative positions only, and no phase from content."""

import math

import pytest
import torch

from pebench.model.pe import PEContext, build_pe
from pebench.model.pe.pope import pope_scores
from support import invoke, write_micro

CTX = PEContext(32, 2, 2, 16)  # d_h 16: 16 frequencies


def _pope(**opts):
    pe = build_pe("pope", CTX, opts).double()
    if opts.get("phase_bias", True):
        with torch.no_grad():
            pe.delta.uniform_(-2 * math.pi, 0.0)
    return pe


def _scores(pe, q, k, positions, layer=1):
    q2, k2 = pe.rotate(q, k, positions, layer)
    return (q2 @ k2.transpose(-1, -2)) * q2.shape[-1] ** -0.5  # what every attention backend computes


@pytest.mark.parametrize("phase_bias", [True, False])
def test_scores_equal_the_papers_formula_loop_by_loop(phase_bias):
    torch.manual_seed(0)
    pe = _pope(phase_bias=phase_bias)
    q, k = torch.randn(1, 2, 9, 16, dtype=torch.float64), torch.randn(1, 2, 9, 16, dtype=torch.float64)
    got = _scores(pe, q, k, torch.arange(9))
    theta = pe.resolved(9)[0]
    assert torch.allclose(theta, 10000.0 ** (-torch.arange(16, dtype=torch.float64) / 16))  # d_h frequencies
    for h in range(2):
        delta = pe.delta[1, h].detach() if phase_bias else None
        assert torch.allclose(got[0, h], pope_scores(q[0, h], k[0, h], theta, delta), atol=1e-12)


def test_gradients_match_finite_differences():
    torch.manual_seed(1)
    pe = _pope()
    q = torch.randn(1, 2, 5, 16, dtype=torch.float64, requires_grad=True)
    k = torch.randn(1, 2, 5, 16, dtype=torch.float64, requires_grad=True)

    delta = pe.delta.detach().clone().requires_grad_(True)
    del pe.delta  # the phase bias as an input, so gradcheck differentiates through it

    def f(q, k, d):
        pe.delta = d
        return _scores(pe, q, k, torch.arange(5))

    assert torch.autograd.gradcheck(lambda q, k, d: f(q, k, d), (q, k, delta))


def test_only_relative_positions_matter_and_content_never_shifts_a_phase():
    torch.manual_seed(2)
    pe = _pope(phase_bias=False)
    q, k = torch.randn(1, 2, 12, 16, dtype=torch.float64), torch.randn(1, 2, 12, 16, dtype=torch.float64)
    a = _scores(pe, q, k, torch.arange(12))
    pe.consecutive = False  # positions 100 .. 111: the same differences
    assert torch.allclose(a, _scores(pe, q, k, torch.arange(100, 112)), atol=1e-9)
    # one query content, one key content at every position: PoPE's score peaks at distance 0 whatever the two
    # contents (no content phase); RoPE's peak moves with the contents' phase difference
    xq = torch.randn(1, 2, 1, 16, dtype=torch.float64).expand(1, 2, 12, 16)
    xk = torch.randn(1, 2, 1, 16, dtype=torch.float64).expand(1, 2, 12, 16)
    s = _scores(pe, xq, xk, torch.arange(12))[0, :, -1]  # the last query against every key
    assert (s[:, -1:] >= s[:, :-1]).all()
    rope = build_pe("rope", CTX).double()
    q2, k2 = rope.rotate(xq, xk, torch.arange(12), 0)
    r = (q2 @ k2.transpose(-1, -2))[0, :, -1]
    assert not (r[:, -1:] >= r[:, :-1]).all()  # a RoPE key farther away outscores the nearest


def test_the_phase_bias_stays_in_its_range_and_scalings_keep_the_class():
    pe = build_pe("pope", CTX)
    with torch.no_grad():
        pe.delta.fill_(1.0)
        pe.delta[0, 0, 0] = -10.0
    pe.after_step()
    assert float(pe.delta.detach().max()) == 0.0 and float(pe.delta.detach().min()) == pytest.approx(-2 * math.pi)
    yarn = pe.with_variant("yarn")
    assert type(yarn) is type(pe) and torch.equal(yarn.delta, pe.delta)
    assert not torch.equal(yarn.resolved(64)[0], pe.resolved(64)[0])  # 4x: YaRN's frequencies, over d_h of them
    assert yarn.resolved(64)[0].shape == (16,)


def test_trains_and_evaluates_to_16x_with_its_scalings(tmp_path):
    res = tmp_path / "res"
    r = invoke("train", "--pe", "pope", "--config", write_micro(tmp_path), "--results", res)
    assert r.exit_code == 0, r.output
    r = invoke("eval", "--lengths", "1x,16x", "--rope-scaling", "none,yarn", "--results", res)
    assert r.exit_code == 0, r.output
    labels = {p.name for p in (res / "records" / "pope-micro-s0").glob("*.json")}
    assert labels == {
        "pope__nonoverlap__L16.json",
        "pope__nonoverlap__L256.json",
        "pope-yarn__nonoverlap__L16.json",
        "pope-yarn__nonoverlap__L256.json",
    }
