"""Evaluation tasks: passkey and copy prompts by index, teacher-forced scoring on hand-made models, Wilson
intervals, far-token marking, the metric registry's directions in reports, a task added from outside the package,
retrieval training data."""

import json
import math

import numpy as np
import pytest
import torch

from pebench.cli import app
from pebench.config import EvalConfig, ModelConfig
from pebench.data.needles import (
    ALPHABET,
    EVAL,
    FILLER,
    NEEDLE,
    QUESTION,
    TASK,
    TRAIN,
    fixed_bytes,
    mix_needles,
    needle_rows,
    passkey_form,
    passkey_window,
)
from pebench.eval.tasks import (
    METRICS,
    TASKS,
    Metric,
    Task,
    copying,
    passkey,
    register_task,
    task_names,
    unregister_task,
    wilson,
)
from pebench.eval.tasks.ppl import far_tokens
from pebench.findings import report as rp
from pebench.results import SCHEMA_VERSION, ResultsDir
from support import Oracle, Uniform, runner
from support import task_ctx as _ctx


# -- passkey prompts ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("length", [128, 200, 512, 1000])
@pytest.mark.parametrize("depth", [0.0, 0.25, 0.5, 1.0])
def test_passkey_window_has_the_needle_at_its_depth_and_the_question_at_the_end(length, depth):
    w = passkey_window(length, depth, "07315")
    text = bytes(w.tokens).decode()
    assert len(w.tokens) == length  # exactly L tokens
    assert text.endswith(QUESTION + " 07315")  # the question ends the window, then the key
    needle = NEEDLE.format(key="07315")
    assert text[w.needle_start : w.needle_start + len(needle)] == needle
    form = "standard" if length >= 2 * fixed_bytes("standard") else "compact"
    assert w.form == form and text.startswith(TASK) == (form == "standard")
    # depth: the needle splits the haystack at round(depth * room) bytes
    head = len(TASK) + 1 if form == "standard" else 0
    room = length - fixed_bytes(form)
    assert w.needle_start == head + round(depth * room) + 1
    hay = text[head : w.needle_start - 1] + text[w.needle_start + len(needle) + 1 : -len(QUESTION) - 7]
    assert len(hay) == room and (FILLER + " ") * 20 >= hay and ((FILLER + " ") * 20).startswith(hay)


def test_passkey_keys_are_reproducible_from_the_seed_and_differ_across_cells():
    a = passkey.prompts(256, 1, 0.25, 6, seed=0)
    b = passkey.prompts(256, 1, 0.25, 6, seed=0)
    c = passkey.prompts(256, 2, 0.25, 6, seed=0)
    assert [w.key for w in a] == [w.key for w in b] and all(len(w.key) == 5 and w.key.isdigit() for w in a)
    assert [w.key for w in a] != [w.key for w in c]
    assert [w.key for w in passkey.prompts(256, 1, 0.25, 6, seed=1)] != [w.key for w in a]
    hay = np.frombuffer(b"lorem ipsum dolor sit amet " * 100, dtype=np.uint8)
    corpus = passkey.prompts(512, 0, 0.5, 3, seed=0, haystack=hay)
    assert all(b"lorem" in bytes(w.tokens) and b"grass" not in bytes(w.tokens) for w in corpus)


def test_passkey_form_and_too_short():
    assert passkey_form(fixed_bytes("compact")) is None and passkey_form(128) == "compact"
    assert passkey_form(2 * fixed_bytes("standard")) == "standard"
    with pytest.raises(ValueError):
        passkey_window(fixed_bytes("compact") - 1, 0.5, "12345")


