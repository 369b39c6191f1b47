"""Running the jobs a plan made: in this process, or in parallel worker processes, one per device.

A job is one run: train it (resuming what was interrupted, skipping what is finished), then evaluate it; on
workers, a job of the first waves runs as its training and then shares of its evaluation (``split_evaluations``).
For a worker the parent writes the resolved job (the run's full config and the evaluation request) to a file, and
the worker runs ``pebench job FILE``: it reads that file and plans nothing, so a worker can never plan differently
from its parent. A crash in one job cannot take the others down, and an interrupted sweep resumes where it stopped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Optional

from ..config import Config, config_from_dict
from ..eval.evaluate import EvalRequest, eval_lengths, evaluate_run
from ..eval.scoring import Protocol
from ..eval.tasks import TASKS
from ..model.pe.rope import canonical_variant
from ..results import ResultsDir
from ..util.errors import PebenchError, UsageError
from ..util.fsutil import atomic_write_json
from ..util.parsing import parse_list
from ..util.progress import Reporter
from .plan import variants_for
from .training import train_run

JOBS = "jobs"  # RESULTS/jobs/NAME.json: the resolved jobs handed to workers


def request_dict(req: EvalRequest) -> dict:
    """An evaluation request as plain data (tasks by name)."""
    tasks, options = req.resolved_tasks()
    d = {f.name: getattr(req, f.name) for f in fields(req) if f.name not in ("protocol", "tasks", "options")}
    return {**d, "protocol": asdict(req.protocol), "tasks": [t.name for t in tasks], "options": options}


def request_from_dict(d: dict) -> EvalRequest:
    return EvalRequest(**{**d, "protocol": Protocol(**d["protocol"]), "tasks": [TASKS.get(n) for n in d["tasks"]]})


def write_job(results: ResultsDir, name: str, cfg: Config, req: EvalRequest, overwrite: bool) -> Path:
    """The job file a worker runs: the run's resolved config and this run's evaluation request."""
    sc = variants_for(cfg, list(req.variants), explicit=False)
    spec = {
        "name": name,
        "results": str(results.root),
        "overwrite": overwrite,
        "config": cfg.to_dict(),
        "eval": request_dict(replace(req, variants=sc)),
    }
    path = results.root / JOBS / f"{name}.json"
    atomic_write_json(path, spec)
    return path


def read_job(path: Path) -> tuple[ResultsDir, str, Config, EvalRequest, bool]:
    return _unpack(_read_spec(path))


def _read_spec(path: Path) -> dict:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise UsageError(f"job file {path} cannot be read: {e}") from e


def _unpack(spec: dict) -> tuple[ResultsDir, str, Config, EvalRequest, bool]:
    return ResultsDir(spec["results"]), spec["name"], _config(spec), request_from_dict(spec["eval"]), spec["overwrite"]


def _config(spec: dict) -> Config:
    return config_from_dict(spec["config"], name=spec["config"].get("name", "custom"))


def evaluate_runs(rd: ResultsDir, runs: list[str], req: EvalRequest, explicit: bool, reporter: Reporter) -> int:
    """Evaluate each run (its scheme's variants only, unless they were asked for ``explicit``ly); a run that
    fails is reported through ``reporter.error`` and the others go on. Scalings named for a mix of runs apply to
    the RoPE runs, and the others are evaluated as trained, with a note; named for runs none of which can take
    them, each is an error. Returns the number of failures."""
    failures = 0
    own = {run: variants_for(rd.run_config(run)[0], list(req.variants), explicit) for run in runs}
    some_take_them = any(sc for sc in own.values())
    as_trained_asked = any(canonical_variant(v) == "default" for v in req.variants)  # --rope-scaling none,...
    for run in runs:
        cfg, _ = rd.run_config(run)
        sc = own[run]
        if sc is None and (some_take_them or as_trained_asked):
            skipped = ", ".join(v for v in req.variants if canonical_variant(v) != "default")
            reporter.warn(
                f"note: run {run!r} uses {cfg.model.pe!r}, which has no RoPE scaling: evaluated as trained"
                + (f" ({skipped} skipped)" if skipped else "")
            )
            sc = []
        elif sc is None:
            reporter.error(
                f"run {run!r} uses {cfg.model.pe!r}: --rope-scaling applies to the RoPE family only (add none to"
                " evaluate it as trained)"
            )
            failures += 1
            continue
        try:
            evaluate_run(rd, run, replace(req, variants=sc), reporter)
        except UsageError:
            raise
        except PebenchError as e:
            reporter.error(f"{run}: {e}")
            failures += 1
    return failures


@dataclass
class Job:
    name: str
    scheme: str
    seed: int
    spec: Path
    cost: float = 0.0  # expected work (job_cost: training FLOPs x (1 + 0.1 per variant)): the longest start first
    threads: int = 0  # CPU threads of the job (0: the worker's share); fixed by the plan, never by timing
    last_wave: bool = False  # starts once every other job is done, with the cores the others leave
    run: str = ""  # the run it trains or evaluates ("": its name)
    after: Optional["Job"] = None  # starts once this one is done (an evaluation share, after its run's training)
    state: str = "queued"
    device: str = ""
    error: str = ""
    log: list[str] = field(default_factory=list)


def job_cost(cfg: Config, req: EvalRequest) -> float:
    """Expected work of a job: its training FLOPs, times 1 + 0.1 per evaluation variant (at least one: RoPE's six cost
    more)."""
    from ..model.checkpoint import train_flops
    from ..model.patterns import model_variants

    variants = variants_for(cfg, list(req.variants), explicit=False) or []
    n = len(model_variants(cfg.model)) if variants == ["all"] else len(variants)
    return train_flops(cfg) * (1 + 0.1 * max(1, n))


def jobs_for(rd: ResultsDir, runs: list, req: EvalRequest, overwrite: bool) -> list[Job]:
    """One job per planned run (name, config), its resolved file written for the worker; the longest first."""
    jobs = [
        Job(name, cfg.model.pe, cfg.train.seed, write_job(rd, name, cfg, req, overwrite), job_cost(cfg, req))
        for name, cfg in runs
    ]
    return sorted(jobs, key=lambda j: -j.cost)  # stable: equal costs keep the plan's order


def assign_threads(jobs: list[Job], workers: int, cores: int) -> list[Job]:
    """CPU jobs in waves of one job per worker, each with cores // workers threads; the last k < workers jobs (the
    cheapest) form a final wave that starts when every other job is done, with cores // k threads each. A job's
    thread count (which changes its floating-point results) is so a function of the plan alone, never of timing."""
    k = len(jobs) % workers
    for i, j in enumerate(jobs):
        j.last_wave = k > 0 and i >= len(jobs) - k
        j.threads = max(1, cores // (k if j.last_wave else workers))
    return jobs


def split_evaluations(jobs: list[Job]) -> list[Job]:
    """Each job of the first waves as its training, then its evaluation in two shares (the longest length, and the
    others), each share a job of its own that starts once the training is done: shares of every run fill the
    cores the last trainings leave, where whole jobs left a core idle until the longest finished. A share runs
    with its training's threads and measures exactly what the whole job would (``EvalRequest.only_lengths``). Jobs
    of the last wave, and jobs with one length, stay whole. Trainings come first, then the shares, costliest first."""
    from ..model.checkpoint import train_flops

    trains, shares, last = [], [], []
    for job in jobs:
        spec = _read_spec(job.spec)
        cfg = _config(spec)
        lengths = eval_lengths(cfg, spec["eval"].get("lengths"))
        if job.last_wave or len(lengths) < 2:
            (last if job.last_wave else trains).append(job)
            continue
        train = replace(job, spec=_part_file(job.spec, spec, "train", None), cost=train_flops(cfg), log=[])
        trains.append(train)
        for part in ([max(lengths)], sorted(set(lengths) - {max(lengths)})):
            name = f"{job.name} eval L={','.join(map(str, part))}"
            share = (job.cost - train.cost) * sum(part) / sum(lengths)
            shares.append(
                replace(
                    job,
                    name=name,
                    run=job.name,
                    spec=_part_file(job.spec, spec, "eval", part),
                    cost=share,
                    after=train,
                    log=[],
                )
            )
    return trains + sorted(shares, key=lambda j: -j.cost) + last


def _part_file(path: Path, spec: dict, part: str, lengths: Optional[list]) -> Path:
    """A job file for one part of a job: its training alone, or the evaluation of ``lengths`` alone."""
    tag = part if lengths is None else f"eval-{'-'.join(map(str, lengths))}"
    out = {
        **spec,
        "train": part == "train",
        "evaluate": part == "eval",
        "eval": {**spec["eval"], "only_lengths": lengths},
    }
    dest = Path(path).with_name(f"{Path(path).stem}.{tag}.json")
    atomic_write_json(dest, out)
    return dest


def parse_devices(spec: str) -> list[str]:
    """'auto' (every GPU, else one CPU worker), '0,1,3' (GPU indices) or 'cpu:N' (N CPU workers); 'local' (this
    process) is run_all's."""
    import torch

    if spec == "auto":
        n = torch.cuda.device_count()
        return [f"cuda:{i}" for i in range(n)] if n else ["cpu"]
    if spec.startswith("cpu"):
        (n,) = parse_list(spec.split(":", 1)[1] if ":" in spec else "1", "--workers cpu:N", int, lo=1)
        return ["cpu"] * n
    ids = parse_list(spec, "--workers (auto, cpu:N or GPU indices like 0,1,2)", int, lo=0)
    if max(ids) >= torch.cuda.device_count():
        raise UsageError(f"--workers {spec}: only {torch.cuda.device_count()} CUDA device(s) visible")
    return [f"cuda:{i}" for i in ids]


