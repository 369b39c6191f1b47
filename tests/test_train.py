"""train.py: the optimizer (fused, weight decay as the scheme decides), the precision a run trains and resumes in, the
induction warm-up's schedule, random training positions, and the stop signals the loop honours."""

import math
import os
import signal
import time
from dataclasses import replace

import pytest
import torch
import yaml

from pebench.config import ModelConfig, load_config
from pebench.model.decoder import DecoderLM
from pebench.results import ResultsDir
from pebench.train import sample_positions
from pebench.util.errors import UsageError


def test_the_optimizer_is_fused_on_the_cpu_and_takes_the_reference_step():
    """make_optimizer uses the fused AdamW kernel on the CPU too; its updates equal the reference (for-loop) AdamW's
    with the same groups (decay on matrices, none on norms) up to rounding, over several steps."""
    import torch

    from pebench.model.checkpoint import build_model
    from pebench.train import make_optimizer

    cfg = load_config("tiny")
    cfg = replace(cfg, model=replace(cfg.model, d_model=32, n_layers=2, d_mlp=64, context=16))
    torch.manual_seed(0)
    a, b = build_model(cfg), build_model(cfg)
    b.load_state_dict(a.state_dict())
    start = {k: v.clone() for k, v in a.state_dict().items()}
    opt = make_optimizer(a, cfg.train, torch.device("cpu"))
    assert opt.defaults["fused"] is True
    name_of = {id(p): n for n, p in a.named_parameters()}
    mine = dict(b.named_parameters())
    ref = torch.optim.AdamW(
        [
            {"params": [mine[name_of[id(p)]] for p in g["params"]], "weight_decay": g["weight_decay"]}
            for g in opt.param_groups
        ],
        lr=cfg.train.lr,
        betas=(cfg.train.beta1, cfg.train.beta2),
        foreach=False,
    )
    assert sum(len(g["params"]) for g in ref.param_groups) == len(mine)
    x = torch.randint(0, 256, (4, 16))
    for _ in range(5):
        for m, o in ((a, opt), (b, ref)):
            o.zero_grad()
            m(x, x)[1].backward()
            o.step()
    moved = max((a.state_dict()[k] - v).abs().max().item() for k, v in start.items())
    diff = max((a.state_dict()[k] - v).abs().max().item() for k, v in b.state_dict().items())
    assert diff < 1e-5 and moved > 1e-3


@pytest.mark.parametrize("precision, dtype", [("bf16", "bfloat16"), ("fp32", "float32")])
def test_training_runs_in_the_precision_it_records(tmp_path, precision, dtype):
    """A run's matmuls run in its precision (a forward hook sees their outputs), the run's config records the
    precision it used, and evaluation writes it into every record's provenance."""
    import torch

    from pebench.config import config_from_dict
    from pebench.eval.evaluate import EvalRequest, evaluate_run
    from pebench.train import TrainJob, train
    from support import micro

    cfg = config_from_dict(micro(train={"precision": precision}), name="micro")
    rd = ResultsDir(tmp_path)
    seen = set()
    real = torch.nn.Linear.forward

    def spy(self, x):
        out = real(self, x)
        seen.add(str(out.dtype).split(".")[1])
        return out

    torch.nn.Linear.forward = spy
    try:
        r = train(TrainJob(cfg, rd, "m", device="cpu"))
    finally:
        torch.nn.Linear.forward = real
    assert seen == {dtype} and r.final_loss == r.final_loss  # finite
    assert rd.run_config("m")[1]["precision"] == precision
    recs = evaluate_run(rd, "m", EvalRequest(lengths=[16], device="cpu", max_tokens=300))
    assert recs and all(x["provenance"]["train_precision"] == precision for x in recs)


def test_a_resumed_run_keeps_the_precision_it_started_in(tmp_path):
    import torch

    from pebench.train import _run_precision

    rd, cpu = ResultsDir(tmp_path), torch.device("cpu")
    folder = rd.run_dir("r")
    folder.mkdir(parents=True)
    base = load_config("tiny").to_dict()
    for meta, want in (({"precision": "bf16"}, "bf16"), ({"precision": "fp32"}, "fp32"), ({}, "fp32")):
        (folder / "config.yaml").write_text(yaml.safe_dump({**base, "run": {"name": "r", **meta}}))
        for requested in ("auto", "fp32", "bf16"):
            assert _run_precision(rd, "r", cpu, requested, resume=True) == want
    assert _run_precision(rd, "r", cpu, "bf16", resume=False) == "bf16"  # a new run resolves its own
    assert _run_precision(rd, "new", cpu, "fp32", resume=True) == "fp32"  # nothing to resume yet


