"""Nothing lost, nothing trusted blindly: kill and resume, unsafe checkpoints, divergence, locks."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from pebench.cli import app
from pebench.model.checkpoint import load_checkpoint
from pebench.util.errors import PebenchError
from pebench.util.fsutil import RunLock
from support import runner

SLOW = {
    "name": "slow",
    "model": {"d_model": 64, "n_layers": 2, "n_heads": 2, "d_mlp": 128, "context": 32},
    "train": {
        "steps": 40,
        "batch_size": 16,
        "lr": 0.003,
        "warmup": 2,
        "log_every": 1,
        "checkpoint_every": 4,
        "data": "sotu",
    },
    "eval": {"multiples": [1], "max_tokens": 400, "batch_tokens": 256},
}


def cli(*args, cwd=None, wait=True):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "pebench", *[str(a) for a in args]]
    if wait:
        return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd, timeout=300)
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd)


@pytest.fixture(scope="module")
def slow_cfg(tmp_path_factory):
    p = tmp_path_factory.mktemp("cfg") / "slow.yaml"
    p.write_text(yaml.safe_dump(SLOW))
    return p


@pytest.fixture(scope="module")
def straight(tmp_path_factory, slow_cfg):
    """The uninterrupted reference run (single-threaded, so resumed runs must match it bitwise)."""
    res = tmp_path_factory.mktemp("straight")
    r = cli("train", "--pe", "alibi", "--config", slow_cfg, "--results", res, "--name", "straight")
    assert r.returncode == 0, r.stderr
    return load_checkpoint(res / "runs" / "straight" / "checkpoint.pt")


def _start_and_signal(res, slow_cfg, name, sig):
    """Start a training, send ``sig`` at an arbitrary step past the first checkpoint, wait for the exit."""
    p = cli("train", "--pe", "alibi", "--config", slow_cfg, "--results", res, "--name", name, wait=False)
    log = res / "runs" / name / "metrics.jsonl"
    deadline = time.time() + 240
    while time.time() < deadline:
        if log.exists() and any(json.loads(x)["step"] >= 10 for x in log.read_text().splitlines() if x.strip()):
            break
        time.sleep(0.05)
    os.kill(p.pid, sig)
    _, err = p.communicate(timeout=120)
    return p.returncode, err


def _resume_matches(res, slow_cfg, name, straight):
    r = cli("train", "--pe", "alibi", "--config", slow_cfg, "--results", res, "--name", name)
    assert r.returncode == 2 and "--resume" in r.stderr  # no silent restart
    r = cli("train", "--pe", "alibi", "--config", slow_cfg, "--results", res, "--name", name, "--resume")
    assert r.returncode == 0, r.stderr
    b = load_checkpoint(res / "runs" / name / "checkpoint.pt")
    for k in straight["model"]:
        assert torch.equal(straight["model"][k], b["model"][k]), k
    steps = [json.loads(x)["step"] for x in (res / "runs" / name / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(1, 41))  # the log has each step once


def test_sigkill_then_resume_is_bitwise_identical(tmp_path, slow_cfg, straight):
    res = tmp_path / "res"
    _start_and_signal(res, slow_cfg, "killed", signal.SIGKILL)
    status = json.loads((res / "runs" / "killed" / "status.json").read_text())
    assert status["state"] == "running" and status["step"] < 40
    _resume_matches(res, slow_cfg, "killed", straight)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_saves_the_current_step_and_resumes_bitwise(tmp_path, slow_cfg, straight, sig):
    res = tmp_path / "res"
    code, err = _start_and_signal(res, slow_cfg, "stopped", sig)
    status = json.loads((res / "runs" / "stopped" / "status.json").read_text())
    ckpt = load_checkpoint(res / "runs" / "stopped" / "checkpoint.pt")
    assert code == 130, err
    assert status["state"] == "interrupted" and status["signal"] == sig.name
    assert 10 <= status["step"] < 40 and ckpt["step"] == status["step"]  # the step it stopped at, not the last
    steps = [json.loads(x)["step"] for x in (res / "runs" / "stopped" / "metrics.jsonl").read_text().splitlines()]
    assert steps[-1] == status["step"]
    errors = [x for x in err.strip().splitlines() if x.startswith("error:")]
    assert len(errors) == 1 and f"interrupted by {sig.name} at step {status['step']}/40" in errors[0], err
    assert "Traceback" not in err
    r = runner.invoke(app, ["list", "--results", str(res)])
    assert "stopped" in r.output and f"interrupted (step {status['step']}/40)" in r.output
    _resume_matches(res, slow_cfg, "stopped", straight)


class Evil:
    def __reduce__(self):
        return (Path.write_text, (Path(os.environ["PEBENCH_MARKER"]), "pwned"))


def _fake_run(res: Path, name: str, ckpt_bytes: bytes = None, obj=None):
    from pebench.config import Config

    folder = res / "runs" / name
    folder.mkdir(parents=True)
    cfg = Config()
    (folder / "config.yaml").write_text(yaml.safe_dump({**cfg.to_dict(), "run": {"name": name}}))
    (folder / "status.json").write_text(json.dumps({"state": "finished"}))
    if obj is not None:
        torch.save(obj, folder / "checkpoint.pt")
    else:
        (folder / "checkpoint.pt").write_bytes(ckpt_bytes)
    return folder


def test_malicious_pickle_is_refused_and_never_runs(tmp_path, monkeypatch):
    marker = tmp_path / "marker"
    monkeypatch.setenv("PEBENCH_MARKER", str(marker))
    res = tmp_path / "res"
    folder = _fake_run(res, "evil", obj={"model": Evil(), "config": {}})
    with pytest.raises(PebenchError, match="refusing to load"):
        load_checkpoint(folder / "checkpoint.pt")
    r = runner.invoke(app, ["eval", "--run", "evil", "--results", str(res)])
    assert r.exit_code != 0 and "refusing to load" in r.output and "Traceback" not in r.output
    assert not marker.exists()


def test_truncated_checkpoint_names_the_file(tmp_path):
    res = tmp_path / "res"
    good = tmp_path / "good.pt"
    torch.save({"model": {"w": torch.randn(100, 100)}, "config": {}}, good)
    folder = _fake_run(res, "cut", ckpt_bytes=good.read_bytes()[:5000])
    with pytest.raises(PebenchError, match="truncated or corrupted") as e:
        load_checkpoint(folder / "checkpoint.pt")
    assert "checkpoint.pt" in str(e.value)


def test_incompatible_checkpoint_names_the_difference(tmp_path, slow_cfg):
    res = tmp_path / "res"
    r = runner.invoke(
        app, ["train", "--pe", "rope", "--config", str(slow_cfg), "--steps", "4", "--results", str(res), "--name", "x"]
    )
    assert r.exit_code == 0, r.output
    cfg = yaml.safe_load((res / "runs" / "x" / "config.yaml").read_text())
    cfg["model"]["d_model"] = 32
    (res / "runs" / "x" / "config.yaml").write_text(yaml.safe_dump(cfg))
    r = runner.invoke(app, ["eval", "--run", "x", "--results", str(res)])
    assert r.exit_code == 1 and "model.d_model=64" in r.output


def test_nan_loss_stops_cleanly(tmp_path, slow_cfg):
    bad = yaml.safe_load(slow_cfg.read_text())
    bad["train"]["lr"] = 1e6
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(bad))
    res = tmp_path / "res"
    r = runner.invoke(app, ["train", "--pe", "rope", "--config", str(p), "--results", str(res)])
    assert r.exit_code == 1
    lines = [x for x in r.output.strip().splitlines() if "; about " not in x]  # a cost line on a slow machine
    assert len(lines) == 1 and "diverged" in lines[0] and "at step" in lines[0] and "Traceback" not in r.output
    st = json.loads((res / "runs" / "rope-slow-s0" / "status.json").read_text())
    assert st["state"] == "failed"
    if (res / "runs" / "rope-slow-s0" / "checkpoint.pt").exists():  # the last good one stays loadable
        ck = load_checkpoint(res / "runs" / "rope-slow-s0" / "checkpoint.pt")
        assert all(torch.isfinite(v).all() for v in ck["model"].values())


def test_lock_refuses_a_live_owner_and_takes_over_a_dead_one(tmp_path):
    lock = tmp_path / "run" / ".lock"
    lock.parent.mkdir()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        lock.write_text(str(sleeper.pid))
        with pytest.raises(PebenchError, match=f"locked by running process {sleeper.pid}"):
            RunLock(lock).acquire()
    finally:
        sleeper.kill()
        sleeper.wait()
    with RunLock(lock) as held:  # owner is gone: stale, taken over
        assert held.held and lock.read_text() == str(os.getpid())
    assert not lock.exists()


def test_two_trainings_of_one_run_refuse_each_other(tmp_path, slow_cfg):
    res = tmp_path / "res"
    # far more steps than the second process needs to start, even on a loaded machine (it is killed below)
    p = cli(
        "train",
        "--pe",
        "alibi",
        "--config",
        slow_cfg,
        "--steps",
        "100000",
        "--results",
        res,
        "--name",
        "same",
        wait=False,
    )
    lock = res / "runs" / "same" / ".lock"
    deadline = time.time() + 120
    while not lock.exists() and time.time() < deadline:
        time.sleep(0.05)
    r = cli(
        "train",
        "--pe",
        "alibi",
        "--config",
        slow_cfg,
        "--steps",
        "100000",
        "--results",
        res,
        "--name",
        "same",
        "--resume",
    )
    p.kill()
    p.wait()
    assert r.returncode == 1 and "locked by running process" in r.stderr


def test_concurrent_evals_keep_every_record(tmp_path, slow_cfg):
    res = tmp_path / "res"
    for name in ("a", "b"):  # trained in this process (two steps each): the evaluations are what run at once
        args = ["train", "--pe", "t5", "--config", slow_cfg, "--steps", "2", "--results", res, "--name", name]
        r = runner.invoke(app, [str(a) for a in args])
        assert r.exit_code == 0, r.output
    procs = [cli("eval", "--run", n, "--lengths", "16,32,64,128", "--results", res, wait=False) for n in ("a", "b")]
    procs.append(cli("eval", "--run", "a", "--lengths", "16,32,64,128", "--results", res, wait=False))
    assert [p.wait() for p in procs] == [0, 0, 0]
    recs = list((res / "records").rglob("*.json"))
    assert len(recs) == 8
    for p in recs:
        assert json.loads(p.read_text())["status"] == "ok"
    assert not list((res / "records").rglob("*.tmp"))


def test_atomic_write_leaves_old_file_on_failure(tmp_path):
    from pebench.util.fsutil import atomic_save

    target = tmp_path / "ckpt.pt"
    torch.save({"v": 1}, target)

    def crash(p):
        p.write_bytes(b"half")
        raise RuntimeError("killed mid-save")

    with pytest.raises(RuntimeError):
        atomic_save(target, crash)
    assert torch.load(target, weights_only=True) == {"v": 1}
    assert list(tmp_path.iterdir()) == [target]


def test_a_failed_write_names_the_file_and_why(tmp_path):
    """A full disk (torch.save's 'enforce fail', or ENOSPC) and a read-only folder are one WriteFailed line naming the
    destination (never the temp file) and what to do; the old file stays; an error of what the caller was reading
    is not called a failed write."""
    import errno

    from pebench.util.fsutil import WriteFailed, atomic_path, atomic_save

    target = tmp_path / "ckpt.pt"
    torch.save({"v": 1}, target)

    def full(p):
        raise RuntimeError("[enforce fail at inline_container.cc:672] . PytorchStreamWriter failed writing file")

    with pytest.raises(WriteFailed, match="no space left on the device") as e:
        atomic_save(target, full)
    assert str(target) in str(e.value) and ".tmp" not in str(e.value)
    assert torch.load(target, weights_only=True) == {"v": 1} and list(tmp_path.iterdir()) == [target]
    for no, why in ((errno.ENOSPC, "no space left"), (errno.EROFS, "read-only")):
        with pytest.raises(WriteFailed, match=why), atomic_path(target):
            raise OSError(no, os.strerror(no))
    with pytest.raises(FileNotFoundError), atomic_path(target):
        open(tmp_path / "missing-input.txt").read()


def test_training_on_a_full_disk_stops_with_one_line_and_is_not_left_running(tmp_path, slow_cfg, monkeypatch):
    """The checkpoint's write fails (the disk is full): one line naming the checkpoint and the step to resume from,
    exit 1, and the run's status says interrupted (it stayed "running")."""
    real = torch.save
    calls = []

    def full_after_one(obj, f, *a, **k):
        calls.append(f)
        if len(calls) > 1:
            raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 64 vs 0")
        return real(obj, f, *a, **k)

    monkeypatch.setattr(torch, "save", full_after_one)
    res = tmp_path / "res"
    r = runner.invoke(app, ["train", "--pe", "alibi", "--config", str(slow_cfg), "--results", str(res)])
    assert r.exit_code == 1 and "Traceback" not in r.output
    lines = [x for x in r.output.strip().splitlines() if "; about " not in x]
    assert len(lines) == 1 and "checkpoint.pt: no space left" in lines[0] and "at step 4" in lines[0], r.output
    st = json.loads((res / "runs" / "alibi-slow-s0" / "status.json").read_text())
    assert st["state"] == "interrupted" and st["step"] == 4