def _env_for(device: str, job: Job) -> dict:
    env = dict(os.environ)
    if device.startswith("cuda:"):
        env["CUDA_VISIBLE_DEVICES"] = device.split(":")[1]
    else:  # the job's share of the cores, fixed by the plan (assign_threads)
        env["OMP_NUM_THREADS"] = str(job.threads or 1)
    return env


def _run_job(job: Job, device: str) -> None:
    job.device, job.state = device, "running"
    cmd = [
        sys.executable,
        "-m",
        "pebench",
        "job",
        str(job.spec),
        "--device",
        "cuda" if device.startswith("cuda") else "cpu",
    ]
    p = subprocess.run(cmd, env=_env_for(device, job), capture_output=True, text=True)
    job.log.append(p.stdout + p.stderr)
    if p.returncode != 0:
        lines = [x for x in (p.stderr or p.stdout).strip().splitlines() if x.strip()]
        job.state, job.error = "failed", (lines[-1] if lines else f"exit {p.returncode}")
        return
    job.state = "done"


def _view(jobs: list[Job], workers: int, results: ResultsDir):
    from rich.table import Table

    t = Table(title=f"sweep: {len(jobs)} jobs on {workers} worker(s)")
    for col in ("run", "device", "state", "step"):
        t.add_column(col)
    for j in jobs:
        st = results.status(j.run or j.name)
        t.add_row(
            j.name,
            j.device,
            j.state if not j.error else f"failed: {j.error}",
            f"{st.get('step', 0)}/{st.get('steps', '?')}",
        )
    return t


