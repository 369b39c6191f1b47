"""Predictions and observations (findings/claims/, registration.py, power.py): a prediction is decided only on
records measured at a commit that descends from the one that registered it, is refused when edited since or when
decided on older records, is pending until its fresh draws are in, and is confirmed or failed by its test against
the smallest effect that matters with Benjamini-Hochberg adjusted p-values; a claim reading an untrained run
beyond its context is refused; `pebench check` prints the scoreboard and exits non-zero only on refusals and
contradicted observations. Each on a scratch git repository."""

import json
import math
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy import stats
from test_claims_docs import record

from pebench.findings import claims as cl
from pebench.findings.claims import power_of
from pebench.results import ResultsDir, now
from pebench.util import stats as st
from support import invoke


def git(repo, *args) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path):
    """A git repository with a first commit (before any prediction) and an empty result set."""
    git(tmp_path, "init", "-q")
    git(tmp_path, "config", "user.email", "t@t")
    git(tmp_path, "config", "user.name", "t")
    (tmp_path / "README").write_text("x\n")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "first")
    (tmp_path / "set").mkdir()
    return tmp_path


def commit(repo, msg="c") -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", msg, "--allow-empty")
    return git(repo, "rev-parse", "HEAD")


# RoPE 1x near 4, 16x near 9 (+- a seed's wobble); ALiBi flat near 4.2; NoPE 1x 7.5; 'stall' 1x 12 (above NoPE)
def write_records(repo, at_commit: str, seeds=range(5, 10)):
    rd = ResultsDir(repo / "set")
    for seed in seeds:
        w = (seed - 7) / 50
        for label, L, v in (
            ("rope", 128, 4.0 + w),
            ("rope", 2048, 9.0 * (1 + w)),
            ("alibi", 128, 4.2 + w),
            ("alibi", 2048, 4.25 + w),
            ("none", 128, 7.5 + w),
            ("none", 2048, 8.0 + w),
            ("stall", 128, 12.0 + w),
            ("stall", 2048, 12.1 + w),
        ):
            r = record(label, seed, L, v)
            r["provenance"] = {**r["provenance"], "git_commit": at_commit}
            r["created"] = now()  # written now, after every commit made so far
            rd.write_record(r)


def prediction(id_, text, a, b, rel, rule, **kw):
    return {"id": id_, "kind": "prediction", "text": text, "a": a, "b": b, "relation": rel, "rule": rule, **kw}


FRESH = [5, 6, 7, 8, 9]
DEGRADES = prediction(
    "rope-degrades",
    "RoPE at 16x is at least 50% above its 1x (paired by draw).",
    {"label": "rope", "length": "16x", "seeds": FRESH},
    {"length": "1x"},
    "higher",
    "paired",
    effect="50%",
    draws=5,
)
FLAT = prediction(
    "alibi-flat",
    "ALiBi at 16x is within 5% of its 1x (equivalence).",
    {"label": "alibi", "length": "16x", "seeds": FRESH},
    {"length": "1x"},
    "flat",
    "equivalence",
    within=1.05,
    draws=5,
)
TOO_BIG = {
    **DEGRADES,
    "id": "rope-triples",
    "text": "RoPE at 16x is at least 200% above its 1x (paired by draw).",
    "effect": "200%",
}


def write_claims(repo, claims):
    (repo / "set" / cl.CLAIMS_FILE).write_text(yaml.safe_dump({"defaults": {"split": "validation"}, "claims": claims}))


def by_id(repo) -> dict:
    return {v.id: v for v in cl.check_set(repo / "set")}


