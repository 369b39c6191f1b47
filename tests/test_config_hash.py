"""The config hash keeps its meaning: every committed record's ``config_hash`` is reproduced by planning its run
again (config, scheme, seed, steps, a fine-tune's settings from its name), and a key added later leaves the hashes of
configs without it unchanged (``config.HASH_OMITTED``)."""

import functools
import gzip
import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from pebench.config import HASH_OMITTED, load_config
from pebench.jobs.plan import Continuation, _finetune_plan, plan_runs

REPO = Path(__file__).resolve().parent.parent
# the committed overlays a record's config name can end with, the longest name first (d256-tuned before tuned)
NOT_OVERLAYS = ("claims.yaml", "engine-changes.yaml")  # a set's claims and its engines' shown differences
OVERLAYS = sorted((p for p in REPO.glob("results/**/*.yaml") if p.name not in NOT_OVERLAYS), key=lambda p: -len(p.stem))


def _committed_runs() -> dict:
    """(config name, scheme, seed, steps, run, train precision, corpus) -> the recorded hash, over every committed
    record."""
    out = {}
    for path in sorted(REPO.glob("results/**/records.jsonl.gz")):
        with gzip.open(path, "rt") as f:
            for line in f:
                r = json.loads(line)
                p = r["provenance"]
                if "config_hash" not in p:  # an outside model's record: trained elsewhere, no pebench config
                    continue
                run = (p["config_name"], r["scheme"], p["seed"], p["steps"], r["run"], p.get("train_precision"))
                key = (*run, p.get("corpus", "sotu"))
                assert out.setdefault(key, p["config_hash"]) == p["config_hash"], (path, key)
    return out


@functools.cache  # one read of its YAML files per config name, not one per committed run
def _base(name: str):
    """A recorded config name as planned: a built-in config, ``NAME-sinks`` (``--sinks``), ``NAME-canon`` (``--canon
    ABCD``), ``NAME-selective`` (``--selective``), ``NAME-siTAU`` (``--scale-invariant TAU``), ``NAME-entmax`` or
    ``NAME-asentmax`` (``--normaliser``), ``NAME-POINT`` (a scale suite's point) or ``NAME-STEM`` (``--overlay`` of a
    committed ``results/**/STEM.yaml``, such as ``results/scale/d256-tuned.yaml``)."""
    from pebench.jobs.suites import SCALE_POINTS

    for overlay in OVERLAYS:
        if name.endswith(f"-{overlay.stem}"):
            return load_config(name[: -len(overlay.stem) - 1], (overlay,))
    if name.endswith("-sinks"):
        base = _base(name[: -len("-sinks")])
        return replace(base, model=replace(base.model, attention_sinks=True), name=name)
    if name.endswith("-canon"):  # --canon ABCD
        base = _base(name[: -len("-canon")])
        return replace(base, model=replace(base.model, canon="ABCD"), name=name)
    if name.endswith("-selective"):  # --selective
        base = _base(name[: -len("-selective")])
        return replace(base, model=replace(base.model, selective=True), name=name)
    if m := re.fullmatch(r"(.+)-si([0-9.]+)", name):  # --scale-invariant TAU
        base = _base(m.group(1))
        return replace(base, model=replace(base.model, scale_invariant_tau=float(m.group(2))), name=name)
    for normaliser in ("entmax", "asentmax"):  # --normaliser
        if name.endswith(f"-{normaliser}"):
            base = _base(name[: -len(normaliser) - 1])
            return replace(base, model=replace(base.model, normaliser=normaliser), name=name)
    for point in SCALE_POINTS:
        if point.name and name.endswith(f"-{point.name}"):
            return point.apply(load_config(name[: -len(point.name) - 1]))
    return load_config(name)


def _planned(name: str, scheme: str, seed: int, steps: int, run: str, precision: str, corpus: str = "sotu"):
    base = _base(name)
    base = replace(base, train=replace(base.train, precision=precision, data=corpus))
    if "-ft-" in run:  # a fine-tune: RUN-ft-SCALING-CONTEXT from its parent at the config's own steps
        _, scaling, ctx = run.rsplit("-", 2)
        ((_, parent),) = plan_runs(base, [scheme], [seed])
        return _finetune_plan(parent, Continuation(run.split("-ft-")[0], scheme, steps, ctx, scaling)).cfg
    ((_, cfg),) = plan_runs(replace(base, train=replace(base.train, steps=steps)), [scheme], [seed])
    return cfg


def _former_irope(cfg):
    """An irope run as planned before its RoPE layers took Llama 4's base (500,000): base 10,000, which the records of
    results/patterns were trained with."""
    layers = [{k: v for k, v in x.items() if k != "options"} for x in cfg.model.layers]  # RoPE's own base
    return replace(cfg, model=replace(cfg.model, layers=layers))


def test_every_committed_records_config_hash_is_reproduced(monkeypatch):
    # planning builds each run's model to check its scheme's options; the hash does not depend on the model, and
    # over a thousand committed runs those builds were most of this test's time
    monkeypatch.setattr("pebench.model.checkpoint.build_model", lambda cfg: None)
    runs = _committed_runs()
    assert len(runs) >= 50
    missed = []
    for (name, scheme, seed, steps, run, trained_in, corpus), want in runs.items():
        # a run trained at the config's precision (auto) or forced to the one it records (--precision)
        planned = [_planned(name, scheme, seed, steps, run, p, corpus) for p in {"auto", trained_in or "auto"}]
        got = {cfg.hash() for cfg in planned} | {_former_irope(cfg).hash() for cfg in planned if scheme == "irope"}
        if want not in got:
            missed.append(f"{run} ({name}, seed {seed}): {want} not in {sorted(got)}")
    assert not missed, missed


@pytest.mark.parametrize("key", sorted(HASH_OMITTED))
def test_a_key_added_later_is_left_out_at_its_default_and_counts_when_set(key):
    cfg = load_config("tiny")
    section, name = key.split(".")
    value = getattr(getattr(cfg, section), name)
    changed = {
        "train.needles": 0.5,
        "train.needle_lengths": [8, 8],
        "train.needle_kinds": {"copy": 1},
        "train.precision": "fp32",
        "train.induction_steps": 10,
        "train.induction_lengths": [2, 2],
        "train.induction_kinds": {"repeat": 1},
        "model.attention_sinks": True,
        "model.ssmax": True,
        "model.output_gate": "elementwise",
        "model.canon": "ABCD",
        "model.normaliser": "asentmax",
        "model.entmax_alpha": 2.0,
        "model.asentmax_bias": True,
        "model.selective": True,
        "model.scale_invariant_tau": 10.0,
        "train.random_positions_float": True,
        "model.layers": [{"pe": "rope", "window": 8}, {"pe": "none"}],
    }[key]
    assert value != changed
    on = {
        "train.needle_lengths": {"needles": 0.5},
        "train.needle_kinds": {"needles": 0.5},
        "train.induction_lengths": {"induction_steps": 10},
        "train.induction_kinds": {"induction_steps": 10},
        "model.entmax_alpha": {"normaliser": "entmax"},
        "model.asentmax_bias": {"normaliser": "asentmax"},
    }
    gate = on.get(key, {})
    base = replace(cfg, **{section: replace(getattr(cfg, section), **gate)})
    part = getattr(base, section)
    assert replace(base, **{section: replace(part, **{name: changed})}).hash() != base.hash()  # set: it counts
    if not gate:  # at its default (and with its gate off) the key is not in the hash at all
        d = cfg.to_dict()
        assert HASH_OMITTED[key](d)
