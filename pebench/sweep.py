"""Run the independent jobs of a sweep (schemes x seeds) in parallel, one worker per device.

Each job is ``pebench train --resume`` followed by ``pebench eval`` in a subprocess pinned to its
device, so a crash in one job cannot take the others down and an interrupted sweep resumes where it
stopped (finished runs and existing records are skipped).
"""
from __future__ import annotations

import os
import queue
from contextlib import nullcontext
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

from .errors import UsageError
from .results import ResultsDir


@dataclass
class Job:
    name: str
    scheme: str
    seed: int
    train_args: list[str]
    eval_args: list[str]
    state: str = "queued"
    device: str = ""
    error: str = ""
    log: list[str] = field(default_factory=list)


def plan_runs(base, schemes: list[str], seeds: list[int]) -> list:
    """(run name, config) for every scheme x seed, each with its scheme's learning rate from
    ``train.lr_by_scheme`` (else ``train.lr``); scheme options are validated before anything runs."""
    from dataclasses import replace

    from .pe import SCHEMES, SOURCES
    from .train import build_model

    for name in base.train.lr_by_scheme:
        SCHEMES.get(name)  # a typo in a tuned overlay is an error, not a silently untuned scheme
    out = []
    for s in schemes:
        for sd in seeds:
            lr = float(base.train.lr_by_scheme.get(s, base.train.lr))
            cfg = replace(base, model=replace(base.model, pe=s, pe_source=SOURCES.get(s, "")),
                          train=replace(base.train, seed=sd, lr=lr)).validate()
            build_model(cfg)
            out.append((f"{s}-{cfg.name}-s{sd}", cfg))
    return out


TRAIN_FLAGS = ("--config", "--overlay", "--steps", "--data", "--text-field", "--compile", "--needles")
EVAL_FLAGS = ("--lengths", "--max-tokens", "--task", "--trials", "--protocol", "--stride")


def _flags(opts: dict, names: tuple) -> list[str]:
    """Command-line flags for the options that were given (None: not given; lists repeat the flag)."""
    out = []
    for flag in names:
        val = opts.get(flag)
        if val is None or val == [] or val == ():
            continue
        if isinstance(val, bool):
            out.append(flag if val else flag.replace("--", "--no-", 1))
        else:
            for v in val if isinstance(val, (list, tuple)) else [val]:
                out += [flag, str(v)]
    return out


def jobs_for(plan: list, results, opts: dict, scalings: list[str], split: str, overwrite: bool) -> list[Job]:
    """One ``train`` + ``eval`` job per planned run, for workers that run them as subprocesses."""
    from .pe import SCHEMES

    common = ["--results", str(results)]
    jobs = []
    for name, cfg in plan:
        s, sd = cfg.model.pe, cfg.train.seed
        targs = ["train", "--pe", cfg.model.pe_source or s, "--seed", str(sd), *_flags(opts, TRAIN_FLAGS), *common,
                 "--overwrite" if overwrite else "--resume"]
        eargs = ["eval", "--run", name, "--split", split, *_flags(opts, EVAL_FLAGS), *common]
        own = SCHEMES.get(s).variants()
        mine = own if scalings == ["all"] else [v for v in scalings if v in own]
        if mine:
            eargs += ["--rope-scaling", ",".join(mine)]
        jobs.append(Job(name, s, sd, targs, eargs))
    return jobs


def parse_devices(spec: str) -> list[str]:
    """'auto' (every GPU, else one CPU worker), '0,1,3' (GPU indices) or 'cpu:N' (N CPU workers)."""
    import torch

    if spec == "auto":
        n = torch.cuda.device_count()
        return [f"cuda:{i}" for i in range(n)] if n else ["cpu"]
    if spec.startswith("cpu"):
        try:
            n = int(spec.split(":", 1)[1]) if ":" in spec else 1
        except ValueError:
            n = 0
        if n < 1:
            raise UsageError(f"--devices cpu:N needs N >= 1, got {spec!r}")
        return ["cpu"] * n
    try:
        ids = [int(x) for x in spec.split(",")]
    except ValueError:
        raise UsageError(f"--devices must be auto, cpu:N or GPU indices like 0,1,2; got {spec!r}")
    if len(set(ids)) != len(ids) or any(i < 0 for i in ids):
        raise UsageError(f"--devices lists an invalid or repeated GPU index: {spec!r}")
    if ids and max(ids) >= torch.cuda.device_count():
        raise UsageError(f"--devices {spec}: only {torch.cuda.device_count()} CUDA device(s) visible")
    return [f"cuda:{i}" for i in ids]


def _env_for(device: str, workers: int) -> dict:
    env = dict(os.environ)
    if device.startswith("cuda:"):
        env["CUDA_VISIBLE_DEVICES"] = device.split(":")[1]
    else:  # share the cores between CPU workers instead of oversubscribing them
        env["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // workers))
    return env


def _run_job(job: Job, device: str, workers: int) -> None:
    dev = "cuda" if device.startswith("cuda") else "cpu"
    env = _env_for(device, workers)
    job.device = device
    for phase, args in (("training", job.train_args), ("evaluating", job.eval_args)):
        job.state = phase
        cmd = [sys.executable, "-m", "pebench", *args, "--device", dev]
        p = subprocess.run(cmd, env=env, capture_output=True, text=True)
        job.log.append(p.stdout + p.stderr)
        if p.returncode != 0:
            lines = [x for x in (p.stderr or p.stdout).strip().splitlines() if x.strip()]
            job.state, job.error = "failed", (lines[-1] if lines else f"exit {p.returncode}")
            return
    job.state = "done"


def run_sweep(jobs: list[Job], devices: list[str], results: ResultsDir, show: bool = True) -> list[Job]:
    """Run jobs on the workers; a rich table shows every job's state and training step."""
    q: "queue.Queue[Job]" = queue.Queue()
    for j in jobs:
        q.put(j)

    def worker(device: str) -> None:
        while True:
            try:
                job = q.get_nowait()
            except queue.Empty:
                return
            _run_job(job, device, len(devices))

    threads = [threading.Thread(target=worker, args=(d,), daemon=True) for d in devices]
    for t in threads:
        t.start()
    from rich.live import Live
    from rich.table import Table

    def view() -> Table:
        t = Table(title=f"sweep: {len(jobs)} jobs on {len(devices)} worker(s)")
        for col in ("run", "device", "state", "step"):
            t.add_column(col)
        for j in jobs:
            st = results.status(j.name)
            t.add_row(j.name, j.device, j.state if not j.error else f"failed: {j.error}",
                      f"{st.get('step', 0)}/{st.get('steps', '?')}")
        return t

    with Live(view(), refresh_per_second=2, transient=False, redirect_stdout=False) if show else nullcontext() as live:
        while any(t.is_alive() for t in threads):
            time.sleep(0.5)
            if show:
                live.update(view())
        if show:
            live.update(view())
    return jobs
