"""Differences an independent re-derivation of each paper's formula found, each pinned by a test that failed
before its fix: KERPLE's bound, FIRE's threshold, p-RoPE's count, xPos's centre, Sandwich's table, FoX's sums."""

import math

import pytest
import torch

from pebench.model.decoder import DecoderLM
from pebench.model.pe import PEContext, build_pe
from pebench.util.errors import UsageError
from support import tiny_model_config


def test_kerple_parameters_below_the_bound_are_reset_to_it_and_keep_their_gradient():
    from pebench.model.pe.kerple import EPS

    pe = build_pe("kerple", PEContext(32, 4, 2, 16))
    with torch.no_grad():
        pe.p.fill_(0.001)
        pe.a.fill_(-0.5)  # an optimizer step overshot
        pe.after_step()
    assert torch.all(pe.p == EPS) and torch.all(pe.a == EPS)  # reset to the bound, as the reference code does
    q = torch.randn(1, 4, 8, 8)
    mod = pe.score_mod(q, 0)
    i = torch.arange(8)
    mod.bias(torch.zeros(()), torch.arange(4)[:, None, None], i[:, None], i[None, :]).sum().backward()
    assert torch.all(pe.p.grad != 0) and torch.all(pe.a.grad != 0)  # at the bound it can move back


def test_kerple_training_keeps_its_parameters_in_their_domain(tmp_path):
    """A training step at a rate large enough to push them negative: the loop projects them back every step."""
    from pebench.config import Config, ModelConfig, TrainConfig
    from pebench.model.checkpoint import load_checkpoint
    from pebench.results import ResultsDir
    from pebench.train import TrainJob, train

    cfg = Config(
        ModelConfig(d_model=32, n_layers=1, n_heads=2, d_mlp=64, context=16, pe="kerple"),
        TrainConfig(steps=3, batch_size=2, lr=5.0, warmup=0, log_every=1, checkpoint_every=3),
    ).validate()
    train(TrainJob(cfg, ResultsDir(tmp_path), "k", device="cpu"))
    state = load_checkpoint(tmp_path / "runs" / "k" / "checkpoint.pt")["model"]
    bound = torch.tensor(0.01)  # in float32, as stored
    assert bool(state["pe.p"].min() >= bound) and bool(state["pe.a"].min() >= bound)


def test_fire_threshold_starts_at_the_training_context():
    pe = build_pe("fire", PEContext(32, 4, 2, 64))
    assert float(pe.c_and_L()[1]) == 64.0


@pytest.mark.parametrize("fraction, kept", [(0.1, 1), (0.3, 4), (0.6, 9), (0.75, 12), (1.0, 16), (0.0, 0)])
def test_p_rope_keeps_floor_of_the_fraction_of_frequencies(fraction, kept):
    from pebench.model.pe.p_rope import kept_frequencies

    assert kept_frequencies(16, fraction) == kept
    pe = build_pe("p-rope", PEContext(128, 4, 2, 64), {"fraction": fraction})  # head_dim 32: 16 frequencies
    assert int((pe.resolved(64)[0] != 0).sum()) == kept


def test_xpos_logits_stay_finite_with_random_positions_up_to_40000():
    """The scale is centred on the middle of the positions used: centred on T//2 instead, 855 of 66,048 logits
    were non-finite at M = 40,000."""
    from pebench.train import sample_positions

    model = DecoderLM(tiny_model_config("xpos", context=16), max_position=40_000)
    pos = sample_positions(0, 0, 16, 40_000, "cpu")
    assert int(pos[-1]) > 30_000
    logits = model(torch.randint(0, 256, (2, 16)), positions=pos)
    assert torch.isfinite(logits).all()
    q = torch.randn(1, 4, 16, 8)
    rq, rk = model.pe.rotate(q, q.clone(), pos, 0)
    assert torch.isfinite(rq).all() and torch.isfinite(rk).all()


def test_xpos_refuses_a_span_its_scales_cannot_hold():
    from pebench.model.pe.xpos import xpos_span_limit

    limit = xpos_span_limit(512.0, 0.4)
    assert 60_000 < limit < 70_000
    with pytest.raises(UsageError, match="random_positions"):
        DecoderLM(tiny_model_config("xpos", context=16), max_position=limit + 1)
    assert build_pe("xpos", PEContext(32, 4, 2, 16)).max_positions() == limit  # evaluation: undefined beyond


def test_sandwich_is_exact_at_every_position_the_model_was_built_for_and_refuses_others():
    from pebench.model.pe.sandwich import sandwich_base, sandwich_ratios

    model = DecoderLM(tiny_model_config("sandwich", context=16), max_position=500)
    pos = torch.tensor([0, 3, 40, 41, 100, 250, 251, 499])
    q = torch.randn(1, 4, len(pos), 8)
    from pebench.model.pe.base import at_positions

    mod = at_positions(model.pe.score_mod(q, 0), pos)
    i = torch.arange(len(pos))
    got = mod.fn(torch.zeros(()), 0, torch.arange(4)[:, None, None], i[:, None], i[None, :])
    d = (pos[:, None] - pos[None, :]).clamp(min=0)
    want = sandwich_base(d, 32)[None] / sandwich_ratios(4)[:, None, None]
    causal = d >= 0
    assert torch.allclose(got.double()[:, causal], want[:, causal], atol=1e-4)
    plain = DecoderLM(tiny_model_config("sandwich", context=16))  # built for positions below 16
    with pytest.raises(UsageError, match="built for positions below 16"):
        plain(torch.randint(0, 256, (1, 8)), positions=pos)


def test_fox_logit_term_is_accurate_at_300_tokens():
    """The term F_i - F_j of the float32 model against a float64 reference: a float32 running sum (or a float64
    sum rounded to float32) errs by 1e-5 and more here, where F reaches about -100."""
    pe = build_pe("fox", PEContext(32, 4, 1, 16))
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1, 300, 32, generator=g)
    with torch.no_grad():
        pe.w.copy_(torch.randn(1, 4, 32, generator=g) * 0.2)
        pe.b.fill_(1.0)
    mod = pe.score_mod(torch.zeros(1, 4, 300, 8), 0, x=x)
    i = torch.arange(300)
    got = mod.fn(torch.zeros(()), 0, torch.arange(4)[:, None, None], i[:, None], i[None, :]).double()
    ref = torch.cumsum(torch.nn.functional.logsigmoid(x.double() @ pe.w[0].double().t() + 1.0), 1)[0].t()  # [H, T]
    want = ref[:, :, None] - ref[:, None, :]
    assert float(ref.min()) < -80
    err, causal = (got - want).abs(), (i[:, None] >= i[None, :])[None].expand_as(want)
    near = causal & (want.abs() < 4)  # pairs whose attention weight is not negligible
    assert float(err[near].max()) < 1e-6  # a float32 running sum errs by ~1e-5 on these
    assert float((err[causal] / want[causal].abs().clamp(min=1)).max()) < 5e-7  # a few float32 ulps elsewhere


def test_sandwich_dimension_is_the_model_width_unless_set():
    assert build_pe("sandwich", PEContext(64, 4, 2, 16)).dim == 64
    assert build_pe("sandwich", PEContext(64, 4, 2, 16), {"dim": 16}).dim == 16
    assert math.isclose(
        float(__import__("pebench.model.pe.sandwich", fromlist=["x"]).sandwich_base(torch.tensor(0.0), 8)), 0.0
    )
