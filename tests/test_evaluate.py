"""Protocols checked by index on synthetic streams; per-token averaging; per-position buckets."""

import json
import math

import numpy as np
import pytest
import torch

from pebench.eval.scoring import Protocol, bucket_edges, score_stream, windows
from pebench.util.errors import UsageError


def scored(n, L, proto, Lmax=None):
    """{stream index of each scored target: its context length}."""
    starts, first = windows(n, L, proto, Lmax)
    out = {}
    for a, f in zip(starts, first):
        for p in range(f, L):
            assert a + p not in out, "scored twice"
            out[a + p] = p
    return out


@pytest.mark.parametrize("n,L", [(100, 10), (101, 10), (64, 64), (1000, 7)])
def test_nonoverlap_scores_every_token_once(n, L):
    s = scored(n, L, Protocol("nonoverlap"))
    assert sorted(s) == list(range(1, n))
    assert all(1 <= c <= L - 1 for c in s.values())


def test_sliding_context_and_coverage():
    n, L, S = 200, 32, 8
    s = scored(n, L, Protocol("sliding", stride=S))
    assert min(s) == 1
    keys = sorted(s)
    assert keys == list(range(1, keys[-1] + 1))  # contiguous, each once
    assert all(c >= L - S for i, c in s.items() if i > L - 1)  # after the first window
    assert all(s[i] == i for i in range(1, L))  # the first window scores all


def test_fixed_targets_are_the_same_at_every_length_with_exact_context():
    n, K = 5000, 50
    sets = {}
    for L in (16, 64, 256):
        s = scored(n, L, Protocol("fixed", targets=K), Lmax=256)
        assert len(s) == K and set(s.values()) == {L - 1}
        sets[L] = set(s)
    assert sets[16] == sets[64] == sets[256]


def test_protocol_errors():
    with pytest.raises(UsageError, match="at most length - 1"):
        windows(100, 10, Protocol("sliding", stride=10))
    with pytest.raises(UsageError, match="room for only"):
        windows(100, 50, Protocol("fixed", targets=80))
    with pytest.raises(UsageError, match="longer than"):
        windows(100, 101, Protocol("nonoverlap"))


class PositionLoss(torch.nn.Module):
    """A fake model whose loss at window index p is known: logits make the target's probability
    depend on p, so per-token and per-window averages differ."""

    def forward(self, idx):
        B, T = idx.shape
        logits = torch.zeros(B, T, 256)
        nxt = torch.roll(idx, -1, dims=1)
        boost = torch.arange(T, dtype=torch.float32).view(1, T) / 4  # easier further into the window
        logits.scatter_(2, nxt.unsqueeze(-1), boost.expand(B, T).unsqueeze(-1))
        return logits


def expected_loss(p):  # target at window index p is predicted at index p-1
    b = (p - 1) / 4
    return -(b - math.log(math.exp(b) + 255))


def test_per_token_average_and_buckets():
    stream = (np.arange(1000) * 7 % 256).astype(np.uint8)
    L = 64
    out = score_stream(PositionLoss(), stream, L, Protocol("nonoverlap"), 4096, torch.device("cpu"))
    starts, first = windows(1000, L, Protocol("nonoverlap"))
    losses = [expected_loss(p) for f in first for p in range(f, L)]
    assert out["tokens_scored"] == 999 == len(losses)
    assert out["loss"] == pytest.approx(sum(losses) / len(losses), rel=1e-6)
    window_means = [np.mean([expected_loss(p) for p in range(f, L)]) for f in first]
    assert abs(np.mean(window_means) - out["loss"]) > 1e-3  # the last, partial window differs
    assert sum(b["tokens"] for b in out["position_buckets"]) == out["tokens_scored"]
    b = out["position_buckets"]
    assert [x["lo"] for x in b] == [1, 2, 4, 8, 16, 32] and b[-1]["hi"] == 63
    assert b[0]["loss"] == pytest.approx(expected_loss(1), rel=1e-6)


