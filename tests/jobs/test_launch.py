"""Sweeps through submitit: the local launcher equals the sequential run, a Slurm array submitted to stand-in
sbatch/srun/sacct/scontrol runs, a preempted task is requeued and resumes bitwise, a failed task is named and a
rerun submits only what is not done, and --emit-sbatch writes a plain array script that runs."""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from pebench.jobs.launch import launch_options, packs, pending
from pebench.util.errors import UsageError
from support import micro, micro_file

pytest.importorskip("submitit")
FAKE = Path(__file__).parent.parent / "helpers" / "fake_slurm"
CFG = micro(train={"steps": 24, "batch_size": 8, "checkpoint_every": 4})
# The preempted run: ~1 s of training after its first checkpoint (the notice's trigger), twenty times the stand-in's
# poll, so the notice lands mid-training (24 steps left ~50 ms and it once landed after the last step).
LONG = micro(train={"steps": 400, "batch_size": 8, "checkpoint_every": 8})
ARGS = ["--lengths", "16,32", "--rope-scaling", "none,yarn"]


def stand_ins(tmp, extra_env=None) -> dict:
    """The environment of a command beside the stand-in Slurm commands (copied into ``tmp/bin``, executable
    wherever the checkout put them, and first on the PATH)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", FAKE_SLURM_DIR=str(tmp / "slurm"), **(extra_env or {}))
    fake = tmp / "bin"
    if not fake.exists():
        shutil.copytree(FAKE, fake)
        for p in fake.iterdir():
            p.chmod(0o755)
    env["PATH"] = f"{fake}{os.pathsep}{env['PATH']}"
    return env


def run(args, tmp, extra_env=None, timeout=300):
    return subprocess.run(
        [sys.executable, "-m", "pebench", *map(str, args)],
        capture_output=True,
        text=True,
        env=stand_ins(tmp, extra_env),
        timeout=timeout,
        cwd=tmp,
    )


def records(res: Path) -> dict:
    return {str(p.relative_to(res)): json.loads(p.read_text())["metrics"] for p in (res / "records").rglob("*.json")}


@pytest.fixture(scope="module")
def cfg(tmp_path_factory):
    return micro_file(tmp_path_factory, train=CFG["train"])


@pytest.fixture(scope="module")
def long_cfg(tmp_path_factory):
    return micro_file(tmp_path_factory, train=LONG["train"])


@pytest.fixture(scope="module")
def sequential(tmp_path_factory, cfg):
    tmp = tmp_path_factory.mktemp("seq")
    r = run(["run", "--pe", "rope,alibi", "--seeds", "0,1", "--config", cfg, "--results", tmp / "res", *ARGS], tmp)
    assert r.returncode == 0, r.stderr[-2000:]
    return tmp / "res"


def assert_same_records(a: Path, b: Path) -> None:
    ra, rb = records(a), records(b)
    assert set(ra) == set(rb) and len(ra) == 12
    for k in ra:
        assert ra[k]["ppl"] == pytest.approx(rb[k]["ppl"], rel=1e-6), k


def test_launch_options_are_typed_and_checked():
    o = launch_options({"partition": "cpu", "time_min": 30}, ["pack=3", "mem_gb=8", "time_min=45"])
    assert (o.partition, o.time_min, o.pack, o.mem_gb) == ("cpu", 45, 3, 8.0)
    for bad, msg in (
        (["bogus=1"], "unknown launcher option 'bogus'"),
        (["pack=x"], "pack must be int"),
        (["pack=0"], "must be >= 1"),
        (["pack"], "NAME=VALUE"),
    ):
        with pytest.raises(UsageError, match=msg):
            launch_options({}, bad)


def test_packs_keep_the_plan_order_and_pending_skips_done(tmp_path):
    files = [tmp_path / f"r{i}.json" for i in range(5)]
    assert packs(files, 2) == [[str(files[0]), str(files[1])], [str(files[2]), str(files[3])], [str(files[4])]]
    files[1].with_suffix(".done").write_text("")
    assert pending(files) == [files[0], files[2], files[3], files[4]]


def test_local_launcher_equals_the_sequential_run_and_a_rerun_submits_nothing(tmp_path, cfg, sequential):
    args = [
        "run",
        "--pe",
        "rope,alibi",
        "--seeds",
        "0,1",
        "--config",
        cfg,
        "--results",
        tmp_path / "res",
        *ARGS,
        "--launcher",
        "local",
        "--launcher-opt",
        "cpus_per_task=1",
        "--launcher-opt",
        "pack=2",
    ]
    r = run(args, tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "4 of 4 jobs pending, 2 array tasks" in r.stdout
    assert_same_records(tmp_path / "res", sequential)
    again = run(args, tmp_path)
    assert again.returncode == 0 and "0 of 4 jobs pending" in again.stdout


def test_slurm_array_through_stand_in_commands(tmp_path, cfg, sequential):
    r = run(
        [
            "run",
            "--pe",
            "rope,alibi",
            "--seeds",
            "0,1",
            "--config",
            cfg,
            "--results",
            tmp_path / "res",
            *ARGS,
            "--launcher",
            "slurm",
            "--launcher-opt",
            "pack=2",
            "--launcher-opt",
            "partition=cpu",
            "--launcher-opt",
            "time_min=30",
            "--launcher-opt",
            "cpus_per_task=1",
        ],
        tmp_path,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    (sub,) = [json.loads(x) for x in (tmp_path / "slurm" / "submitted.jsonl").read_text().splitlines()]
    f = sub["flags"]
    assert sub["tasks"] == 2 and f["array"] == "0-1%2" and f["partition"] == "cpu" and f["time"] == "30"
    assert f["cpus-per-task"] == "1" and f["signal"] == "USR2@120" and "submitit.core._submit" in sub["script"]
    assert_same_records(tmp_path / "res", sequential)


def test_a_preempted_task_is_requeued_and_resumes_bitwise(tmp_path, long_cfg):
    straight = tmp_path / "straight"
    r = run(["run", "--pe", "rope", "--config", long_cfg, "--results", straight, *ARGS], tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    res = tmp_path / "res"
    r = run(
        ["run", "--pe", "rope", "--config", long_cfg, "--results", res, *ARGS, "--launcher", "slurm"],
        tmp_path,
        {"FAKE_SLURM_PREEMPT": str(res / "runs" / "rope-micro-s0" / "checkpoint.pt")},
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert (tmp_path / "slurm" / "preempted").exists()
    log = "".join(p.read_text() for p in (res / "launcher").glob("*_log.out"))
    assert "interrupted by SIGUSR2 at step" in log and "Requeued job" in log
    step = int(log.split("interrupted by SIGUSR2 at step ")[1].split("/")[0])
    assert 8 <= step < 400
    curves = [(r / "runs" / "rope-micro-s0" / "metrics.jsonl").read_text().splitlines() for r in (res, straight)]
    loss, ref = ([json.loads(x)["loss"] for x in c] for c in curves)
    assert len(ref) == 400 and loss == ref  # resumed from the step it saved: the same curve as never interrupted
    mine, theirs = records(res), records(straight)
    assert len(mine) == 4 and mine == theirs


def test_a_failed_task_is_named_and_a_rerun_submits_only_it(tmp_path, cfg):
    res = tmp_path / "res"
    broken = res / "runs" / "alibi-micro-s0"
    broken.mkdir(parents=True)
    (broken / "checkpoint.pt").write_bytes(b"not a checkpoint")  # an interrupted run whose checkpoint is damaged
    (broken / "status.json").write_text(json.dumps({"state": "interrupted", "step": 1, "steps": 24}))
    args = [
        "run",
        "--pe",
        "rope,alibi",
        "--config",
        cfg,
        "--results",
        res,
        *ARGS,
        "--launcher",
        "local",
        "--launcher-opt",
        "cpus_per_task=1",
    ]
    r = run(args, tmp_path)
    assert r.returncode == 1
    line = [x for x in r.stderr.splitlines() if x.startswith("error: array task")]
    assert len(line) == 1 and "alibi-micro-s0 failed:" in line[0] and "checkpoint.pt" in line[0]
    assert (res / "jobs" / "rope-micro-s0.done").exists() and not (res / "jobs" / "alibi-micro-s0.done").exists()
    shutil.rmtree(broken)
    again = run(args, tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "1 of 2 jobs pending" in again.stdout


def test_emit_sbatch_writes_a_plain_array_script_that_runs(tmp_path, cfg):
    res = tmp_path / "res"
    r = run(
        [
            "run",
            "--pe",
            "rope,alibi,t5",
            "--config",
            cfg,
            "--results",
            res,
            *ARGS,
            "--emit-sbatch",
            tmp_path / "array.sh",
            "--launcher-opt",
            "pack=2",
            "--launcher-opt",
            "partition=cpu",
        ],
        tmp_path,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    script = (tmp_path / "array.sh").read_text()
    lines = (tmp_path / "array.sh.jobs").read_text().splitlines()
    assert "#SBATCH --array=0-1" in script and "#SBATCH --partition=cpu" in script and len(lines) == 2
    assert len(lines[0].split()) == 2 and all(x.endswith(".json") for x in " ".join(lines).split())
    assert "-m pebench job" in script and "scontrol requeue" in script and not (res / "records").exists()
    env = stand_ins(tmp_path)  # the stand-in sbatch, as a user would submit it
    out = subprocess.run(["sbatch", str(tmp_path / "array.sh")], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert out.stdout.startswith("Submitted batch job"), out.stderr
    deadline = time.time() + 240
    states = {}
    while time.time() < deadline:
        states = json.loads((tmp_path / "slurm" / "states.json").read_text())
        if all(s in ("COMPLETED", "FAILED") for s in states.values()):
            break
        time.sleep(0.5)
    assert states == {"1000_0": "COMPLETED", "1000_1": "COMPLETED"}
    assert len(records(res)) == 8 and len(list((res / "jobs").glob("*.done"))) == 3


def test_launcher_flags_that_do_not_fit_are_one_line(tmp_path, cfg):
    from pebench.jobs.launch import launch_plan

    for args, msg in (
        ((None, ["pack=2"], None, "tiny", None), "--launcher-opt needs --launcher"),
        (("pbs", None, None, "tiny", None), "--launcher must be one of local, slurm"),
        (("slurm", None, None, "tiny", "cpu:2"), "--workers and --launcher exclude each other"),
    ):
        with pytest.raises(UsageError, match=msg):
            launch_plan(*args)
    cfg_file = tmp_path / "c.yaml"
    cfg_file.write_text(yaml.safe_dump({**CFG, "launcher": {"partition": "gpu", "pack": 4}}))
    plan = launch_plan("slurm", ["pack=2"], None, str(cfg_file), None)
    assert (plan.options.partition, plan.options.pack) == ("gpu", 2)  # the config's section, then the flags
    r = run(["run", "--config", cfg_file, "--launcher", "bogus", "--results", tmp_path / "r"], tmp_path)
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "--launcher must be one of" in r.stderr


def test_slurm_without_slurm_is_one_line_before_any_job_file(tmp_path, cfg, monkeypatch):
    """No sbatch/srun on PATH: one line naming what is missing and the alternatives, exit 2, before any job file
    or 'jobs pending' line (it failed inside submitit after both)."""
    from pebench.cli import app
    from support import runner

    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    res = tmp_path / "res"
    r = runner.invoke(app, ["run", "--pe", "rope", "--config", str(cfg), "--results", str(res), "--launcher", "slurm"])
    assert r.exit_code == 2 and "sbatch and srun not found on PATH" in r.output and "pending" not in r.output
    assert not list(res.glob("jobs/*.json"))