def test_a_prediction_registered_before_its_records_is_confirmed_or_failed_by_its_test(repo):
    write_claims(repo, [DEGRADES, FLAT, TOO_BIG])
    reg = commit(repo, "register")
    v = by_id(repo)
    assert all(x.state == "pending" and "0 of 5 fresh draws" in x.why for x in v.values())
    write_records(repo, commit(repo, "after"))
    v = by_id(repo)
    assert v["rope-degrades"].state == "confirmed" and v["alibi-flat"].state == "confirmed"
    assert v["rope-triples"].state == "failed"  # ratio 2.25 is above 1.5 but not above 3: the effect is too small
    assert v["rope-degrades"].claim["_registration"].commit == reg
    # the p-value by hand: one-sided t test of the per-draw log ratio against log(1.5); then BH over the three
    ratios = [math.log(9.0 * (1 + (s - 7) / 50) / (4.0 + (s - 7) / 50)) for s in FRESH]
    p = stats.ttest_1samp(ratios, math.log(1.5), alternative="greater").pvalue
    assert v["rope-degrades"].p == pytest.approx(p)
    ps = [v[k].p for k in ("rope-degrades", "alibi-flat", "rope-triples")]
    assert [v[k].p_adj for k in ("rope-degrades", "alibi-flat", "rope-triples")] == pytest.approx(
        list(stats.false_discovery_control(ps))
    )
    res = invoke("check", repo / "set")
    assert res.exit_code == 0, res.output  # a failed prediction is a finding, not an error
    assert "predictions: 3 registered, 2 confirmed, 1 failed, 0 pending" in res.output
    assert "[confirmed] rope-degrades" in res.output and "[FAILED] rope-triples" in res.output
    assert f"registered {reg[:7]}" in res.output


def test_a_prediction_decided_on_records_older_than_its_registration_is_refused(repo):
    before = git(repo, "rev-parse", "HEAD")
    write_claims(repo, [DEGRADES])
    commit(repo, "register")
    write_records(repo, before)  # measured at the first commit, before the prediction existed
    (v,) = cl.check_set(repo / "set")
    assert v.state == "refused" and f"was measured at {before[:7]}, not after its registration" in v.why
    unknown = repo / "other"
    write_records(repo, "f" * 40)  # a commit git does not know cannot prove the order either
    (v,) = cl.check_set(repo / "set")
    assert v.state == "refused"
    res = invoke("check", repo / "set")
    assert res.exit_code == 1 and "[REFUSED] rope-degrades" in res.output and not unknown.exists()


def with_training(repo, trained_at: str, clean=True) -> None:
    """Every record of the set says its model trained at ``trained_at`` (from a clean tree or not)."""
    rd = ResultsDir(repo / "set")
    for path in sorted(rd.records.rglob("*.json")):
        r = json.loads(path.read_text())
        r["provenance"] = {**r["provenance"], "train_commit": trained_at, "train_tree_clean": clean}
        path.write_text(json.dumps(r))


def test_a_prediction_decided_on_models_trained_before_it_or_from_a_changed_tree_is_refused(repo):
    before = git(repo, "rev-parse", "HEAD")
    write_claims(repo, [DEGRADES])
    commit(repo, "register")
    after = commit(repo, "after")
    write_records(repo, after)  # evaluated after the registration ...
    with_training(repo, before)  # ... of models trained before it
    (v,) = cl.check_set(repo / "set")
    assert v.state == "refused" and f"was trained at {before[:7]}, not after its registration" in v.why
    with_training(repo, after, clean=False)  # trained after it, but from a tree that was not the commit's
    (v,) = cl.check_set(repo / "set")
    assert v.state == "refused" and f"was trained from a changed tree at {after[:7]}" in v.why
    with_training(repo, after)
    assert cl.check_set(repo / "set")[0].state == "confirmed"
    with_training(repo, "not recorded", clean="not recorded")  # an old record: its eval commit alone decides
    assert cl.check_set(repo / "set")[0].state == "confirmed"