class ContentLoss(torch.nn.Module):
    """A fake model whose confidence in the next token grows with the current token's value, so windows over
    different text have different losses."""

    def forward(self, idx):
        logits = torch.zeros(*idx.shape, 256)
        boost = idx.float().unsqueeze(-1) / 64
        return logits.scatter(2, torch.roll(idx, -1, dims=1).unsqueeze(-1), boost)


def test_each_full_window_keeps_its_own_mean_loss():
    """``window_losses``: one value per window that scores every index, equal to that window's mean cross-entropy
    computed directly, in order, across batches; the last window (flush with the end, scoring only the tail) is
    left out, and the full windows' mean is the loss over their tokens."""
    L = 50
    rng = np.random.default_rng(0)
    stream = rng.integers(0, 256, 1000).astype(np.uint8)
    out = score_stream(ContentLoss(), stream, L, Protocol("nonoverlap"), 3 * L, torch.device("cpu"))
    starts, first = windows(1000, L, Protocol("nonoverlap"))
    assert first[-1] > 1 and (first[:-1] == 1).all()
    direct = []
    for a in starts[:-1]:
        x = torch.from_numpy(stream[a : a + L].astype(np.int64))[None]
        logits = ContentLoss()(x)[0, :-1]
        direct.append(float(torch.nn.functional.cross_entropy(logits, x[0, 1:])))
    assert out["window_losses"] == pytest.approx(direct, rel=1e-6)
    assert np.std(direct) > 0.01  # the windows differ, so an order or batching slip would show


class TailPositionLoss(PositionLoss):
    """PositionLoss with ``logits_tail`` (as DecoderLM has), recording the starts it is asked for."""

    def __init__(self):
        super().__init__()
        self.starts = []

    def logits_tail(self, idx, start):
        self.starts.append(start)
        return self(idx)[:, start:]


def test_sliding_windows_run_only_their_scored_tail_with_the_same_accounting():
    """Under the sliding protocol the windows after the first score only their last S tokens: the model is asked
    for those logits only, and the losses, buckets, far tokens and bytes are those of running every window whole."""
    n, L, S = 3000, 256, 32
    stream = (np.arange(n) * 7 % 256).astype(np.uint8)
    far, nbytes = np.arange(n) % 3 == 0, np.arange(n) % 2 + 1
    args = (stream, L, Protocol("sliding", S), 4 * L, torch.device("cpu"))
    tail = TailPositionLoss()
    got = score_stream(tail, *args, far=far, nbytes=nbytes)
    ref = score_stream(PositionLoss(), *args, far=far, nbytes=nbytes)
    assert tail.starts and set(tail.starts) == {L - S - 1}  # the first batch (window 0 scores whole) ran whole
    starts, first = windows(n, L, Protocol("sliding", S))
    losses = [expected_loss(p) for f in first for p in range(f, L)]
    assert got["tokens_scored"] == ref["tokens_scored"] == len(losses)
    assert got["loss"] == pytest.approx(sum(losses) / len(losses), rel=1e-6)
    assert got["loss"] == pytest.approx(ref["loss"], rel=1e-12)
    assert got["position_buckets"] == ref["position_buckets"]
    assert got["far"] == ref["far"] and got["far"]["tokens"] > 0
    assert got["bytes_scored"] == ref["bytes_scored"] > got["tokens_scored"]


def test_scored_positions_near_the_end_run_only_the_tail():
    """Teacher-forced targets in the last quarter of the rows: the model is asked from the first target's logit on,
    and the credits and log-probabilities are those of running the rows whole."""
    from pebench.eval.scoring import score_positions
    from support import task_ctx

    rows = np.random.default_rng(0).integers(0, 256, (10, 128))
    pos = [np.arange(120, 128)] * 5 + [np.array([100, 127])] * 5
    tail = TailPositionLoss()
    got = score_positions(task_ctx(tail), rows, pos)
    ref = score_positions(task_ctx(PositionLoss()), rows, pos)
    assert tail.starts == [99]  # one batch: its earliest target is 100
    for a, b in zip(got, ref):  # credits, then log-probabilities
        for x, y in zip(a, b):
            assert np.array_equal(x, y)


