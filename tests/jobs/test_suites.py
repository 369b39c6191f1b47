"""The suites' plans: the scale suite's points (each axis's stated invariant: the width points at the default's
tokens per parameter, the context points at its token budget, the budget points at 4x and 8x its steps), every run
named apart, each point evaluated from 1x to 16x its own context; the patterns suite's schemes."""

import functools
from dataclasses import replace
from pathlib import Path

import pytest

from pebench.config import ConfigFlags, load_config
from pebench.eval.evaluate import eval_lengths
from pebench.eval.flags import EvalFlags
from pebench.findings.claims import markdown_tables
from pebench.jobs.plan import suite_plan
from pebench.jobs.suites import SCALE_POINTS
from pebench.perf.estimate import count_params
from pebench.util.errors import UsageError


@functools.cache  # a plan is read, never changed, by the tests that share it
def _plan(suite, **flags):
    return suite_plan(suite, ConfigFlags(**flags), "0,1,2", None, EvalFlags(), final=True)


def _point(name: str):
    return next(p for p in SCALE_POINTS if p.name == name)


def _tokens(cfg) -> int:
    return cfg.train.steps * cfg.train.batch_size * cfg.model.context


def test_the_scale_suite_plans_the_classic_seven_at_every_point_and_seed():
    sp = _plan("scale")
    names = [n for n, _ in sp.runs]
    assert len(names) == len(set(names)) == 7 * len(SCALE_POINTS) * 3
    assert "rope-tiny-s0" in names and "alibi-tiny-d256-s2" in names and "t5-tiny-ctx64-s1" in names
    assert sp.request.split == "test" and str(sp.results) == "results/scale-runs"
    axes = {p.axis for p in SCALE_POINTS if p.axis}
    assert axes == {"budget", "width", "width-steps", "context"}
    counts = {axis: len([p for p in SCALE_POINTS if p.axis == axis]) for axis in axes}
    assert counts == {"budget": 3, "width": 3, "width-steps": 3, "context": 3}  # beside the default: four points each


def test_each_axis_keeps_what_it_states():
    cfgs = {c.name: c for _, c in _plan("scale").runs if c.model.pe == "rope"}
    base = cfgs["tiny"]
    ratio = _tokens(base) / count_params(base)[0]
    assert ratio == pytest.approx(2.49, abs=0.01)
    for w in ("d64", "d192", "d256"):  # width: the default's tokens per parameter, heads and MLP ratio fixed
        c = cfgs[f"tiny-{w}"]
        assert _tokens(c) / count_params(c)[0] == pytest.approx(ratio, rel=0.01)
        assert c.model.n_heads == 4 and c.model.d_mlp == 4 * c.model.d_model
        fixed = cfgs[f"tiny-{w}s500"]  # width at fixed steps: the same model, the default's 500 steps
        assert fixed.model == c.model and fixed.train.steps == base.train.steps == 500
        assert _tokens(fixed) == _tokens(base) and fixed.train.lr_by_scheme == base.train.lr_by_scheme
    sizes = [count_params(cfgs[n])[0] for n in ("tiny-d64", "tiny-d256")]
    assert sizes[1] / sizes[0] >= 8  # spans at least 8x in parameters
    for ctx in ("ctx64", "ctx256", "ctx512"):  # context: the default's token budget
        assert _tokens(cfgs[f"tiny-{ctx}"]) == _tokens(base)
    names = ("tiny", "tiny-steps1000", "tiny-steps2000", "tiny-steps4000")
    budgets = sorted(_tokens(cfgs[n]) / count_params(cfgs[n])[0] for n in names)
    assert [b / budgets[0] for b in budgets] == pytest.approx([1, 2, 4, 8]) and budgets[-1] == pytest.approx(
        20, rel=0.01
    )


def test_each_point_is_evaluated_from_1x_to_16x_its_own_context():
    sp = _plan("scale")
    for _, c in sp.runs:
        assert eval_lengths(c, sp.request.lengths) == [c.model.context * k for k in (1, 2, 4, 8, 16)]


def test_steps_given_make_a_smoke_run_of_every_point():
    sp = _plan("scale", steps=3)
    assert {c.train.steps for _, c in sp.runs} == {3}
    assert any("--steps 3 replaces every point's steps" in n for n in sp.notes)
    widths = {c.model.d_model for _, c in sp.runs}
    assert widths == {64, 128, 192, 256}  # the other axes stay


