"""Claims that cannot fail are refused (findings/audit.py), each by id and reason; evidence is per draw (a seed in
a training precision), a proportion's single-draw interval is at least Wilson's, and a claim can be decided on one
precision's draws alone."""

import json

import pytest
import yaml
from test_claims_docs import record

from pebench.findings import claims as cl
from pebench.results import ResultsDir


def _write(root, claims):
    (root / cl.CLAIMS_FILE).write_text(yaml.safe_dump({"claims": claims}))


def _verdicts(root) -> dict:
    return {v.id: v for v in cl.check_set(root)}


@pytest.fixture
def schemes(tmp_path):
    """RoPE breaks (4 at 1x, 9 +- 1 at 16x), ALiBi stays flat; seeds 0-2 in fp32 and 0-2 in bf16 (bf16's RoPE at
    16x is no worse than its 1x: the precision changes that verdict)."""
    rd = ResultsDir(tmp_path / "set")
    for precision, rope_16x in (("fp32", [8.0, 9.0, 10.0]), ("bf16", [4.0, 4.1, 3.9])):
        for seed in range(3):
            for label, L, v in (
                ("rope", 128, 4.0 + seed / 10),
                ("rope", 2048, rope_16x[seed]),
                ("alibi", 128, 4.2 + seed / 10),
                ("alibi", 2048, 4.2 + seed / 10),
                ("rope+ntk", 2048, 6.0 + seed),
                ("rope+dynamic-ntk", 2048, 6.0 + seed),
            ):
                r = record(label, seed, L, v)
                r["run"] = f"{label.split('+')[0]}-s{seed}-{precision}"
                r["provenance"] = {**r["provenance"], "train_precision": precision}
                if label == "rope+dynamic-ntk":
                    r["provenance"]["measured_as"] = "rope+ntk"
                rd.write_record(r)
    return rd.root


def claim(id_, text, rel, rule, a, b=None, **kw):
    return {"id": id_, "text": text, "relation": rel, "rule": rule, "a": a, **({"b": b} if b else {}), **kw}


def test_a_sound_claim_holds_and_each_kind_of_claim_that_cannot_fail_is_refused_by_id(schemes):
    a16, a1 = {"label": "alibi", "length": "16x"}, {"length": "1x"}
    _write(
        schemes,
        [
            claim("alibi-flat", "ALiBi stays flat from 1x to 16x.", "flat", "ratio", a16, a1, within=1.05),
            claim(
                "same-cell", "ALiBi at 16x equals ALiBi at 16x.", "flat", "ratio", a16, {"label": "alibi"}, within=1.05
            ),
            claim(
                "copied",
                "dynamic NTK equals NTK at 16x.",
                "flat",
                "ratio",
                {"label": "rope+dynamic-ntk", "length": "16x"},
                {"label": "rope+ntk"},
                within=1.001,
            ),
            claim("again", "ALiBi stays flat from 1x to 16x (again).", "flat", "ratio", a16, a1, within=1.05),
            claim("names-more", "ALiBi and T5 stay flat from 1x to 16x.", "flat", "ratio", a16, a1, within=1.05),
            claim("names-less", "It stays flat from 1x to 16x.", "flat", "ratio", a16, a1, within=1.05),
            claim(
                "counts-anything",
                "RoPE at 16x is above 5 in 0, 1, 2 or 3 of 3 seeds.",
                "above",
                "seeds",
                {"label": "rope", "length": "16x", "precision": "fp32"},
                value=5,
                of=3,
                count=[0, 1, 2, 3],
            ),
        ],
    )
    v = _verdicts(schemes)
    assert v["alibi-flat"].held, v["alibi-flat"].why
    refused = {k: x.why.splitlines()[0] for k, x in v.items() if k != "alibi-flat"}
    assert all(not v[k].held and why.startswith("REFUSED") for k, why in refused.items()), refused
    assert "same measurement" in refused["same-cell"] and "same measurement" in refused["copied"]
    assert "duplicates claim alibi-flat" in refused["again"]
    assert "names 'T5'" in refused["names-more"] and "does not name 'alibi'" in refused["names-less"]
    assert "every seed and none" in refused["counts-anything"]