# -- hand-made models: support.Oracle, support.Uniform, support.task_ctx -----------------------------------------------
def test_passkey_scoring_copier_scores_one_uniform_scores_chance():
    opts = {"trials": 40, "depths": "0,0.5,1", "haystack": "filler"}
    out = passkey.PasskeyTask().measure(_ctx(Oracle(), **opts), 256)
    assert out["metrics"] == {"passkey_exact": 1.0, "passkey_digit": 1.0}
    assert [c["depth"] for c in out["details"]["cells"]] == [0.0, 0.5, 1.0] and out["details"]["form"] == "compact"
    uni = passkey.PasskeyTask().measure(_ctx(Uniform(), **opts), 256)
    # a uniform model ties all ten digits: each gets a tenth of a right answer, exactly chance
    assert uni["metrics"]["passkey_digit"] == pytest.approx(0.1)
    assert uni["metrics"]["passkey_exact"] == pytest.approx(1e-5)
    lo, hi = uni["intervals"]["passkey_exact"]
    assert (lo, hi) == pytest.approx(wilson(120e-5, 120))
    corpus = passkey.PasskeyTask().measure(_ctx(Oracle(), **{**opts, "haystack": "corpus"}), 600)
    assert corpus["metrics"]["passkey_exact"] == 1.0 and corpus["details"]["haystack"] == "corpus"
    assert corpus["details"]["form"] == "standard"


def test_copy_scoring_copier_scores_one_uniform_scores_zero():
    task = copying.CopyTask()
    out = task.measure(_ctx(Oracle(), trials=5, string_length=24), 128)
    assert out["metrics"]["copy_acc"] == 1.0 and out["metrics"]["copy_range"] == 102
    assert [c["distance"] for c in out["details"]["cells"]] == [32, 64, 102]
    uni = task.measure(_ctx(Uniform(), trials=5, string_length=24), 128)
    assert uni["metrics"]["copy_acc"] == pytest.approx(1 / 256) and uni["metrics"]["copy_range"] == 0  # chance
    assert uni["metrics"]["copy_loss"] == pytest.approx(math.log(256), rel=1e-5)


def test_wilson_interval_by_hand():
    # 8 of 10, z = 1.96: centre (0.8 + z^2/20) / (1 + z^2/10), half z sqrt(0.016 + z^2/400) / (1 + z^2/10)
    lo, hi = wilson(8, 10)
    assert lo == pytest.approx(0.4902, abs=1e-4) and hi == pytest.approx(0.9433, abs=1e-4)
    assert wilson(0, 20)[0] == 0.0 and wilson(20, 20)[1] == 1.0
    assert wilson(0, 0) == (0.0, 1.0)


# -- copy prompts ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("length", [64, 128, 1000])
def test_copy_distances_are_exact(length):
    stream = np.frombuffer(bytes(range(32, 127)) * 100, dtype=np.uint8)
    ds = copying.distances(length, 24)
    assert ds == sorted(ds) and ds[-1] == length - 26 and all(d >= 24 for d in ds)
    for d in ds:
        for w in copying.prompts(stream, length, d, 24, 3, seed=0):
            assert len(w.tokens) == length and w.second - w.first == d and w.second + 24 == length
            assert (w.tokens[w.first : w.first + 24] == w.string).all()
            assert (w.tokens[w.second : w.second + 24] == w.string).all()
            assert np.isin(w.string, ALPHABET).all()
    assert copying.distances(128, 8) == [16, 32, 64, 118]
    assert (
        copying.copy_range(
            [{"distance": 16, "accuracy": 0.9}, {"distance": 32, "accuracy": 0.4}, {"distance": 64, "accuracy": 0.6}]
        )
        == 64
    )


# -- far tokens --------------------------------------------------------------------------------------------------------
def test_far_tokens_marks_exactly_the_far_repeats():
    rng = np.random.default_rng(0)
    s = rng.integers(0, 256, size=1000).astype(np.uint8)
    chunk = rng.integers(0, 256, size=20).astype(np.uint8)
    s[10:30] = chunk  # first occurrence
    s[300:320] = chunk  # 290 tokens later: far for T = 128
    near = rng.integers(0, 256, size=18).astype(np.uint8)
    s[500:518] = near
    s[600:618] = near  # 100 later: near
    s[700:718] = near  # a far repeat of the first, but its last occurrence (600) is within T: not far
    far = far_tokens(s, 16, 128)
    # 16-grams inside the second copy start at 300..304; the token after each is far
    assert np.flatnonzero(far).tolist() == [316, 317, 318, 319, 320]
    assert far_tokens(s, 16, 300).sum() == 0  # 290 is not more than 300
    assert np.flatnonzero(far_tokens(s, 16, 50)).tolist() == [316, 317, 318, 319, 320, 616, 617, 618, 716, 717, 718]