def test_the_scheme_decides_weight_decay_on_its_tables():
    from pebench.train import make_optimizer

    def decayed_names(pe, options=None):
        cfg = ModelConfig(
            d_model=16, n_layers=1, n_heads=2, d_mlp=32, context=8, pe=pe, pe_options={pe: options} if options else {}
        )
        model = DecoderLM(cfg)
        opt = make_optimizer(
            model, type("T", (), {"lr": 1e-3, "beta1": 0.9, "beta2": 0.95, "weight_decay": 0.1})(), torch.device("cpu")
        )
        ids = {id(p) for p in opt.param_groups[0]["params"]}
        assert opt.param_groups[0]["weight_decay"] == 0.1 and opt.param_groups[1]["weight_decay"] == 0.0
        assert len(ids) + len(opt.param_groups[1]["params"]) == len(list(model.parameters()))
        return {n for n, p in model.named_parameters() if id(p) in ids}

    assert "pe.table" not in decayed_names("learned")
    assert "pe.table" in decayed_names("learned", {"weight_decay": True})
    assert "pe.table" not in decayed_names("t5")
    assert {"pe.a_k", "pe.a_v"} <= decayed_names("shaw")
    base = decayed_names("none")
    assert "blocks.0.attn.qkv.weight" in base and "ln_f.weight" not in base


def test_induction_warm_up_has_its_own_data_and_schedule():
    from pebench.config import load_config
    from pebench.train import lr_at, needle_settings

    cfg = load_config("context")
    base_hash = load_config("tiny").hash()
    tc = cfg.train
    tc.steps, tc.induction_steps, tc.warmup, tc.lr, tc.min_lr_ratio = 300, 100, 10, 1.0, 0.1
    assert needle_settings(tc, 99) == (1.0, [4, 16], {"pairs": 1})
    assert needle_settings(tc, 100) == (
        0.5,
        [16, 32],
        {"passkey": 1, "copy": 2, "pairs": 2, "niah": 1, "vt": 1, "mqar": 1},
    )
    # the warm-up: linear warmup, then lr held; the language-model phase starts its warmup and cosine afresh
    assert lr_at(0, tc) == pytest.approx(0.1) and lr_at(9, tc) == pytest.approx(1.0)
    assert lr_at(50, tc) == lr_at(99, tc) == pytest.approx(1.0)
    assert lr_at(100, tc) == pytest.approx(0.1) and lr_at(109, tc) == pytest.approx(1.0)
    assert lr_at(299, tc) == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 189 / 190)))
    tc.induction_kinds = {"pairs": 3, "alternate": 1}
    assert needle_settings(tc, 0) == (1.0, [4, 16], {"pairs": 3, "alternate": 1})
    tc.induction_steps = 0
    assert lr_at(100, tc) == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 90 / 290)))
    tiny = load_config("tiny")
    assert tiny.hash() == base_hash  # the key is out of the hash while off: older runs keep their names
    tiny.train.induction_steps = 50
    warm = tiny.hash()
    assert warm != base_hash
    tiny.train.induction_kinds = {"pairs": 1, "alternate": 1}
    assert tiny.hash() != warm
    tiny.train.induction_steps = tiny.train.steps
    with pytest.raises(UsageError, match="induction_steps must be 0"):
        tiny.validate()


def test_random_positions_are_sorted_distinct_below_m_and_reproducible():
    for step in range(20):
        p = sample_positions(3, step, 16, 100, "cpu")
        assert p.shape == (16,) and (p[1:] > p[:-1]).all() and p.min() >= 0 and p.max() < 100
        assert torch.equal(p, sample_positions(3, step, 16, 100, "cpu"))
    assert not torch.equal(sample_positions(3, 0, 16, 100, "cpu"), sample_positions(3, 1, 16, 100, "cpu"))


def test_stop_request_flags_the_first_signal_and_raises_on_a_second_sigint():
    from pebench.train import StopRequest

    got = []
    before = signal.signal(signal.SIGTERM, lambda s, f: got.append(s))
    try:
        with pytest.raises(KeyboardInterrupt):
            with StopRequest() as stop:
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.01)
                assert stop.signal == "SIGTERM"
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.01)
        assert signal.getsignal(signal.SIGTERM) is not stop._handle and got == []  # restored; honoured, not resent
    finally:
        signal.signal(signal.SIGTERM, before)