def test_a_prediction_edited_after_its_registration_is_refused_and_a_new_one_is_pending(repo):
    write_claims(repo, [DEGRADES])
    commit(repo, "register")
    write_records(repo, commit(repo, "after"))
    edited = {**DEGRADES, "effect": "20%"}  # lowered after seeing the data
    later = {**TOO_BIG, "id": "rope-triples-new"}  # a new prediction, not committed
    write_claims(repo, [edited, later])
    v = by_id(repo)
    assert v["rope-degrades"].state == "refused" and "changed since its registration: effect" in v["rope-degrades"].why
    # records exist for the new one, but it is not committed: it cannot predate them
    assert v["rope-triples-new"].state == "refused" and "not committed" in v["rope-triples-new"].why
    res = invoke("check", repo / "set")
    assert res.exit_code == 1 and "changed since its registration" in res.output
    commit(repo, "edit")  # committing the edit does not help: its first registration still differs
    assert by_id(repo)["rope-degrades"].state == "refused"


def test_an_uncommitted_prediction_without_records_is_pending_and_says_to_commit_it(repo):
    write_claims(repo, [{**DEGRADES, "a": {**DEGRADES["a"], "seeds": [20, 21, 22, 23, 24]}}])
    (v,) = cl.check_set(repo / "set")
    assert v.state == "pending" and "not registered yet: commit it before its runs start" in v.why


def test_a_prediction_waits_for_all_its_draws(repo):
    write_claims(repo, [DEGRADES])
    commit(repo, "register")
    write_records(repo, commit(repo, "after"), seeds=[5, 6, 7])
    (v,) = cl.check_set(repo / "set")
    assert v.state == "pending" and "3 of 5 fresh draws in" in v.why


def test_a_claim_that_reads_an_untrained_run_beyond_its_context_is_refused(repo):
    """'stall' ends above NoPE at 1x: a flatness claim about it is refused, a 1x claim about its training is not."""
    write_records(repo, git(repo, "rev-parse", "HEAD"))
    flat = {
        "id": "stall-flat",
        "text": "stall stays flat from 1x to 16x.",
        "a": {"label": "stall", "length": "16x"},
        "b": {"length": "1x"},
        "relation": "flat",
        "within": 1.1,
        "rule": "ratio",
    }
    trained = {
        "id": "stall-above-nope",
        "text": "stall is above none at 1x.",
        "a": {"label": "stall", "length": "1x"},
        "b": {"label": "none"},
        "relation": "higher",
        "rule": "paired",
    }
    write_claims(repo, [flat, trained])
    v = by_id(repo)
    assert v["stall-flat"].state == "refused" and "did not train" in v["stall-flat"].why
    assert "1x perplexity 12 above NoPE's 7.5" in v["stall-flat"].why
    assert v["stall-above-nope"].state == "observed" and v["stall-above-nope"].observed == "higher in 5 of 5 draws"
    res = invoke("check", repo / "set")
    assert res.exit_code == 1 and "[REFUSED] stall-flat" in res.output


def test_a_bad_prediction_is_one_clear_line(repo):
    write_records(repo, git(repo, "rev-parse", "HEAD"))
    for bad, msg in (
        ({**DEGRADES, "rule": "intervals"}, "a prediction's rule 'intervals' is not one of"),
        ({**DEGRADES, "draws": None}, "needs draws"),
        ({**DEGRADES, "relation": "flat"}, "rule paired decides relation lower or higher"),
        ({**DEGRADES, "effect": "lots%"}, "effect must be a number or a percentage"),
        ({**DEGRADES, "registered": "2026-12-01"}, "registered by its commit"),
        ({**DEGRADES, "kind": "hunch"}, "kind 'hunch' is not one of"),
    ):
        write_claims(repo, [bad])
        res = invoke("check", repo / "set")
        assert res.exit_code != 0 and msg in res.output and "Traceback" not in res.output, (msg, res.output)