# -- metric registry in reports ----------------------------------------------------------------------------------------
def _rec(task, scheme, L, metrics, intervals=None, details=None, protocol="nonoverlap", params=None):
    return {
        "schema": SCHEMA_VERSION,
        "task": task,
        "run": f"{scheme}-s0",
        "scheme": scheme,
        "variant": "none",
        "label": scheme,
        "seed": 0,
        "protocol": protocol,
        "protocol_params": params or {},
        "length": L,
        "train_context": 16,
        "multiple": L / 16,
        "status": "ok",
        "reason": None,
        "metrics": metrics,
        "intervals": intervals or {},
        "details": details,
        "provenance": {},
        "created": "2026-01-01T00:00:00+00:00",
    }


def _ppl_details():
    return {"tokens_scored": 1, "windows": 1, "position_buckets": [], "far_tokens": 0, "far_n": 16, "far_distance": 16}


def test_report_bolds_the_maximum_for_accuracy_and_the_minimum_for_perplexity(tmp_path):
    rd = ResultsDir(tmp_path)
    for scheme, ppl, acc in (("rope", 3.0, 0.2), ("alibi", 4.0, 0.9)):
        rd.write_record(
            _rec("ppl", scheme, 16, {"ppl": ppl, "ppl_far": ppl, "bpb": 1.0, "loss": 1.0}, details=_ppl_details())
        )
        rd.write_record(
            _rec(
                "passkey",
                scheme,
                16,
                {"passkey_exact": acc, "passkey_digit": acc},
                {"passkey_exact": [acc - 0.1, acc + 0.05]},
                {
                    "form": "compact",
                    "haystack": "filler",
                    "trials": 10,
                    "cells": [
                        {"depth": 0.5, "trials": 10, "exact": acc, "exact_ci": [0, 1], "digit": acc, "digit_ci": [0, 1]}
                    ],
                },
                "filler",
                {"trials": 10},
            )
        )
    df = rp.records_frame(rd)
    md_ppl = rp.to_markdown(rp.build_table(df, "ppl"))
    md_acc = rp.to_markdown(rp.build_table(df, "passkey_exact"))
    assert "| rope | **3.00** |" in md_ppl and "| alibi | 4.00 |" in md_ppl
    assert "| alibi | **0.90 [0.80, 0.95]** |" in md_acc and "| rope | 0.20 [0.10, 0.25] |" in md_acc
    ctx = rp.context_markdown(df)
    assert "| rope | ppl | **3.00** |" in ctx and "|  | passkey_exact | 0.20 [0.10, 0.25] |" in ctx
    assert "|  | passkey_exact | **0.90 [0.80, 0.95]** |" in ctx
    r = runner.invoke(app, ["report", "--metric", "passkey_exact", "--format", "md", "--results", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert "**0.90" in r.output and list(tmp_path.glob("heatmap_passkey_*.png")) == []  # filtered view: no extras
    r = runner.invoke(app, ["report", "--format", "md", "--results", str(tmp_path)])
    assert r.exit_code == 0 and len(list(tmp_path.glob("heatmap_passkey_*.png"))) == 2
    assert (tmp_path / "report-context.md").exists()
    r = runner.invoke(app, ["report", "--metric", "copy_acc", "--results", str(tmp_path)])
    assert r.exit_code == 1 and "no copy records" in r.output and "Traceback" not in r.output
    r = runner.invoke(app, ["report", "--metric", "acc", "--results", str(tmp_path)])
    assert r.exit_code == 2 and "unknown metric 'acc'" in r.output


def test_schema_1_records_still_load_and_tasks_never_collide(tmp_path):
    rd = ResultsDir(tmp_path)
    old = {
        "schema": 1,
        "run": "rope-s0",
        "scheme": "rope",
        "variant": "none",
        "label": "rope",
        "seed": 0,
        "protocol": "nonoverlap",
        "protocol_params": {},
        "length": 16,
        "train_context": 16,
        "multiple": 1.0,
        "status": "ok",
        "reason": None,
        "loss": math.log(5.0),
        "ppl": 5.0,
        "bpb": 2.3,
        "tokens_scored": 9,
        "windows": 1,
        "position_buckets": [],
        "provenance": {},
        "created": "2026-01-01T00:00:00+00:00",
    }
    p = rd.records / "rope-s0" / "rope__nonoverlap__L16.json"
    p.parent.mkdir(parents=True)
    p.write_text(json.dumps(old))
    skipped = []
    (rec,) = list(rd.iter_records(skipped))
    assert skipped == [] and rec["task"] == "ppl" and rec["metrics"]["ppl"] == 5.0
    assert rec["metrics"]["ppl_far"] is None and rec["details"]["tokens_scored"] == 9
    t = rp.build_table(rp.records_frame(rd), "ppl")
    assert t.cells[("rope", 16)][0] == 5.0
    a = _rec("passkey", "rope", 16, {}, protocol="filler", params={"trials": 10})
    b = _rec("copy", "rope", 16, {}, protocol="text", params={"trials": 10, "string_length": 24})
    paths = {rd.record_path(old), rd.record_path(a), rd.record_path(b)}
    assert len(paths) == 3 and rd.record_path(old) == p


# -- a task from outside the package -----------------------------------------------------------------------------------
class ByteCount(Task):
    """Counts the window: a task a user adds in their own module."""

    name = "window-size"
    metrics = (Metric("window_tokens", "window-size", True, "tokens in the window"),)
    fields = {"note": "a note"}
    options = {"trials": 1}

    def protocol(self, options, protocol):
        return "plain", {}

    def measure(self, ctx, length):
        return {
            "status": "ok",
            "reason": None,
            "metrics": {"window_tokens": float(length)},
            "intervals": {},
            "details": {"note": f"{ctx.cfg.model.pe} at {length}"},
        }


@pytest.fixture
def outside_task():
    register_task(ByteCount())
    yield
    unregister_task("window-size")
    assert "window-size" not in TASKS and "window_tokens" not in METRICS


def test_a_task_added_outside_shows_up_in_eval_and_report(outside_task, tmp_path):
    from pebench.config import load_config
    from pebench.train import TrainJob, train

    cfg = load_config("tiny")
    cfg.model = ModelConfig(d_model=16, n_layers=1, n_heads=2, d_mlp=32, context=16, pe="alibi")
    cfg.train.steps, cfg.train.batch_size, cfg.train.lr_by_scheme = 2, 2, {}
    rd = ResultsDir(tmp_path)
    train(TrainJob(cfg.validate(), rd, "alibi-s0", device="cpu"))
    r = runner.invoke(
        app,
        ["eval", "--task", "window-size,ppl", "--lengths", "16,32", "--max-tokens", "200", "--results", str(tmp_path)],
    )
    assert r.exit_code == 0, r.output
    assert (rd.records / "alibi-s0" / "window-size__alibi__plain-m200__L32.json").exists()
    r = runner.invoke(app, ["report", "--metric", "window_tokens", "--format", "md", "--results", str(tmp_path)])
    assert r.exit_code == 0 and "| alibi | **16.00** | **32.00** | 2.00 |" in r.output, r.output
    r = runner.invoke(app, ["eval", "--task", "window-size", "--task-opt", "depths=0,1", "--results", str(tmp_path)])
    having = ", ".join(sorted(n for n in task_names() if "depths" in TASKS.get(n).options))  # every task with depths
    assert r.exit_code == 2 and f"'depths' is an option of {having}, not of window-size" in r.output
    r = runner.invoke(app, ["eval", "--task", "passkey", "--lengths", "64", "--results", str(tmp_path)])
    assert r.exit_code == 2 and "passkey needs lengths of at least" in r.output
    r = runner.invoke(app, ["eval", "--task", "pasky", "--results", str(tmp_path)])
    assert r.exit_code == 2 and "unknown evaluation task 'pasky'" in r.output


# -- retrieval training data -------------------------------------------------------------------------------------------
def test_needle_rows_are_seeded_and_documents_are_retrieval_documents():
    text = np.frombuffer((b"plain text about the union. " * 400)[: 32 * 129], dtype=np.uint8).reshape(32, 129)
    rows = needle_rows(0, 5, 32, 0.5)
    assert (rows == needle_rows(0, 5, 32, 0.5)).all() and 8 <= rows.sum() <= 24
    assert not needle_rows(0, 5, 32, 0.0).any() and needle_rows(0, 5, 32, 1.0).all()
    out = mix_needles(text, 0, 5, 0.5, (16, 32))
    assert (out == mix_needles(text, 0, 5, 0.5, (16, 32))).all()
    assert (out[~rows] == text[~rows]).all() and out.shape == text.shape
    for r in np.flatnonzero(rows):
        doc = bytes(out[r])
        if b"pass key" in doc:  # a passkey document: the key ends it and appears in the needle
            key = doc[-5:].decode()
            assert key.isdigit() and doc.endswith(QUESTION.encode() + b" " + key.encode())
            assert doc.count(key.encode()) == 3
        else:  # a repeated random string over the text
            diff = np.flatnonzero(out[r] != text[r])
            assert len(diff) >= 2 * 10  # two copies of at least 16 bytes (a few may match the text by chance)
    assert TRAIN != EVAL


def test_sample_batch_with_and_without_needles(tmp_path):
    from pebench.data import sample_batch

    tokens = np.frombuffer(b"abcdefghij" * 500, dtype=np.uint8)
    x0, y0 = sample_batch(tokens, 0, 3, 8, 32)
    x1, y1 = sample_batch(tokens, 0, 3, 8, 32, needles=0.5, needle_lengths=(8, 12))
    rows = needle_rows(0, 3, 8, 0.5)
    assert torch.equal(x0[torch.from_numpy(~rows)], x1[torch.from_numpy(~rows)])
    assert not torch.equal(x0[torch.from_numpy(rows)], x1[torch.from_numpy(rows)])
    assert torch.equal(x1[:, 1:], y1[:, :-1])
    # ranks of a data-parallel job take disjoint rows of the same mixed batch
    xa, _ = sample_batch(tokens, 0, 3, 8, 32, 0, 2, 0.5, (8, 12))
    xb, _ = sample_batch(tokens, 0, 3, 8, 32, 1, 2, 0.5, (8, 12))
    assert torch.equal(torch.cat([xa, xb]), x1)


# -- every scheme and scaling ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "scheme",
    [
        "none",
        "sinusoidal",
        "learned",
        "shaw",
        "t5",
        "rope",
        "alibi",
        "kerple",
        "fire",
        "xpos",
        "p-rope",
        "sandwich",
        "fox",
        "cope",
    ],
)
def test_passkey_copy_and_far_ppl_run_for_every_scheme_and_scaling(scheme):
    from pebench.eval.evaluate import _measure
    from pebench.eval.scoring import Protocol
    from pebench.eval.tasks import EvalContext
    from pebench.eval.tasks.ppl import PplTask
    from pebench.model.decoder import DecoderLM
    from support import tiny_model_config

    model = DecoderLM(tiny_model_config(scheme, context=32)).eval()
    cfg = type("Cfg", (), {"eval": EvalConfig(batch_tokens=2048), "model": model.cfg})()
    stream = np.frombuffer(b"It was the best of times, it was the worst of times. " * 40, dtype=np.uint8)
    base = model.pe
    for variant in [None] + base.variants():
        model.pe = base if variant is None else base.with_variant(variant)
        tasks = [
            (passkey.PasskeyTask(), {"trials": 2, "depths": "0,1", "haystack": "filler"}, 128),
            (copying.CopyTask(), {"trials": 2, "string_length": 8}, 64),
            (PplTask(), {"far_n": 4}, 64),
        ]
        for task, opts, L in tasks:
            ctx = EvalContext(model, cfg, torch.device("cpu"), stream, stream, Protocol(), L, opts)
            task.prepare(ctx)
            out = _measure(task, ctx, L)
            if scheme == "learned":  # beyond its table: undefined, with the reason
                assert out["status"] == "undefined" and "positions" in out["reason"]
                continue
            assert out["status"] == "ok", (scheme, variant, task.name)
            assert set(out["metrics"]) <= {m.name for m in task.metrics}
            for name, v in out["metrics"].items():
                assert v is not None and math.isfinite(v), (scheme, variant, name)
            if task.name == "ppl":
                assert out["details"]["far_tokens"] > 0 and out["metrics"]["ppl_far"] > 1


def test_needle_kinds_build_what_they_say():
    from pebench.config import load_config
    from pebench.data.needles import training_document
    from pebench.util.errors import UsageError

    bg = np.frombuffer(b"x" * 129, dtype=np.uint8)
    for seed in range(20):
        rng = np.random.default_rng(seed)
        rep = training_document(rng, bg, (16, 64), {"repeat": 1})
        k = next(k for k in range(16, 65) if (rep[:k] == rep[k : 2 * k]).all())
        assert np.isin(rep, ALPHABET).all()  # random letters, no text
        per = training_document(rng, bg, (4, 24), {"periodic": 1})
        p = next(p for p in range(4, 25) if (per[p:] == per[:-p]).all())
        assert 4 <= p <= 24 and k >= 16
        alt = training_document(rng, bg, (4, 16), {"alternate": 1})
        assert (alt[2:] == alt[:-2]).all() and np.isin(alt, ALPHABET).all()
        pk = bytes(training_document(rng, bg, (16, 64), {"passkey": 2, "copy": 0}))
        assert pk.endswith(pk[-5:]) and b"pass key" in pk
    cfg = load_config("tiny")
    cfg.train.needle_kinds = {"needle": 1}
    with pytest.raises(UsageError, match="kinds are passkey, copy, repeat, periodic, pairs"):
        cfg.validate()


def test_pairs_windows_are_random_strings_each_followed_by_its_repeat():
    from pebench.data.needles import pairs_window, training_document

    for seed in range(20):
        rng = np.random.default_rng(seed)
        repeats = []
        w = pairs_window(rng, 129, (4, 16), repeats)
        for a, b in repeats[:-1]:  # each repeat copies the string before it (the last may be cut)
            assert 4 <= b - a <= 16 and (w[a:b] == w[2 * a - b : a]).all()
        assert len(repeats) >= 3
        assert len(w) == 129 and np.isin(w, ALPHABET).all()
        i, pairs = 0, 0
        while i + 32 <= len(w):  # walk the pairs: each string's length is the one whose repeat follows it
            k = next(k for k in range(4, 17) if (w[i : i + k] == w[i + k : i + 2 * k]).all())
            i, pairs = i + 2 * k, pairs + 1
        assert pairs >= 3
    doc = training_document(np.random.default_rng(0), np.zeros(65, dtype=np.uint8), (40, 64), {"pairs": 1})
    assert (doc[:32] == doc[32:64]).all()  # strings capped at half the window, like the other kinds


def test_a_continued_run_leaves_the_parents_warm_up_behind():
    from pebench.config import load_config
    from pebench.jobs.plan import finetune_config, recalibration_config

    parent = load_config("context")
    assert parent.train.induction_steps > 0
    for cfg in (recalibration_config(parent, "rope", 100), finetune_config(parent, 256, "yarn", None, 100)):
        assert cfg.train.induction_steps == 0 and cfg.train.steps == 100
        assert cfg.train.needles == parent.train.needles  # the retrieval documents stay


def test_every_stated_chance_level_is_what_a_uniform_model_scores():
    """The chance a record states (``Task.chances``) is what a model with a uniform next token scores: perplexity V
    and loss ln V, a tenth per key digit and 10^-5 for the key, 1/V per copied byte."""
    from pebench.eval.tasks import TASKS

    cases = {
        "ppl": ({}, 256, ("ppl", "loss", "bpb")),
        "passkey": ({"trials": 10, "depths": "0,1", "haystack": "filler"}, 256, ("passkey_digit", "passkey_exact")),
        "copy": ({"trials": 4, "string_length": 24}, 256, ("copy_acc", "copy_loss")),
    }
    for name, (opts, L, metrics) in cases.items():
        task = TASKS.get(name)
        full = {**task.options, **opts}
        ctx = _ctx(Uniform(), **full)
        task.prepare(ctx)
        out = task.measure(ctx, L)
        stated = task.chances(full, ctx.vocab, out["metrics"])
        assert ctx.vocab == 256 and set(metrics) <= set(stated), (name, stated)
        for m in metrics:
            assert out["metrics"][m] == pytest.approx(stated[m], rel=1e-4), (name, m)
    assert TASKS.get("passkey").chances({}, 32000, ["passkey_exact", "passkey_token"]) == {"passkey_token": 1 / 32000}
    assert TASKS.get("vt").chances({"chains": 2, "hops": 2}, 256) == {"vt_recall": 0.25, "vt_direct": 0.25}
