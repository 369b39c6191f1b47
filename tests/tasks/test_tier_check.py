"""The difficulty-tier check on a trained checkpoint: every task with two tiers (metrics ``NAME_t1`` and ``NAME_t2``,
found in the registry, so a new tiered task is checked without an edit here), evaluated by ``pebench eval`` at 1x on
a model trained for retrieval and for the tiered tasks (tests/fixtures/tiers: the context suite's recipe at width 64
with count, common and list documents, seed 61; scripts/tier_fixture.py says how it was made), must not score its
harder tier above its easier one beyond the prompts' noise: the one-sided sign test over the shared draws
(``details.tier_p``) stays at or above ``TIER_LEVEL``. The check's power on this model: the same task with its
tiers swapped (a planted generator whose "harder" tier is the easier one) fails it wherever the model tells the
tiers apart. The sign test itself against the binomial distribution in closed form."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from pebench.eval.tasks import TASKS
from pebench.eval.tasks.base import TIER_LEVEL, tier_details
from pebench.util.stats import sign_test
from support import invoke

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "tiers"
RUN = "rope-context-tier_fixture-s61"
TRIALS = {"pairs": 40}  # pairs: per depth (three depths); the others per tier
TRIALS_DEFAULT = 120


def tiered() -> list[str]:
    names = []
    for task in map(TASKS.get, TASKS):
        own = {m.name for m in task.metrics}
        if {f"{task.name}_t1", f"{task.name}_t2"} <= own:
            names.append(task.name)
    return sorted(names)


@pytest.fixture(scope="module")
def records(tmp_path_factory) -> dict:
    """The tiered tasks' records at 1x on the fixture's model (one ``pebench eval`` for all of them)."""
    root = tmp_path_factory.mktemp("tiers")
    shutil.copytree(FIXTURE / RUN, root / "runs" / RUN)
    tasks = tiered()
    opts = [f"{t}.trials={TRIALS.get(t, TRIALS_DEFAULT)}" for t in tasks]
    args = ["eval", "--run", RUN, "--task", ",".join(tasks), "--lengths", "1x", "--rope-scaling", "none"]
    args += ["--results", str(root)]
    r = invoke(*args, *sum((["--task-opt", o] for o in opts), []))
    assert r.exit_code == 0, r.output
    out = {}
    for f in (root / "records").rglob("*.json"):
        rec = json.loads(f.read_text())
        if rec.get("task") in tasks:
            out[rec["task"]] = rec
    assert sorted(out) == tasks, f"records of {sorted(out)}, tasks {tasks}"
    return out


def test_the_registry_has_the_tiered_tasks():
    assert {"pairs", "count", "list", "common", "decoy"} <= set(tiered())


@pytest.mark.parametrize("name", tiered())
def test_no_harder_tier_scores_above_the_easier_one_on_a_trained_model(records, name):
    rec = records[name]
    d, m = rec["details"], rec["metrics"]
    assert rec["status"] == "ok" and d["tier_pairs"] <= d["trials"] * (3 if name == "pairs" else 1)
    assert d["tier_p"] >= TIER_LEVEL, (
        f"{name}: tier 2 ({m[f'{name}_t2']:.3f}) above tier 1 ({m[f'{name}_t1']:.3f}) over the same draws, "
        f"sign test p = {d['tier_p']:.2g} on {d['tier_pairs']} pairs that differ: a generator defect"
    )


def test_the_model_reads_tier_one_above_chance_somewhere(records):
    """The check has something to read: on at least one task the model's easier tier is above chance beyond its
    interval (a model at chance everywhere would pass any generator)."""
    above = []
    for name, rec in records.items():
        metric = next(m for m in TASKS.get(name).metrics if m.name == f"{name}_t1")
        lo = rec["intervals"][f"{name}_t1"][0]
        if lo > metric.chance:
            above.append(name)
    assert above, {n: r["metrics"] for n, r in records.items()}


@pytest.mark.parametrize("name", ["pairs", "common"])  # the tasks whose tiers this model tells apart
def test_a_planted_swap_of_the_tiers_fails_the_check(records, tmp_path, monkeypatch, name):
    """A generator whose tiers are swapped (tier 1 built as tier 2 and the other way round) is a defect by the same
    check, on the same model and draws: the check has power where the model tells the tiers apart."""
    import sys

    import torch

    from pebench.model.checkpoint import load_run_model
    from pebench.results import ResultsDir
    from support import task_ctx

    task = TASKS.get(name)
    d = records[name]["details"]
    assert records[name]["metrics"][f"{name}_t1"] > records[name]["metrics"][f"{name}_t2"] and d["tier_pairs"] > 0
    shutil.copytree(FIXTURE / RUN, tmp_path / "runs" / RUN)
    _, _, model = load_run_model(ResultsDir(tmp_path), RUN, torch.device("cpu"))
    module = sys.modules[type(task).__module__]
    honest = module.prompt
    monkeypatch.setattr(module, "prompt", lambda length, tier, *a, **k: honest(length, 3 - tier, *a, **k))
    opts = {**task.options, "trials": TRIALS.get(name, TRIALS_DEFAULT)}
    planted = task.measure(task_ctx(model, **opts), 128)
    # the easier prompts now in tier 2: their score as eval measured it (its batches may turn a near tie or two)
    assert planted["metrics"][f"{name}_t2"] == pytest.approx(records[name]["metrics"][f"{name}_t1"], abs=0.05)
    assert planted["details"]["tier_p"] < TIER_LEVEL, planted["details"]


def test_tier_details_flag_a_swapped_pair_of_tiers():
    easier = [1.0] * 14 + [0.0] * 6
    harder = [0.0] * 12 + [1.0] * 2 + [0.0] * 6  # 12 draws fall, none rises
    assert tier_details(easier, harder)["tier_p"] == 1.0
    swapped = tier_details(harder, easier)
    assert swapped["tier_order"] == "defect" and swapped["tier_pairs"] == 12
    assert swapped["tier_p"] == pytest.approx(0.5**12) and swapped["tier_p"] < TIER_LEVEL


@pytest.mark.parametrize("pos,neg,zeros", [(5, 0, 3), (7, 3, 0), (3, 7, 2), (0, 0, 4), (10, 10, 1)])
def test_sign_test_is_the_binomial_tail(pos, neg, zeros):
    n = pos + neg
    p, used = sign_test([0.5] * pos + [-1.0] * neg + [0.0] * zeros)
    want = sum(math.comb(n, k) for k in range(pos, n + 1)) / 2**n if n else 1.0
    assert used == n and p == pytest.approx(want, rel=1e-12)


def test_tiers_of_unequal_draws_are_refused():
    with pytest.raises(ValueError, match="paired by draw"):
        tier_details([1.0, 0.0], [1.0])