def test_the_power_function_reproduces_the_reference_registration():
    """The reference's predictions record what `pebench power` said from seeds 0-4 (both precisions) at level
    0.005; the function still says it, word for word."""
    reference = Path(__file__).resolve().parents[2] / "results" / "reference"
    claims = {c["id"]: c for c in cl.load_claims(reference / cl.CLAIMS_FILE)}
    for cid in ("pred-yarn-best-scaling-16x", "pred-t5-ahead-1x", "pred-relative-flat"):
        got = power_of(reference, cid, [0, 1, 2, 3, 4], None, 0.005, 5, 10)
        assert got.text() == claims[cid]["power"], cid


def test_the_power_of_a_t_test_matches_a_reference_value_and_asks_for_more_draws_for_smaller_effects():
    # one-sided one-sample t test, d = 1, n = 10, alpha 0.05: power 0.897 (the noncentral t; G*Power's value)
    assert st.power_one_sample(1.0, 1.0, 10, 0.05) == pytest.approx(0.8975, abs=5e-4)
    n_big = st.draws_for_power(lambda n: st.power_one_sample(1.0, 1.0, n, 0.05))[0]
    n_small = st.draws_for_power(lambda n: st.power_one_sample(0.5, 1.0, n, 0.05), cap=100)[0]
    assert n_big == 8 and n_small == 27  # d = 1: 8 draws; d = 0.5: 27 (standard tables)
    n, capped, _ = st.draws_for_power(lambda n: st.power_one_sample(0.1, 1.0, n, 0.05), cap=20)
    assert n == 20 and capped


def test_statistics_come_from_scipy_at_any_degrees_of_freedom():
    assert st.t95(1) == pytest.approx(12.7062, abs=1e-4) and st.t95(10) == pytest.approx(2.2281, abs=1e-4)
    assert st.t95(100) == pytest.approx(1.9840, abs=1e-4)  # not 1.96: the table this replaced stopped at 30
    lo, hi = st.wilson(3, 10)
    assert (lo, hi) == pytest.approx((0.1078, 0.6032), abs=1e-4)
    # BH by hand: sorted 0.01, 0.03, 0.04, 0.2 -> 0.04, 0.06, 0.0533, 0.2, then the running minimum from the top
    assert st.bh_adjust([0.01, 0.04, 0.03, 0.2]) == pytest.approx([0.04, 0.16 / 3, 0.16 / 3, 0.2])
    x, y = [1.0, 1.2, 0.9, 1.1, 1.05], [0.5, 0.6, 0.4, 0.55, 0.5]
    w = st.welch(x, y, 0.1, "higher")
    assert w.p == pytest.approx(stats.ttest_ind(np.array(x) - 0.1, y, equal_var=False, alternative="greater").pvalue)
    eq = st.equivalence([0.01, -0.02, 0.0, 0.015, -0.005], 0.05)
    assert eq.p < 0.01 and st.equivalence([0.04, 0.06, 0.05, 0.045, 0.055], 0.05).p > 0.3
    assert st.kendall_tau([1, 2, 3, 4], [1, 2, 4, 3])[0] == pytest.approx(2 / 3)


def test_a_structural_claim_about_an_untrained_run_is_not_refused(repo):
    """'undefined beyond its table' is a property of the scheme, not of what it learned: a run that did not train
    does not refuse it (it refuses only claims about values beyond the context)."""
    write_records(repo, git(repo, "rev-parse", "HEAD"))
    rd = ResultsDir(repo / "set")
    for seed in FRESH:
        r = record("stall", seed, 4096, 1.0)
        r["status"], r["metrics"] = "undefined", {k: None for k in r["metrics"]}
        rd.write_record(r)
    undefined = {
        "id": "stall-undefined",
        "text": "stall is undefined at 32x.",
        "a": {"label": "stall", "length": "32x"},
        "relation": "undefined",
        "rule": "point",
    }
    write_claims(repo, [undefined])
    (v,) = cl.check_set(repo / "set")
    assert v.state == "observed", v.why