class _Queue:
    """Jobs in their order, each given out once the job it waits for (``after``) has ended."""

    def __init__(self, jobs: list[Job]):
        self.jobs, self.cv = list(jobs), threading.Condition()

    def take(self) -> Optional[Job]:
        with self.cv:
            while self.jobs:
                for i, job in enumerate(self.jobs):
                    if job.after is None or job.after.state in ("done", "failed"):
                        return self.jobs.pop(i)
                self.cv.wait()
            return None

    def ended(self) -> None:
        with self.cv:
            self.cv.notify_all()


def run_sweep(jobs: list[Job], devices: list[str], results: ResultsDir, show: bool = True) -> list[Job]:
    """Run jobs on the workers; a rich table shows every job's state and training step."""
    from rich.live import Live

    if all(d == "cpu" for d in devices) and not any(j.threads for j in jobs):
        assign_threads(jobs, len(devices), os.cpu_count() or 1)
    first, last = _Queue([j for j in jobs if not j.last_wave]), _Queue([j for j in jobs if j.last_wave])
    done_first = threading.Barrier(len(devices))

    def drain(q: _Queue, device: str) -> None:
        while (job := q.take()) is not None:
            try:
                if job.after is not None and job.after.state != "done":
                    job.state, job.error = "failed", f"not started: {job.after.name} failed"
                else:
                    _run_job(job, device)
            except Exception as e:  # noqa: BLE001 - a job that cannot even start is a failed job, not a dead worker
                job.state, job.error = "failed", f"{type(e).__name__}: {e}"
            q.ended()

    def worker(device: str) -> None:
        drain(first, device)
        done_first.wait()  # the last wave starts with every core free
        drain(last, device)

    threads = [threading.Thread(target=worker, args=(d,), daemon=True) for d in devices]
    for t in threads:
        t.start()
    with (
        Live(_view(jobs, len(devices), results), refresh_per_second=2, redirect_stdout=False)
        if show
        else nullcontext() as live
    ):
        while any(t.is_alive() for t in threads):
            time.sleep(0.5)
            if show:
                live.update(_view(jobs, len(devices), results))
        if show:
            live.update(_view(jobs, len(devices), results))
    return jobs