def test_a_count_of_seeds_against_a_distant_threshold_can_fail_and_is_decided(schemes):
    """ALiBi at 1x is 4.2-4.4: "above 100 on 0 of 3 seeds" is far from its threshold, yet data above 100 would make
    it fail, so it is decided, not refused (the audit's moved data crosses the threshold however far it lies);
    "above 100 on 3 of 3" fails on the data."""
    a1 = {"label": "alibi", "length": "1x", "precision": "fp32"}
    _write(
        schemes,
        [
            claim(
                "none-above",
                "ALiBi at 1x is above 100 on 0 of 3 seeds.",
                "above",
                "seeds",
                a1,
                value=100,
                of=3,
                count=0,
            ),
            claim(
                "all-above", "ALiBi at 1x is above 100 on 3 of 3 seeds.", "above", "seeds", a1, value=100, of=3, count=3
            ),
            claim(
                "none-below",
                "ALiBi at 1x is below 0.01 on 0 of 3 seeds.",
                "below",
                "seeds",
                a1,
                value=0.01,
                of=3,
                count=0,
            ),
        ],
    )
    v = _verdicts(schemes)
    assert v["none-above"].held and v["none-below"].held, (v["none-above"].why, v["none-below"].why)
    assert not v["all-above"].held and not v["all-above"].why.startswith("REFUSED"), v["all-above"].why


def test_the_check_command_fails_by_id_and_reason(schemes):
    from support import invoke

    _write(
        schemes,
        [
            claim(
                "same-cell",
                "ALiBi at 16x equals ALiBi at 16x.",
                "flat",
                "ratio",
                {"label": "alibi", "length": "16x"},
                {"label": "alibi"},
                within=1.05,
            )
        ],
    )
    r = invoke("check", schemes)
    assert r.exit_code == 1, r.output
    assert "[REFUSED] same-cell" in r.output and "REFUSED: its sides are the same" in r.output


def test_draws_pool_both_precisions_and_a_claim_on_one_precision_fails_where_it_fails(schemes):
    text = "RoPE at 16x is worse than at 1x (paired by seed)."
    base = {"label": "rope", "length": "16x"}
    _write(
        schemes,
        [
            claim("pooled", text, "higher", "paired", base, {"length": "1x"}),
            claim("fp32", text, "higher", "paired", {**base, "precision": "fp32"}, {"length": "1x"}),
            claim("bf16", text, "higher", "paired", {**base, "precision": "bf16"}, {"length": "1x"}),
        ],
    )
    v = _verdicts(schemes)
    assert "over seeds [0/bf16, 0, 1/bf16, 1, 2/bf16, 2]" in v["pooled"].why  # six draws, paired draw by draw
    assert v["fp32"].held and not v["bf16"].held


def test_a_rerun_of_one_draw_is_averaged_not_counted_twice(tmp_path):
    rd = ResultsDir(tmp_path / "s")
    for run, v in (("rope-a", 4.0), ("rope-b", 5.0)):  # the same seed and precision, trained twice
        rd.write_record({**record("rope", 0, 128, v), "run": run})
    _write(
        rd.root,
        [
            claim(
                "c",
                "RoPE at 1x is below 6 (one seed).",
                "below",
                "one-seed",
                {"label": "rope", "length": "1x"},
                value=6,
            )
        ],
    )
    (v,) = cl.check_set(rd.root)
    assert v.cells[0].values == {(0, "fp32"): 4.5} and v.cells[0].n == 1


def _copy_record(seed, acc, lo, hi, trials=10):
    r = record("rope", seed, 128, 1.0)
    r.update(
        task="copy",
        metrics={"copy_acc": acc, "copy_range": 0, "copy_loss": 1.0},
        intervals={"copy_acc": [lo, hi]},
        protocol="L24-t20",
        details={"cells": [{"distance": d, "trials": trials} for d in (16, 32, 64)], "trials": trials},
    )
    return r


def test_a_proportion_never_gets_a_zero_width_interval_and_an_overlap_over_all_of_0_1_is_refused(tmp_path):
    rd = ResultsDir(tmp_path / "s")
    rd.write_record(_copy_record(0, 1.0, 1.0, 1.0))  # 30 of 30 right, recorded as [1, 1]
    for seed, acc in ((1, 0.0), (2, 1.0), (3, 0.05)):
        rd.write_record(
            {**_copy_record(seed, acc, acc, acc), "run": f"alibi-s{seed}", "label": "alibi", "scheme": "alibi"}
        )
    spec = {"label": "rope", "length": "1x", "metric": "copy_acc", "protocol": "L24-t20"}
    _write(
        rd.root,
        [
            claim(
                "rope-copies",
                "RoPE copies at 1x (above 0.9 by its prompts' interval; one seed).",
                "above",
                "intervals",
                spec,
                value=0.9,
            ),
            claim(
                "overlap",
                "ALiBi's copy accuracy at 1x overlaps RoPE's.",
                "overlap",
                "intervals",
                {**spec, "label": "alibi", "seeds": [1, 2, 3]},
                {"label": "rope", "seeds": [0]},
            ),
        ],
    )
    v = _verdicts(rd.root)
    lo, hi = v["rope-copies"].cells[0].lo, v["rope-copies"].cells[0].hi
    assert lo == pytest.approx(0.8865, abs=1e-3) and hi == 1.0  # Wilson's on 30 prompts, not [1, 1]
    assert not v["rope-copies"].held  # 0.886 is not above 0.9: the zero-width interval said it was
    assert not v["overlap"].held and "whole range [0, 1]" in v["overlap"].why