def test_one_model_is_decided_window_by_window(repo):
    """``unit: window``: an outside model is one draw, so its evidence is its full windows (``window_losses``),
    paired window by window across scalings at one length; the p-value is the one-sided paired t test of the
    per-window log ratio (a loss difference) against the effect, by hand; a record without window losses is one
    line."""
    write_claims(
        repo,
        [
            prediction(
                "yarn-beats-rope",
                "At 4x YaRN is at least 10% below plain RoPE (paired by window).",
                {"label": "m+yarn", "length": 512, "unit": "window"},
                {"label": "m"},
                "lower",
                "paired",
                effect="10%",
                draws=4,
            )
        ],
    )
    commit(repo, "register")
    rd = ResultsDir(repo / "set")
    base = [3.0, 3.4, 2.9, 3.2]
    gaps = {"m": [0.0] * 4, "m+yarn": [-0.30, -0.45, -0.20, -0.35]}
    at = commit(repo, "after")
    for label, gap in gaps.items():
        losses = [b + g for b, g in zip(base, gap)]
        r = record(label, 0, 512, math.exp(sum(losses) / 4))
        r["details"] = {"window_losses": losses}
        r["provenance"] = {**r["provenance"], "git_commit": at}
        rd.write_record(r)
    v = by_id(repo)["yarn-beats-rope"]
    p = stats.ttest_1samp(gaps["m+yarn"], -math.log(1.1), alternative="less").pvalue
    assert v.state == "confirmed" and v.p == pytest.approx(p, rel=1e-9)
    assert len(v.cells[0].values) == 4
    r = record("m", 0, 512, 20.0)
    r["provenance"] = {**r["provenance"], "git_commit": at}
    rd.write_record(r)  # the same cell again, now without its window losses
    with pytest.raises(cl.UsageError, match="keeps no window_losses"):
        by_id(repo)


def test_a_prediction_on_a_per_draw_measurement_is_decided_and_its_order_proved(repo):
    """A script's measurement of each trained model (scripts/learned_tables.py) is a value per draw with the commit
    its model was trained at: decided by the prediction's test as records are, pending while draws are missing,
    refused when a draw was trained before the registration, and a draw with a null value (untrained) left out."""
    share = prediction(
        "sinusoid-like-share",
        "At least 25% of the learned table's dimensions are sinusoid-like, 20 points above the 5% of chance.",
        {"file": "tables.json", "key": "fraction", "per_draw": True, "seeds": FRESH},
        None,
        "above",
        "one-sample",
        value=0.05,
        effect=0.2,
        draws=5,
    )
    share.pop("b")
    write_claims(repo, [share])
    before = git(repo, "rev-parse", "HEAD")
    reg = commit(repo, "register")
    values = {5: 0.50, 6: 0.55, 7: 0.60, 8: 0.52, 9: None}

    def write(at, vals):
        draws = {str(s): {"precision": "bf16", "git_commit": at, "fraction": v} for s, v in vals.items()}
        (repo / "set" / "tables.json").write_text(json.dumps({"draws": draws}))

    (v,) = cl.check_set(repo / "set")
    assert v.state == "pending" and "0 of 5" in v.why  # the measurement is not made yet
    write(reg, values)
    (v,) = cl.check_set(repo / "set")
    assert v.state == "pending"  # seed 9 did not train: four of five draws in
    write(reg, {**values, 9: 0.58})
    (v,) = cl.check_set(repo / "set")
    diffs = [x - 0.05 for x in (0.50, 0.55, 0.60, 0.52, 0.58)]
    assert v.state == "confirmed"
    assert v.p == pytest.approx(stats.ttest_1samp(diffs, 0.2, alternative="greater").pvalue)
    write(before, {**values, 9: 0.58})
    (v,) = cl.check_set(repo / "set")
    assert v.state == "refused" and "not after its registration" in v.why