def failed_jobs(jobs: list[Job]) -> list[Job]:
    return [j for j in jobs if j.state != "done"]


def run_local(rd: ResultsDir, runs: list, req: EvalRequest, overwrite: bool, reporter: Reporter) -> int:
    """Every run trained then evaluated in this process, in order; returns the number of evaluation failures."""
    for name, cfg in runs:
        train_run(cfg, rd, name, reporter, device=req.device, resume=not overwrite, overwrite=overwrite)
    return evaluate_runs(rd, [n for n, _ in runs], req, False, reporter)


def run_all(
    rd: ResultsDir, runs: list, req: EvalRequest, overwrite: bool, devices: str, reporter: Reporter, show: bool = False
) -> int:
    """The runs of a plan trained and evaluated: in this process (``devices`` local), else on parallel workers
    (``auto``, GPU indices or ``cpu:N``). Returns the number of runs or jobs that failed, each reported."""
    if devices == "local":
        return run_local(rd, runs, req, overwrite, reporter)
    devs = parse_devices(devices)
    whole = jobs_for(rd, runs, req, overwrite)
    if all(d == "cpu" for d in devs):
        assign_threads(whole, len(devs), os.cpu_count() or 1)
    jobs = run_sweep(split_evaluations(whole), devs, rd, show=show)
    failed = failed_jobs(jobs)
    for j in failed:
        reporter.error(f"job {j.name} failed: {j.error}; to rerun it alone: pebench job {j.spec}")
    tidy_jobs(rd, [j.spec for j in whole + jobs], keep={j.spec for j in failed})
    return len(failed)


def tidy_jobs(rd: ResultsDir, specs: list, keep: set) -> None:
    """The job files a sweep wrote, removed once it is over (a rerun writes them again), but for the failed jobs'
    (named in their errors); the jobs folder too where it is left empty."""
    for path in set(specs) - set(keep):
        Path(path).unlink(missing_ok=True)
    folder = rd.root / JOBS
    if folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()


def run_job_file(path: Path, device: str, reporter: Reporter) -> int:
    """A worker's job: train the run its file names, then evaluate it, exactly as the parent planned (or the one
    part of that the file names: the training alone, or the evaluation of some lengths)."""
    spec = _read_spec(path)
    rd, name, cfg, req, overwrite = _unpack(spec)
    if spec.get("train", True):
        train_run(cfg, rd, name, reporter, device=device, resume=not overwrite, overwrite=overwrite)
    if not spec.get("evaluate", True):
        return 0
    return evaluate_runs(rd, [name], replace(req, device=device), False, reporter)


__all__ = [
    "Job",
    "evaluate_runs",
    "jobs_for",
    "parse_devices",
    "read_job",
    "run_all",
    "run_job_file",
    "run_local",
    "run_sweep",
    "split_evaluations",
    "write_job",
]
