"""Random Float Sampling (arXiv 2602.14050): training positions are sorted uniform floats from [0, M), reproducible
by (seed, step); a model trained so draws its evaluation positions the same way, one seeded draw per length shared by
every window; RoPE and ALiBi read real-valued positions as the same formulas; schemes that index by position are
refused in one line, and the label and name tell the float runs from the integer ones."""

import math

import pytest
import torch

from pebench.config import load_config
from pebench.model.decoder import DecoderLM
from pebench.train import sample_positions
from pebench.util.errors import UsageError
from support import tiny_model_config


def test_float_positions_are_sorted_uniform_in_range_and_reproducible():
    p = sample_positions(3, 5, 64, 100, "cpu", continuous=True)
    assert p.dtype == torch.float32 and p.shape == (64,) and (p[1:] >= p[:-1]).all()
    assert 0 <= float(p.min()) and float(p.max()) < 100 and (p != p.round()).any()  # real-valued
    assert torch.equal(p, sample_positions(3, 5, 64, 100, "cpu", continuous=True))
    assert not torch.equal(p, sample_positions(3, 6, 64, 100, "cpu", continuous=True))
    many = torch.cat([sample_positions(0, s, 64, 100, "cpu", continuous=True) for s in range(200)])
    assert abs(float(many.mean()) - 50) < 1.5  # uniform on [0, 100): mean 50, sd of the mean 29/sqrt(12800)


def test_evaluation_draws_one_seeded_sorted_set_per_length():
    torch.manual_seed(0)
    m = DecoderLM(tiny_model_config("rope"), 64, continuous=True).eval()
    a, b = m.drawn_positions(40, "cpu"), m.drawn_positions(40, "cpu")
    assert a is b and a.shape == (40,) and (a[1:] >= a[:-1]).all() and float(a.max()) < 64
    other = DecoderLM(tiny_model_config("rope"), 64, continuous=True)
    assert torch.equal(other.drawn_positions(40, "cpu"), a)  # every model of a length reads the same draw
    x = torch.randint(0, 256, (2, 40))
    with torch.no_grad():
        assert torch.allclose(m(x), m(x, positions=a))  # given none, it reads its draw
        assert not torch.allclose(m(x), m(x, positions=torch.arange(40)))


@pytest.mark.parametrize("pe", ["rope", "alibi"])
def test_real_valued_positions_enter_the_same_formulas(pe):
    """RoPE's logit between positions 2.5 and 0.75 is q R(1.75) k; ALiBi's penalty is m_h * 1.75: by hand."""
    from pebench.model.pe import PEContext, build_pe

    scheme = build_pe(pe, PEContext(16, 2, 1, 8, 64)).double()
    scheme.consecutive = False
    torch.manual_seed(1)
    q, k = torch.randn(1, 2, 2, 8, dtype=torch.float64), torch.randn(1, 2, 2, 8, dtype=torch.float64)
    pos = torch.tensor([0.75, 2.5], dtype=torch.float32)
    if pe == "rope":
        q2, k2 = scheme.rotate(q, k, pos, 0)
        for h in range(2):
            got = float(q2[0, h, 1] @ k2[0, h, 0])
            want = 0.0
            for c in range(4):  # pairs (c, c + 4), angle 1.75 * 10000^(-2c/8)
                a = 1.75 * 10000.0 ** (-2 * c / 8)
                qa, qb, ka, kb = q[0, h, 1, c], q[0, h, 1, c + 4], k[0, h, 0, c], k[0, h, 0, c + 4]
                want += float((qa * ka + qb * kb) * math.cos(a) + (qa * kb - qb * ka) * math.sin(a))
            assert math.isclose(got, want, rel_tol=1e-6)
    else:
        from pebench.model.pe.base import at_positions

        mod = at_positions(scheme.score_mod(q, 0, k), pos)
        got = mod.bias(0, torch.arange(2).view(2, 1, 1), torch.tensor([[1]]), torch.tensor([[0]]))
        assert torch.allclose(got.flatten().double(), -scheme.slopes.double() * 1.75)


def test_schemes_that_index_by_position_are_refused_and_the_runs_are_named_apart():
    with pytest.raises(UsageError, match="reads positions as numbers"):
        DecoderLM(tiny_model_config("learned"), 64, continuous=True)
    cfg = load_config("tiny")
    cfg.train.random_positions_float = True
    with pytest.raises(UsageError, match="random_positions_float needs train.random_positions"):
        cfg.validate()
    from pebench.eval.evaluate import variant_label

    cfg.train.random_positions = 2048
    m = DecoderLM(cfg.model, 2048, continuous=True)
    assert variant_label(cfg, m.pe, {})[1] == "rope rpf2048"
    cfg.train.random_positions_float = False
    assert variant_label(cfg, m.pe, {})[1] == "rope rp2048"