def test_the_costliest_points_train_compiled_unless_a_flag_says_otherwise():
    """steps4000, d192, d256 and the fixed-step widths 192 and 256 train compiled (the suite's lever,
    results/scale/levers.md); the points measured eager keep their configs (and so their records' hashes);
    --compile/--no-compile decides for every point."""
    compiled = {c.name for _, c in _plan("scale").runs if c.train.compile}
    assert compiled == {"tiny-steps4000", "tiny-d256", "tiny-d192", "tiny-d192s500", "tiny-d256s500"}
    assert not any(c.train.compile for _, c in _plan("scale", compile=False).runs)
    assert all(c.train.compile for _, c in _plan("scale", compile=True).runs)


def test_a_suite_without_points_is_its_config_alone():
    sp = _plan("patterns")
    names = [n for n, _ in sp.runs]
    assert len(names) == 9 * 3 and {c.name for _, c in sp.runs} == {"tiny"}
    assert "irope-tiny-s0" in names and "stick-breaking-tiny-s2" in names
    lrs = {n.rsplit("-tiny", 1)[0]: c.train.lr for n, c in sp.runs}
    assert lrs["irope"] == 0.003 and lrs["pope"] == 0.01 and lrs["nope-rope-alt"] == 0.01


def test_a_point_names_its_config_and_leaves_the_rest():
    base = _plan("default").runs[0][1]
    p = replace(_point("d64"), settings=(("model.d_model", 64),))
    c = p.apply(base)
    assert c.name == "tiny-d64" and c.model.d_model == 64 and c.model.d_mlp == base.model.d_mlp
    assert SCALE_POINTS[0].apply(base) is base


def test_a_point_can_carry_its_own_rates_and_its_runs_train_at_them():
    """A point's ``train.lr_by_scheme`` replaces the config's table (a scheme it leaves out takes ``train.lr``), and
    its runs are named and hashed apart from the same point at the suite's rates (docs/findings/scale-width.md)."""
    from pebench.jobs.plan import plan_runs

    base = _plan("default").runs[0][1]
    point = replace(
        _point("d64"), name="d64-own", settings=(*_point("d64").settings, ("train.lr_by_scheme", {"rope": 1e-3}))
    )
    own, suite = point.apply(base), _point("d64").apply(base)
    (rope, r_cfg), (alibi, a_cfg) = plan_runs(own, ["rope", "alibi"], [0])
    assert rope == "rope-tiny-d64-own-s0" and r_cfg.train.lr == 1e-3 and a_cfg.train.lr == base.train.lr
    assert base.train.lr_by_scheme["alibi"] != base.train.lr  # so the replaced table shows
    (_, s_cfg), _ = plan_runs(suite, ["rope", "alibi"], [0])
    assert s_cfg.train.lr == base.train.lr_by_scheme["rope"] and s_cfg.hash() != r_cfg.hash()


def test_points_select_part_of_the_scale_suite_and_a_wrong_name_is_one_line():
    sp = suite_plan("scale", ConfigFlags(pe=["rope"]), "0", None, EvalFlags(), only="d64,ctx64,tiny")
    assert [n for n, _ in sp.runs] == ["rope-tiny-d64-s0", "rope-tiny-ctx64-s0", "rope-tiny-s0"]
    with pytest.raises(UsageError, match="no point 'd65' in suite scale; valid: tiny, steps1000, steps2000"):
        suite_plan("scale", ConfigFlags(pe=["rope"]), "0", None, EvalFlags(), only="d65")
    with pytest.raises(UsageError, match="suite patterns has no scale points"):
        suite_plan("patterns", ConfigFlags(pe=["rope"]), "0", None, EvalFlags(), only="d64")


def test_the_width_256_overlay_is_the_suite_point_at_its_own_grid_rates():
    """results/scale/d256-tuned.yaml trains the d256 point as the suite does but for the rates, which are the best
    column of that point's grid in results/scale/tune.md (a changed point, or a regridded rate, fails here)."""
    root = Path(__file__).resolve().parents[2]
    tuned = load_config("tiny", (root / "results/scale/d256-tuned.yaml",))
    point = next(c for n, c in _plan("scale").runs if n == "rope-tiny-d256-s0")
    assert tuned.name == "tiny-d256-tuned"
    assert replace(tuned.model, pe="rope", pe_source=point.model.pe_source) == point.model
    assert replace(tuned.train, lr_by_scheme={}, lr=point.train.lr) == replace(point.train, lr_by_scheme={})
    header, rows = markdown_tables((root / "results/scale/tune.md").read_text())[3]  # the claims' table 3: d256
    best = {row[0]: float(row[header.index("best")]) for row in rows}
    assert set(best) == {"none", "sinusoidal", "learned", "shaw", "t5", "rope", "alibi"}
    assert {s: tuned.train.lr_by_scheme[s] for s in best} == best