def test_a_paired_prediction_between_two_per_draw_measurements_pairs_them_by_seed(repo):
    """Two scripts' files (scripts/sink_mass.py: one per scheme), a value per draw each: the paired test runs on the
    per-seed log ratios of the seeds both files hold, so it is confirmed when one is higher on every seed by more
    than the effect, and failed when the order flips, whatever the unpaired spread."""
    keeps = prediction(
        "rope-id-keeps-sink",
        "RoPE-ID keeps at least 20% more of its sink mass than RoPE (paired by draw).",
        {"file": "sink-a.json", "key": "kept", "per_draw": True, "seeds": FRESH},
        {"file": "sink-b.json", "key": "kept", "per_draw": True, "seeds": FRESH},
        "higher",
        "paired",
        effect="20%",
        draws=5,
    )
    write_claims(repo, [keeps])
    reg = commit(repo, "register")

    def write(name, vals):
        draws = {str(s): {"precision": "bf16", "git_commit": reg, "kept": v} for s, v in zip(FRESH, vals)}
        (repo / "set" / name).write_text(json.dumps({"draws": draws}))

    b = [0.10, 0.30, 0.15, 0.25, 0.20]  # a wide spread between seeds
    write("sink-b.json", b)
    (v,) = cl.check_set(repo / "set")
    assert v.state == "pending"
    write("sink-a.json", [x * r for x, r in zip(b, (1.50, 1.55, 1.45, 1.52, 1.48))])
    (v,) = cl.check_set(repo / "set")
    logs = [math.log(r) - math.log(1.2) for r in (1.50, 1.55, 1.45, 1.52, 1.48)]
    assert v.state == "confirmed"
    assert v.p == pytest.approx(stats.ttest_1samp(logs, 0, alternative="greater").pvalue, rel=1e-6)
    write("sink-a.json", [x * r for x, r in zip(b, (0.90, 0.95, 0.85, 0.92, 0.88))])
    (v,) = cl.check_set(repo / "set")
    assert v.state == "failed"


def test_a_withdrawal_counts_only_before_the_first_record_it_reads_and_a_late_one_is_decided_as_it_falls(repo):
    """A prediction whose records predate it can only fail: failed where its test fails, refused where it would be
    confirmed. ``withdrawn`` (the one field it may gain) takes it out of the count and the family only when the
    commit that withdrew it precedes every record it reads, by the records' creation times and by git; a withdrawal
    written after its data was in hand is not honoured, so no failed prediction can be withdrawn out of the count."""
    time.sleep(1.1)  # commit times have a one-second resolution; the records must be written after the commit
    before = git(repo, "rev-parse", "HEAD")
    write_claims(repo, [DEGRADES, TOO_BIG])
    commit(repo, "register")
    write_records(repo, before)  # measured before the registration
    v = by_id(repo)
    assert v["rope-degrades"].state == "refused"  # it would be confirmed on data older than itself
    assert v["rope-triples"].state == "failed" and "it counts as failed, never as confirmed" in v["rope-triples"].why
    reason = "its records were measured before it was registered; a successor decides it on fresh draws"
    write_claims(repo, [DEGRADES, {**TOO_BIG, "withdrawn": reason}])
    commit(repo, "withdraw after the data")  # late: its records were written before this commit
    v = by_id(repo)
    assert v["rope-triples"].state == "failed" and "its withdrawal is not honoured" in v["rope-triples"].why
    assert "0 withdrawn" not in cl.scoreboard(list(v.values())) and "1 failed" in cl.scoreboard(list(v.values()))
    # a prediction registered and withdrawn before any of its records: honoured, shown with its numbers
    early = {**TOO_BIG, "id": "rope-triples-early", "effect": "190%", "text": TOO_BIG["text"].replace("200", "190")}
    write_claims(repo, [DEGRADES, {**TOO_BIG, "withdrawn": reason}, early])
    commit(repo, "register early")
    write_claims(repo, [DEGRADES, {**TOO_BIG, "withdrawn": reason}, {**early, "withdrawn": reason}])
    commit(repo, "withdraw early")
    time.sleep(1.1)
    write_records(repo, commit(repo, "after"))
    v = by_id(repo)
    assert v["rope-triples-early"].state == "withdrawn", v["rope-triples-early"].why
    assert v["rope-triples-early"].p_adj is None
    assert reason in v["rope-triples-early"].why
    text = cl.render_verdicts([v["rope-triples-early"]], markdown=True)
    assert text.startswith("- **WITHDRAWN** (prediction, paired)") and "9." in text  # its numbers stay shown
    with pytest.raises(cl.UsageError, match="withdrawn says why"):
        write_claims(repo, [{**DEGRADES, "withdrawn": ""}])
        cl.check_set(repo / "set")


