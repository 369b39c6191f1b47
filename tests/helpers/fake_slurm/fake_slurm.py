#!/usr/bin/env python3
"""Stand-ins for Slurm's sbatch, srun, sacct and scontrol that run a job array on this machine, for the launcher's
tests. State lives in $FAKE_SLURM_DIR: submitted.jsonl (each submission: its flags and script), states.json
(JobID -> PENDING | RUNNING | COMPLETED | FAILED), requeue/ (markers written by `scontrol requeue`), pids/.

sbatch returns at once ("Submitted batch job N") and a detached runner plays the array: each task runs the script
with the SLURM_* variables a real task gets, one after another; a task requeued while running runs again
(SLURM_RESTART_COUNT + 1). With FAKE_SLURM_PREEMPT=GLOB, the runner sends the task's process USR2 (Slurm's notice
before a time limit, as --signal=USR2@N asks) once, as soon as a file matching GLOB exists."""

import glob
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

D = Path(os.environ.get("FAKE_SLURM_DIR", "/tmp/fake_slurm"))


def _states() -> dict:
    p = D / "states.json"
    return json.loads(p.read_text()) if p.exists() else {}


def _set_state(jid: str, state: str) -> None:
    s = _states()
    s[jid] = state
    tmp = D / f".states.{os.getpid()}"
    tmp.write_text(json.dumps(s))
    os.replace(tmp, D / "states.json")


def _flags(script: str) -> dict:
    out = {}
    for line in script.splitlines():
        m = re.match(r"#SBATCH\s+--([\w-]+)(?:=(.*))?", line)
        if m:
            out[m.group(1)] = m.group(2) if m.group(2) is not None else True
    return out


def _expand(path: str, a: str, i: int, jid: str) -> str:
    return path.replace("%A", a).replace("%a", str(i)).replace("%j", jid).replace("%t", "0")


def _jid(a: str, i: int, flags: dict) -> str:
    return f"{a}_{i}" if "array" in flags else a


def sbatch(argv: list) -> None:
    D.mkdir(parents=True, exist_ok=True)
    script = Path([x for x in argv if not x.startswith("-")][-1]).resolve()
    text = script.read_text()
    flags = _flags(text)
    counter = D / "counter"
    a = str(int(counter.read_text()) + 1 if counter.exists() else 1000)
    counter.write_text(a)
    lo, hi = (flags.get("array") or "0-0").split("%")[0].split("-")
    tasks = list(range(int(lo), int(hi) + 1))
    with open(D / "submitted.jsonl", "a") as f:
        f.write(json.dumps({"job": a, "flags": flags, "script": text, "tasks": len(tasks)}) + "\n")
    for i in tasks:
        _set_state(_jid(a, i, flags), "PENDING")
    subprocess.Popen(
        [sys.executable, __file__, "--run-array", a, str(script), ",".join(map(str, tasks))],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=os.getcwd(),
    )
    print(f"Submitted batch job {a}")


def run_array(a: str, script: str, tasks: str) -> None:
    flags = _flags(Path(script).read_text())
    preempt = os.environ.get("FAKE_SLURM_PREEMPT")
    for i in map(int, tasks.split(",")):
        restarts = 0
        while True:
            jid = _jid(a, i, flags)
            env = dict(
                os.environ,
                SLURM_JOB_ID=str(int(a) * 100 + i) if "array" in flags else a,
                SLURM_PROCID="0",
                SLURM_LOCALID="0",
                SLURM_NODEID="0",
                SLURM_NTASKS="1",
                SLURM_JOB_NUM_NODES="1",
                SLURM_JOB_NODELIST="fakenode",
                SLURM_RESTART_COUNT=str(restarts),
            )
            if "array" in flags:
                env.update(SLURM_ARRAY_JOB_ID=a, SLURM_ARRAY_TASK_ID=str(i))
            out = _expand(str(flags.get("output", f"slurm-{a}_{i}.out")), a, i, jid)
            Path(out).parent.mkdir(parents=True, exist_ok=True)
            _set_state(jid, "RUNNING")
            with open(out, "a") as log:
                p = subprocess.Popen(["bash", script], env=env, stdout=log, stderr=subprocess.STDOUT)
                while p.poll() is None:
                    if preempt and glob.glob(preempt):
                        pid_file = D / "pids" / jid
                        if pid_file.exists():
                            os.kill(int(pid_file.read_text()), signal.SIGUSR2)
                            preempt = None
                            (D / "preempted").write_text(jid)
                    time.sleep(0.01)
            marker = D / "requeue" / jid
            if marker.exists():
                marker.unlink()
                restarts += 1
                _set_state(jid, "REQUEUED")
                continue
            _set_state(jid, "COMPLETED" if p.returncode == 0 else "FAILED")
            break


def srun(argv: list) -> None:
    """Run the command with --output/--error substituted, after writing this process's pid (the task's)."""
    out = err = None
    rest = list(argv)
    while rest and rest[0].startswith("-"):
        opt = rest.pop(0)
        if opt in ("--output", "--error"):
            val = rest.pop(0)
            if opt == "--output":
                out = val
            else:
                err = val
    a, i = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID", "0")
    jid = f"{a}_{i}" if a else os.environ["SLURM_JOB_ID"]
    a = a or jid
    if "submitit.core._submit" in " ".join(rest):  # submitit moves the task's pickle in after sbatch returns
        folder = Path(_expand(rest[-1], a, int(i), jid))
        deadline = time.time() + 30
        while not (folder / f"{jid}_submitted.pkl").exists() and time.time() < deadline:
            time.sleep(0.05)
    (D / "pids").mkdir(parents=True, exist_ok=True)
    (D / "pids" / jid).write_text(str(os.getpid()))
    if out:
        fd = os.open(_expand(out, a, int(i), jid), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 1)
    if err:
        fd = os.open(_expand(err, a, int(i), jid), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 2)
    os.execvp(rest[0], rest)


def sacct(argv: list) -> None:
    ids = [argv[k + 1] for k, x in enumerate(argv) if x == "-j"]
    print("JobID|State|NodeList")
    for jid, state in sorted(_states().items()):
        if jid.split("_")[0] in ids or jid in ids:
            print(f"{jid}|{state}|fakenode")


def scontrol(argv: list) -> None:
    if argv[:1] == ["requeue"]:
        (D / "requeue").mkdir(parents=True, exist_ok=True)
        (D / "requeue" / argv[1]).write_text("")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--run-array"]:
        run_array(*sys.argv[2:5])
    elif sys.argv[1:2] == ["--as"]:  # the wrappers: sbatch, srun, sacct, scontrol
        {"sbatch": sbatch, "srun": srun, "sacct": sacct, "scontrol": scontrol}[sys.argv[2]](sys.argv[3:])