def test_a_signal_the_loop_did_not_honour_is_handed_on_when_it_ends():
    """A notice that lands during the last step (the loop never looks again) reaches the handler it displaced once
    the block ends, so a scheduler's USR2 still requeues the task; a block that ended on it does not resend it."""
    from pebench.train import StopRequest, TrainingInterrupted

    got = []
    before = signal.signal(signal.SIGUSR2, lambda s, f: got.append(s))
    try:
        with StopRequest() as stop:
            signal.raise_signal(signal.SIGUSR2)
            assert stop.signal == "SIGUSR2" and got == []  # held while training
        assert got == [signal.SIGUSR2]
        with pytest.raises(TrainingInterrupted):
            with StopRequest():
                signal.raise_signal(signal.SIGUSR2)
                raise TrainingInterrupted("stopped", "SIGUSR2")
        assert got == [signal.SIGUSR2]
    finally:
        signal.signal(signal.SIGUSR2, before)


def test_a_resumed_runs_wall_time_counts_every_segment(tmp_path, monkeypatch):
    """The checkpoint carries the training seconds spent so far, so a run stopped and resumed records its whole
    training time in its status (``wall_s``), this invocation's part apart (``segment_s``, what a profile counts)
    and the step it resumed from. A fake clock moves 10 s per step."""
    import types

    from pebench import train as train_mod
    from pebench.config import config_from_dict
    from pebench.model.checkpoint import load_checkpoint
    from support import micro

    clock = [1000.0]
    monkeypatch.setattr(train_mod, "time", types.SimpleNamespace(time=lambda: clock[0]))
    cfg = config_from_dict(micro(train={"steps": 6, "checkpoint_every": 100}), name="micro")
    rd = ResultsDir(tmp_path)

    def tick(done, steps, loss, tps):
        clock[0] += 10.0
        if done == 2 and not (rd.run_dir("m") / train_mod.CHECKPOINT).exists():
            os.kill(os.getpid(), signal.SIGTERM)  # honoured after the next step: stopped at step 3

    with pytest.raises(train_mod.TrainingInterrupted):
        train_mod.train(train_mod.TrainJob(cfg, rd, "m", device="cpu", progress=tick))
    ckpt = load_checkpoint(rd.run_dir("m") / train_mod.CHECKPOINT)
    assert ckpt["step"] == 3 and ckpt["wall_s"] == pytest.approx(30.0)
    r = train_mod.train(train_mod.TrainJob(cfg, rd, "m", device="cpu", resume=True, progress=tick))
    st = rd.status("m")
    assert st["resumed_from"] == 3 and st["segment_s"] == pytest.approx(30.0)
    assert st["wall_s"] == pytest.approx(60.0) and r.wall_s == pytest.approx(60.0) and st["wall_known"] is True
    # a checkpoint from before pebench recorded it: the wall time is this segment's, and says so
    ckpt = load_checkpoint(rd.run_dir("m") / train_mod.CHECKPOINT)
    ckpt.pop("wall_s")
    ckpt["step"] = 4
    torch.save(ckpt, rd.run_dir("m") / train_mod.CHECKPOINT)
    rd.set_status("m", state="interrupted", step=4, steps=6)
    train_mod.train(train_mod.TrainJob(cfg, rd, "m", device="cpu", resume=True, progress=tick))
    st = rd.status("m")
    assert st["resumed_from"] == 4 and st["wall_s"] == pytest.approx(20.0) and st["wall_known"] is False


def test_training_into_a_committed_result_set_is_refused_before_anything_is_written(tmp_path):
    """A folder with a claims file is a committed set: `train` (and `run`) refuse it in one line and create no
    runs/ or cache/ inside it."""
    from support import invoke, write_micro

    committed = tmp_path / "set"
    committed.mkdir()
    (committed / "claims.yaml").write_text("claims: []\n")
    cfg = write_micro(tmp_path)
    for cmd in (["train", "--pe", "rope"], ["run", "--pe", "rope"]):
        r = invoke(*cmd, "--config", cfg, "--steps", "2", "--results", committed)
        assert r.exit_code != 0 and "in the committed result set" in r.output and "Traceback" not in r.output, r.output
    assert sorted(p.name for p in committed.iterdir()) == ["claims.yaml"]