def test_a_property_is_shown_apart_and_never_counted(repo):
    """A claim no data could contradict (a scheme undefined past its table, by construction) is a property: not a
    prediction, not in the confirmed count, whatever its claims file calls it."""
    undefined = {"id": "learned-undefined", "kind": "prediction", "text": "Learned is undefined at 16x.", "draws": 5}
    undefined.update(a={"label": "learned", "length": "16x", "seeds": FRESH}, relation="undefined", rule="point")
    write_claims(repo, [DEGRADES, undefined])
    reg = commit(repo, "register")
    rd = ResultsDir(repo / "set")
    for seed in FRESH:
        r = record("learned", seed, 2048, 1.0)
        r.update(status="undefined", metrics=None, reason="beyond its table", created=now())
        r["provenance"] = {**r["provenance"], "git_commit": reg}
        rd.write_record(r)
    write_records(repo, commit(repo, "after"))
    v = by_id(repo)
    assert v["learned-undefined"].kind == "property" and v["learned-undefined"].state == "holds"
    line = cl.scoreboard(list(v.values()))
    assert line.startswith("predictions: 1 registered, 1 confirmed") and "properties (true by construction" in line


def test_a_registered_prediction_deleted_or_renamed_is_refused_by_name(repo):
    """Registered predictions are append-only: deleting one (a failed one, say, to shrink the family) or renaming it
    makes `check` refuse it by its old id; a prediction never committed can be deleted freely."""
    write_claims(repo, [DEGRADES, TOO_BIG])
    commit(repo, "register")
    write_claims(repo, [DEGRADES, {**FLAT, "id": "never-committed"}])
    write_claims(repo, [DEGRADES])  # rope-triples deleted; never-committed was never in git
    commit(repo, "delete")
    v = by_id(repo)
    assert v["rope-triples"].state == "refused" and "then deleted from claims.yaml" in v["rope-triples"].why
    assert "never-committed" not in v
    write_claims(repo, [DEGRADES, {**TOO_BIG, "id": "rope-triples-renamed"}])
    commit(repo, "rename")
    v = by_id(repo)
    assert v["rope-triples"].state == "refused" and v["rope-triples-renamed"].state == "pending"
    res = invoke("check", repo / "set")
    assert res.exit_code == 1 and "[REFUSED] rope-triples " in res.output


def test_the_replication_table_puts_each_prediction_beside_its_restatement(repo):
    """`<!-- pebench:replication -->`: a row per prediction of the first set, its verdict and its restatement's
    (``restates: SET:ID``) in each other set, and where it is confirmed; one not restated says so."""
    from pebench.findings import docs

    write_claims(repo, [DEGRADES, TOO_BIG])
    (repo / "other").mkdir()
    restated = {**DEGRADES, "id": "other-rope-degrades", "restates": "set:rope-degrades"}
    (repo / "other" / cl.CLAIMS_FILE).write_text(yaml.safe_dump({"claims": [restated]}))
    commit(repo, "register")
    write_records(repo, commit(repo, "after"))
    text = docs._replication(repo, {"from": "set", "to": "other", "names": "sotu,code"})
    rows = {r.split("<sub>`")[1].split("`")[0]: r for r in text.splitlines()[2:] if "<sub>" in r}
    assert text.splitlines()[0] == "| prediction | sotu | code | confirmed on |"
    # the numbers behind a decided verdict: RoPE's mean at 16x (9.0) over its mean at 1x (4.0), five draws each
    assert "**confirmed**, p = " in rows["rope-degrades"] and "; ratio 2.25 over 1 comparison, n = 5 |" in text
    assert text.rstrip().endswith(docs.RATIO_LEGEND) and "ratio" not in rows["rope-degrades"].split("|")[3]
    assert "**confirmed**" in rows["rope-degrades"] and rows["rope-degrades"].endswith("| sotu (code pending) |")
    assert "| **failed**, p = " in rows["rope-triples"] and rows["rope-triples"].endswith("| not restated | none |")
    with pytest.raises(cl.UsageError, match="2 sets but 1 names"):
        docs._replication(repo, {"from": "set", "to": "other", "names": "sotu"})