def test_bucket_edges_cover_each_context_once():
    for L in (2, 16, 17, 100):
        e = bucket_edges(L)
        pos = np.arange(1, L)
        idx = np.searchsorted(e, pos, side="right") - 1
        assert idx.min() == 0 and idx.max() == len(e) - 2


def test_variants_that_compute_the_same_function_share_one_measurement(tmp_path, monkeypatch):
    """RoPE's scalings at 1x (factor 1) and dynamic NTK where it equals NTK compute what an earlier variant
    computed: evaluation copies that measurement, naming it (``measured_as``), and every number equals measuring
    each variant on its own."""
    from dataclasses import replace

    from pebench.config import config_from_dict
    from pebench.eval.evaluate import EvalRequest, evaluate_run
    from pebench.model.pe.rope import RoPE
    from pebench.results import ResultsDir
    from pebench.train import TrainJob, train
    from support import micro

    cfg = config_from_dict(micro(), name="micro")
    cfg = replace(cfg, model=replace(cfg.model, pe="rope"))
    rd = ResultsDir(tmp_path / "res")
    train(TrainJob(cfg, rd, "r", device="cpu"))
    req = EvalRequest(lengths=[16, 32], variants=["all"], device="cpu", tasks=[], max_tokens=300)
    shared = {(r["label"], r["length"]): r for r in evaluate_run(rd, "r", req)}
    monkeypatch.setattr(RoPE, "signature", lambda self, L: None)  # every variant measured on its own
    alone = {(r["label"], r["length"]): r for r in evaluate_run(ResultsDir(tmp_path / "res"), "r", req)}
    assert shared.keys() == alone.keys() and len(shared) == 2 * len(RoPE.variants())
    for key, rec in shared.items():
        assert rec["metrics"] == alone[key]["metrics"] and rec["details"] == alone[key]["details"], key
        assert "measured_as" not in alone[key]["provenance"]
    copied = {
        key: rec["provenance"]["measured_as"] for key, rec in shared.items() if "measured_as" in rec["provenance"]
    }
    for v in ("linear", "ntk", "dynamic-ntk"):  # factor 1 at the training length: RoPE's own frequencies
        assert copied[(f"rope+{v}", 16)] == "rope"
    assert copied[("rope+dynamic-ntk", 32)] == "rope+ntk"  # the same base at L = 2T
    assert ("rope+ntk", 32) not in copied and ("rope+yarn", 32) not in copied and ("rope", 16) not in copied


@pytest.mark.parametrize("protocol", [Protocol(), Protocol("fixed", targets=8)])
def test_a_share_of_the_lengths_measures_what_the_whole_evaluation_measures(tmp_path, protocol):
    """A worker's share of a run's evaluation (``only_lengths``, the sweep's evaluation shares) writes the very
    records the whole evaluation writes, also where a protocol's choices depend on the longest length (fixed)."""
    from dataclasses import replace

    from pebench.config import config_from_dict
    from pebench.eval.evaluate import EvalRequest, evaluate_run
    from pebench.eval.tasks import TASKS, task_options
    from pebench.results import ResultsDir
    from pebench.train import TrainJob, train
    from support import micro

    cfg = config_from_dict(micro(), name="micro")
    cfg = replace(cfg, model=replace(cfg.model, pe="rope"))
    rd = ResultsDir(tmp_path / "res")
    train(TrainJob(cfg, rd, "r", device="cpu"))
    tasks = [TASKS.get("ppl"), TASKS.get("copy")]
    req = EvalRequest(
        lengths=[16, 32, 64],
        variants=["all"],
        device="cpu",
        protocol=protocol,
        max_tokens=300,
        tasks=tasks,
        options=task_options(tasks, {"copy.string_length": 6, "copy.trials": 4}),
    )
    whole = {(r["task"], r["label"], r["length"]): r for r in evaluate_run(rd, "r", req)}
    shares = {
        (r["task"], r["label"], r["length"]): r
        for part in ([64], [16, 32])
        for r in evaluate_run(rd, "r", replace(req, only_lengths=part))
    }
    assert shares.keys() == whole.keys() and {k[2] for k in whole} == {16, 32, 64}
    for key, rec in whole.items():
        assert shares[key]["metrics"] == rec["metrics"] and shares[key]["details"] == rec["details"], key
        assert shares[key]["provenance"].get("measured_as") == rec["provenance"].get("measured_as"), key
    with pytest.raises(UsageError, match=r"lengths \[48\] are not among the evaluation's lengths \[16, 32, 64\]"):
        evaluate_run(rd, "r", replace(req, only_lengths=[48]))