def test_an_mfu_above_100_percent_is_refused(tmp_path):
    (tmp_path / "profile.json").write_text(json.dumps({"train": {"mfu": 1.11}}))
    _write(
        tmp_path,
        [
            claim(
                "mfu",
                "The step runs above half the peak.",
                "above",
                "point",
                {"file": "profile.json", "key": "train.mfu"},
                value=0.5,
            )
        ],
    )
    (v,) = cl.check_set(tmp_path)
    assert not v.held and "MFU above 100%" in v.why


def test_a_headline_claim_needs_five_seeds_in_each_precision(schemes):
    a16, a1 = {"label": "alibi", "length": "16x"}, {"length": "1x"}
    _write(
        schemes,
        [
            {
                **claim("alibi-flat", "ALiBi stays flat from 1x to 16x.", "flat", "ratio", a16, a1, within=1.05),
                "tags": ["headline"],
            }
        ],
    )
    (v,) = cl.check_set(schemes)
    assert not v.held and "headline claim on {'bf16': 3, 'fp32': 3} seeds" in v.why.splitlines()[0]


def test_a_cell_of_one_scale_point_reads_its_runs_and_their_own_context(tmp_path):
    """Two points of a scale suite share labels: ``config`` picks one point's runs, and its 16x is of that point's
    training context (64 -> 1,024 tokens), so a trend claim compares the same scheme at two points."""
    rd = ResultsDir(tmp_path / "scale")
    for config, ctx, at16 in (("tiny", 128, [9.0, 10.0, 11.0]), ("tiny-ctx64", 64, [5.0, 5.5, 6.0])):
        for seed in range(3):
            for L, v in ((ctx, 4.0), (16 * ctx, at16[seed])):
                r = record("rope", seed, L, v, ctx=ctx)
                r["run"] = f"rope-{config}-s{seed}"
                r["provenance"] = {**r["provenance"], "config_name": config}
                rd.write_record(r)
    text = "RoPE trained at context 64 is lower at 16x than RoPE trained at 128 (paired by seed)."
    a = {"label": "rope", "length": "16x", "config": "tiny-ctx64"}
    _write(rd.root, [claim("ctx", text, "lower", "paired", a, {"config": "tiny"})])
    (v,) = cl.check_set(rd.root)
    assert v.held, v.why
    assert v.cells[0].values == {(s, "fp32"): x for s, x in enumerate([5.0, 5.5, 6.0])}
    assert "tiny-ctx64" in v.cells[0].name and v.cells[1].mean == 10.0
    _write(rd.root, [claim("ctx", text, "higher", "paired", a, {"config": "tiny"})])
    assert not cl.check_set(rd.root)[0].held


def test_overlap_with_a_value_holds_only_where_the_interval_covers_it_and_needs_the_intervals_rule(schemes):
    """RoPE at 16x in fp32 is 9 +- 1 over three seeds (interval about [6.5, 11.5]): it covers 9, not 4."""
    cell = {"label": "rope", "length": "16x", "precision": "fp32"}
    text = "RoPE at 16x is not told from {v} (the interval over its seeds covers it)."
    _write(
        schemes,
        [
            claim("covers-9", text.format(v=9), "overlap", "intervals", cell, value=9),
            claim("covers-4", text.format(v=4), "overlap", "intervals", cell, value=4),
        ],
    )
    v = _verdicts(schemes)
    assert v["covers-9"].held and "covers 9?" in v["covers-9"].why
    assert not v["covers-4"].held
    _write(schemes, [claim("one-seed-cover", "one seed " + text.format(v=9), "overlap", "one-seed", cell, value=9)])
    with pytest.raises(cl.UsageError, match="overlap with a value .* needs rule intervals"):
        cl.check_set(schemes)