def test_the_transfer_columns_read_a_map_say_not_statable_and_count_where_findings_carry(repo):
    """``map`` names a restatement the other set's claims do not (a real model's, registered without ``restates``);
    ``statable`` marks a finding no claim there restates as not statable; ``summary`` counts the first set's
    confirmed findings by where they are confirmed, naming those confirmed nowhere."""
    from pebench.findings import docs

    write_claims(repo, [DEGRADES, TOO_BIG, FLAT])
    (repo / "real").mkdir()
    carried = [{**DEGRADES, "id": "real-degrades"}, {**FLAT, "id": "real-flat", "relation": "flat"}]
    (repo / "real" / cl.CLAIMS_FILE).write_text(yaml.safe_dump({"claims": carried}))
    commit(repo, "register")
    write_records(repo, commit(repo, "after"))
    args = {"from": "set", "to": "real", "names": "tiny,real", "statable": "1", "summary": "1"}
    text = docs._replication(repo, {**args, "map": "rope-degrades:1:real-degrades,alibi-flat:1:real-flat"})
    rows = {r.split("<sub>`")[1].split("`")[0]: r for r in text.splitlines()[2:] if "<sub>" in r}
    assert "| not statable |" in rows["rope-triples"] and "not restated" not in text
    assert rows["rope-degrades"].count("**") == 4  # the tiny verdict and the real one
    found = [v for v in by_id(repo).values() if v.kind == "prediction" and v.state == "confirmed"]
    assert f"Of the {len(found)} findings of tiny, 2 can be stated about real:" in text.splitlines()[-1]
    with pytest.raises(cl.UsageError, match="no claim 'nope' in real"):
        docs._replication(repo, {**args, "map": "rope-degrades:1:nope"})


def test_a_decided_prediction_waits_for_its_family_and_shows_its_verdict_so_far(repo):
    """The family's adjustment is final only when every prediction of the set is in: until then a decided one is
    pending, with its numbers and 'confirmed so far' shown; once the last one is in, every verdict is final."""
    later = {**FLAT, "id": "alibi-flat-later", "a": {**FLAT["a"], "seeds": [20, 21, 22, 23, 24]}}
    write_claims(repo, [DEGRADES, later])
    commit(repo, "register")
    write_records(repo, commit(repo, "after"))  # seeds 5-9: rope-degrades is decided, alibi-flat-later waits
    v = by_id(repo)
    assert v["rope-degrades"].state == "pending" and v["alibi-flat-later"].state == "pending"
    assert "provisional: Benjamini-Hochberg adjusted p=" in v["rope-degrades"].why
    assert "confirmed so far; 1 of its family's predictions are pending" in v["rope-degrades"].why
    assert "predictions: 2 registered, 0 confirmed, 0 failed, 2 pending" in cl.scoreboard(list(v.values()))
    write_records(repo, commit(repo, "the rest"), seeds=range(20, 25))
    v = by_id(repo)
    assert v["rope-degrades"].state == "confirmed" and v["alibi-flat-later"].state == "confirmed"
    assert "over 2 predictions" in v["rope-degrades"].why and "provisional" not in v["rope-degrades"].why