def test_a_non_finite_metric_is_an_error_of_the_evaluation_and_writes_no_record(tmp_path):
    """Weights damaged to NaN give a NaN perplexity: `eval` names the run, the task, the length and the value,
    exits non-zero, and leaves no record (a NaN is never recorded as a measurement)."""
    from dataclasses import replace

    import torch

    from pebench.config import config_from_dict
    from pebench.results import ResultsDir
    from pebench.train import TrainJob, train
    from support import invoke, micro

    cfg = config_from_dict(micro(), name="micro")
    cfg = replace(cfg, model=replace(cfg.model, pe="alibi"))
    rd = ResultsDir(tmp_path / "res")
    train(TrainJob(cfg, rd, "r", device="cpu"))
    path = rd.run_dir("r") / "checkpoint.pt"
    ckpt = torch.load(path, map_location="cpu", weights_only=True)
    for v in ckpt["model"].values():
        if v.is_floating_point():
            v.fill_(float("nan"))
    torch.save(ckpt, path)
    r = invoke("eval", "--run", "r", "--lengths", "16", "--task", "ppl", "--max-tokens", "200", "--results", rd.root)
    assert r.exit_code != 0 and "r: ppl at 16 tokens gave ppl = nan, not a finite number" in r.output, r.output
    assert "Traceback" not in r.output and not list((rd.root / "records").rglob("*.json"))


def test_the_streams_cap_keys_a_record_so_no_evaluation_takes_the_place_of_another(tmp_path):
    """``--max-tokens`` is part of a record's identity (its protocol says ``-mN``): evaluating again on another
    stream writes beside the default's record, never over it; the same cap with ``--resume`` measures nothing
    again; a report shows the streams as separate protocols, never in one row."""
    from dataclasses import replace

    from pebench.config import config_from_dict
    from pebench.eval.evaluate import EvalRequest, evaluate_run, stream_cap
    from pebench.eval.tasks import resolve_tasks, task_options
    from pebench.findings.report import records_frame
    from pebench.results import ResultsDir
    from pebench.train import TrainJob, train
    from support import micro

    assert stream_cap(None) is None and stream_cap(300) == 300
    cfg = config_from_dict(micro(), name="micro")
    cfg = replace(cfg, model=replace(cfg.model, pe="rope"))
    rd = ResultsDir(tmp_path / "res")
    train(TrainJob(cfg, rd, "r", device="cpu"))
    base = EvalRequest(lengths=[16], device="cpu")
    (default,) = evaluate_run(rd, "r", base)
    (short,) = evaluate_run(rd, "r", replace(base, max_tokens=200))
    assert default["protocol_params"] == {} and short["protocol_params"] == {"max_tokens": 200}
    assert rd.record_path(short) != rd.record_path(default) and rd.record_path(short).name.endswith("-m200__L16.json")
    assert short["details"]["tokens_scored"] < default["details"]["tokens_scored"]
    assert json.loads(rd.record_path(default).read_text())["metrics"] == default["metrics"]  # not overwritten
    mark = {**short, "metrics": {**short["metrics"], "ppl": 1.0}}  # a mark: measuring again would replace it
    rd.write_record(mark)
    (again,) = evaluate_run(rd, "r", replace(base, max_tokens=200, skip_existing=True))
    assert again["metrics"]["ppl"] == 1.0  # the cell of that cap is there: not measured again
    (other,) = evaluate_run(rd, "r", replace(base, max_tokens=300, skip_existing=True))
    assert other["protocol_params"] == {"max_tokens": 300} and other["metrics"]["ppl"] != 1.0  # another: measured
    assert short["details"]["tokens_scored"] < other["details"]["tokens_scored"]
    assert sorted(records_frame(rd)["protocol"]) == ["nonoverlap", "nonoverlap-m200", "nonoverlap-m300"]
    # a task whose prompts never come from the stream (filler haystack) is measured alike under any cap: not keyed
    tasks = resolve_tasks("vt")
    vt = replace(base, lengths=[128], tasks=tasks, options=task_options(tasks, {"trials": "4"}))
    (plain,) = evaluate_run(rd, "r", vt)
    (capped,) = evaluate_run(rd, "r", replace(vt, max_tokens=200))
    assert "max_tokens" not in capped["protocol_params"] and rd.record_path(capped) == rd.record_path(plain)
    assert capped["metrics"] == plain["metrics"]


def test_a_record_names_the_training_behind_it_commit_tree_and_checkpoint(tmp_path, monkeypatch):
    """Every record names the commit its model trained at, whether that tree was clean and the checkpoint's SHA-256;
    a resumed run that trained at two commits names both; a run trained before pebench logged its segments says
    "not recorded" rather than guessing."""
    import hashlib
    import json

    from pebench import results as res
    from pebench.config import config_from_dict
    from pebench.eval.evaluate import EvalRequest, evaluate_run
    from pebench.train import TrainJob, train
    from support import micro

    monkeypatch.setattr(res, "git_commit", lambda: "a" * 40)
    monkeypatch.setattr(res, "git_clean", lambda: True)
    rd = res.ResultsDir(tmp_path / "res")
    train(TrainJob(config_from_dict(micro(train={"steps": 4}), name="micro"), rd, "r", device="cpu"))
    req = EvalRequest(lengths=[16], device="cpu", tasks=[], max_tokens=300)
    ckpt = hashlib.sha256((rd.run_dir("r") / res.CHECKPOINT).read_bytes()).hexdigest()
    (rec,) = evaluate_run(rd, "r", req)
    p = rec["provenance"]
    assert (p["train_commit"], p["train_tree_clean"], p["checkpoint_sha256"]) == ("a" * 40, True, ckpt)
    assert "train_commits" not in p
    log = rd.run_dir("r") / res.TRAINING_LOG
    first = json.loads(log.read_text())
    assert first["from_step"] == 0 and first["git_commit"] == "a" * 40
    log.write_text(log.read_text() + json.dumps({**first, "from_step": 2, "git_commit": "b" * 40, "git_clean": False}))
    p = res.training_provenance(rd.run_dir("r"))
    assert p["train_commit"] == "b" * 40 and p["train_commits"] == ["a" * 40, "b" * 40]
    assert p["train_tree_clean"] is False  # one segment's changed tree taints the run
    log.unlink()
    p = res.training_provenance(rd.run_dir("r"))
    assert p["train_commit"] == p["train_tree_clean"] == res.NOT_RECORDED and p["checkpoint_sha256"] == ckpt


def test_the_checkout_state_is_read_from_git(tmp_path, monkeypatch):
    """git_clean: True for a checkout whose tree is its commit, False once a file changes, None outside git."""
    import subprocess

    from pebench import results as res

    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "f").write_text("x")
    git("add", "-A")
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "c")
    monkeypatch.setattr(
        res, "_git", lambda *a: subprocess.run(["git", *a], cwd=tmp_path, capture_output=True, text=True).stdout
    )
    assert res.git_clean() is True and len(res.git_commit()) == 40
    (tmp_path / "f").write_text("y")
    assert res.git_clean() is False
    monkeypatch.setattr(res, "_git", lambda *a: None)
    assert res.git_clean() is None and res.git_commit() is None
