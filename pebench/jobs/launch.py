"""Sweeps on a scheduler: the planned jobs go to submitit as one job array (Slurm, or submitit's local executor,
the same code path), several short jobs packed per array task; or a plain ``#SBATCH --array`` script for sites
that forbid submitting from Python.

Each array task runs its jobs' files (``RESULTS/jobs/RUN.json``, written by the plan) one after another: train
with resume, then evaluate, writing into the shared results folder exactly what a local run writes. A job that
finished writes ``RESULTS/jobs/RUN.done``, so running the same command again submits only what is not done.
Preemption: Slurm sends USR2 before the time limit (``signal_delay_s``); training treats it like SIGTERM (it
finishes the step and saves its checkpoint), then submitit requeues the task and the requeued task resumes from that
checkpoint. The run lock is a PID file: it holds on one machine only; across nodes the scheduler must not start two
tasks of the same run at once (one array never does: each run is in exactly one task).
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..results import ResultsDir, guard_file
from ..util.errors import PebenchError, UsageError

LAUNCHERS = ("local", "slurm")
DONE = ".done"


@dataclass
class LaunchOptions:
    """A launcher's settings: from the config's ``launcher:`` section, then ``--launcher-opt NAME=V``."""

    partition: str = ""
    time_min: int = 60  # each array task's time limit
    cpus_per_task: int = 2
    gpus_per_task: int = 0
    mem_gb: float = 0.0  # 0: the partition's default
    parallelism: int = 0  # array tasks at once (0: slurm 256; local: the cores // cpus_per_task)
    pack: int = 1  # jobs per array task (several where jobs are minutes long)
    account: str = ""
    qos: str = ""
    signal_delay_s: int = 120  # USR2 this long before the time limit: checkpoint and requeue
    folder: str = ""  # submitit's logs and pickles (default RESULTS/launcher)


@dataclass(frozen=True)
class LaunchFlags:
    """Where a `pebench run`'s jobs go, as its flags give them (``cli.flags.takes`` makes the options from these
    fields); ``launch_plan`` and ``jobs.plan.suite_plan`` read them."""

    workers: Optional[str] = dataclasses.field(
        default=None,
        metadata={
            "decl": "--workers",
            "help": "where jobs run: local (default: here) | auto (one per GPU) | 0,1,2 | cpu:N",
        },
    )
    launcher: Optional[str] = dataclasses.field(
        default=None,
        metadata={
            "decl": "--launcher",
            "help": "local | slurm: the jobs as one submitit job array (pip install 'pebench\\[slurm]')",
        },
    )
    launcher_opt: tuple[str, ...] = dataclasses.field(
        default=(),
        metadata={
            "decl": "--launcher-opt",
            "help": "NAME=V (repeatable): partition, time_min, cpus_per_task, gpus_per_task, mem_gb, parallelism, "
            "pack, account, qos, signal_delay_s, folder",
        },
    )
    emit_sbatch: Optional[Path] = dataclasses.field(
        default=None,
        metadata={
            "decl": "--emit-sbatch",
            "help": "write a plain #SBATCH --array script and its job list instead of running",
        },
    )


@dataclass
class LaunchPlan:
    kind: str  # local | slurm
    options: LaunchOptions  # launch.LaunchOptions: the config's launcher section, then --launcher-opt
    emit: Optional[Path] = None  # --emit-sbatch FILE: a plain sbatch script instead of submitting


def launch_plan(
    kind: Optional[str], assignments: Optional[list], emit: Optional[Path], config: str, devices: Optional[str]
) -> Optional[LaunchPlan]:
    """The launcher a `pebench run` asked for (None: run here); --workers and a launcher exclude each other."""
    from ..config import config_section

    if not (kind or emit):
        if assignments:
            raise UsageError("--launcher-opt needs --launcher local|slurm (or --emit-sbatch)")
        return None
    if kind is not None and kind not in LAUNCHERS:
        raise UsageError(f"--launcher must be one of {', '.join(LAUNCHERS)}, got {kind!r}")
    if devices:
        raise UsageError("--workers and --launcher exclude each other: a launcher places the jobs itself")
    if emit is not None:
        guard_file(emit, "--emit-sbatch")
        guard_file(Path(f"{emit}.jobs"), "--emit-sbatch")
    return LaunchPlan(kind or "slurm", launch_options(config_section(config, "launcher"), assignments or []), emit)


def launch_options(section: Optional[dict], assignments: list[str]) -> LaunchOptions:
    """Options from a config section and NAME=V assignments, each typed by its default; one line per mistake."""
    from ..config import type_matches
    from ..util.parsing import parse_assignment, typed_value

    known = {f.name: f.default for f in dataclasses.fields(LaunchOptions)}
    values = dict(section or {})
    for a in assignments or []:
        name, raw = parse_assignment(a, "--launcher-opt")
        values[name] = typed_value(raw, known[name], f"launcher option {name}") if name in known else raw
    for name, v in values.items():
        if name not in known:
            raise UsageError(f"unknown launcher option {name!r}; allowed: {', '.join(known)}")
        if not type_matches(v, known[name]):
            raise UsageError(f"launcher option {name} must be {type(known[name]).__name__}, got {v!r}")
    opts = LaunchOptions(**{k: float(v) if isinstance(known[k], float) else v for k, v in values.items()})
    if opts.pack < 1 or opts.time_min < 1 or opts.cpus_per_task < 1:
        raise UsageError("launcher options pack, time_min and cpus_per_task must be >= 1")
    return opts


def packs(job_files: list[Path], pack: int) -> list[list[str]]:
    """The job files in array tasks of ``pack`` each, in the plan's order (longest first)."""
    files = [str(p) for p in job_files]
    return [files[i : i + pack] for i in range(0, len(files), pack)]


def pending(job_files: list[Path]) -> list[Path]:
    """The job files whose run is not done (no ``.done`` marker): what a rerun submits."""
    return [p for p in job_files if not Path(p).with_suffix(DONE).exists()]


class JobPack:
    """One array task: its jobs one after another. Picklable (submitit sends it to the task); ``checkpoint`` is
    what submitit calls on preemption or timeout: the same pack again, which resumes where it stopped."""

    def __init__(self, device: str = "auto", threads: int = 0):
        self.device, self.threads = device, threads

    def __call__(self, files: list[str]) -> list[str]:
        if self.threads:
            import torch

            torch.set_num_threads(self.threads)
        done = []
        for f in files:
            self._one(Path(f))
            done.append(f)
        return done

    def _one(self, path: Path) -> None:
        from ..eval.tasks import record_line
        from ..model.device import resolve_device
        from ..train import TrainingInterrupted
        from ..util.progress import Reporter
        from .sweep import run_job_file

        errors: list[str] = []
        dev = str(resolve_device(self.device))
        try:
            failed = run_job_file(
                path, dev, Reporter.for_log(lambda r: print(record_line(r), flush=True), on_error=errors.append)
            )
        except TrainingInterrupted as e:
            if e.signal == "SIGUSR2":
                print(f"{e}; preempted: the task is requeued and resumes from this checkpoint", flush=True)
                _hand_back_preemption()
            raise
        if failed:
            raise PebenchError(f"{path.stem}: " + "; ".join(errors))
        path.with_suffix(DONE).write_text("")

    def checkpoint(self, files: list[str]):
        from submitit.helpers import DelayedSubmission

        return DelayedSubmission(type(self)(self.device, self.threads), files)


def _hand_back_preemption() -> None:
    """Training stopped on the scheduler's USR2 and saved its step: give the signal to submitit's own handler, which
    checkpoints this pack (``JobPack.checkpoint``) and requeues the task."""
    handler = signal.getsignal(signal.SIGUSR2)
    if callable(handler):
        handler(signal.SIGUSR2, None)


def _site_options(opts: LaunchOptions) -> dict:
    """The Slurm settings a site may need, those given (submitit's names; sbatch's with dashes)."""
    given = (
        ("partition", opts.partition),
        ("account", opts.account),
        ("qos", opts.qos),
        ("gpus_per_task", opts.gpus_per_task),
    )
    return {k: v for k, v in given if v}


def executor(kind: str, folder: Path, opts: LaunchOptions):
    """A submitit executor for ``kind`` with the options applied."""
    try:
        import submitit
    except ImportError:
        raise UsageError("--launcher needs submitit: pip install 'pebench[slurm]'") from None
    if kind == "local":
        ex = submitit.LocalExecutor(folder=folder)
        ex.update_parameters(
            timeout_min=opts.time_min, signal_delay_s=opts.signal_delay_s, gpus_per_node=opts.gpus_per_task
        )
        return ex
    ex = submitit.SlurmExecutor(folder=folder)
    params = dict(
        time=opts.time_min,
        cpus_per_task=opts.cpus_per_task,
        signal_delay_s=opts.signal_delay_s,
        array_parallelism=opts.parallelism or 256,
        job_name="pebench",
    )
    params.update(_site_options(opts))
    if opts.mem_gb:
        params["mem"] = f"{int(opts.mem_gb)}GB"
    ex.update_parameters(**params)
    return ex


def local_waves(opts: LaunchOptions) -> int:
    """How many array tasks the local launcher runs at once (its executor would start them all)."""
    return opts.parallelism or max(1, (os.cpu_count() or 1) // opts.cpus_per_task)


@dataclass
class TaskResult:
    files: list[str]
    ok: bool
    error: str = ""


def submit(
    kind: str, rd: ResultsDir, job_files: list[Path], opts: LaunchOptions, device: str = "auto", on_submitted=None
) -> list[TaskResult]:
    """The pending jobs as one array (the local launcher: in waves), waited for; one result per array task."""
    todo = packs(pending(job_files), opts.pack)
    if not todo:
        return []
    folder = Path(opts.folder or rd.root / "launcher")
    ex = executor(kind, folder, opts)
    fn = JobPack(device, opts.cpus_per_task if kind == "local" else 0)
    w = local_waves(opts) if kind == "local" else len(todo)  # slurm: one array; local: waves of the cores' worth
    waves = [todo[i : i + w] for i in range(0, len(todo), w)]
    results = []
    for wave in waves:
        jobs = ex.map_array(fn, wave)
        if on_submitted:
            on_submitted(jobs)
        _wait(jobs)
        results += [_result(j, files) for j, files in zip(jobs, wave)]
    return results


def _wait(jobs: list, force_every_s: float = 15.0) -> None:
    """Until every task is done: submitit's cached state each second, the scheduler asked every ``force_every_s``
    (a task that died before writing its result is seen then, not after submitit's backoff)."""
    import time

    last = time.time()
    while True:
        force = time.time() - last >= force_every_s
        if all(j.done(force_check=force) for j in jobs):
            return
        last = time.time() if force else last
        time.sleep(1.0)


def _result(job, files: list[str]) -> TaskResult:
    try:
        job.result()
        return TaskResult(files, True)
    except Exception as e:  # noqa: BLE001 - a failed task is reported with its log's last lines, not raised
        return TaskResult(files, False, _last_lines(job, str(e)))


def _last_lines(job, fallback: str, n: int = 2) -> str:
    try:
        text = job.stderr() or job.stdout() or ""
    except Exception:  # noqa: BLE001 - a log that cannot be read leaves the exception's text
        text = ""
    lines = [
        x
        for x in text.strip().splitlines()  # the log without submitit's lines and traceback frames
        if x.strip() and not x.startswith(("submitit", " ", "Traceback"))
    ]
    tail = lines[-n:] if lines else [x for x in fallback.strip().splitlines() if x.strip()][-n:]
    return " | ".join(tail)


def run_jobs(rd: ResultsDir, sp, launch: Optional[LaunchPlan], reporter, show: bool = False) -> int:
    """A suite plan's jobs: through its launcher (``launch``), else here or on local workers (``sweep.run_all``),
    told through ``reporter`` (a ``progress.Reporter``). Returns the failures."""
    from .sweep import run_all

    if launch is not None:
        return run_launched(rd, sp.runs, sp.request, sp.overwrite, launch, reporter)
    return run_all(rd, sp.runs, sp.request, sp.overwrite, sp.devices, reporter, show)


def require_slurm() -> None:
    """Slurm's commands must be here before any job file is written (submitit asks for them only at submission)."""
    import shutil

    if missing := [c for c in ("sbatch", "srun") if shutil.which(c) is None]:
        raise UsageError(
            f"--launcher slurm: {' and '.join(missing)} not found on PATH (no Slurm on this machine); run on a "
            "Slurm login node, write a script with --emit-sbatch FILE, or use --launcher local"
        )


def run_launched(rd: ResultsDir, runs: list, req, overwrite: bool, plan, reporter) -> int:
    """``pebench run --launcher``: the plan's jobs written as files, the pending ones submitted as one array (or,
    with ``--emit-sbatch``, written as a script); returns the number of array tasks that failed, each reported with
    its log's last lines."""
    from .sweep import jobs_for

    if plan.kind == "slurm" and not plan.emit:
        require_slurm()
    rd = ResultsDir(rd.root.resolve())  # array tasks may start in another folder
    files = [j.spec for j in jobs_for(rd, runs, req, overwrite)]
    if overwrite:
        for f in files:
            Path(f).with_suffix(DONE).unlink(missing_ok=True)
    if plan.emit:
        path = emit_sbatch(plan.emit, rd, files, plan.options, req.device)
        reporter.echo(f"wrote {path} and {path}.jobs ({len(pending(files))} jobs): submit with `sbatch {path}`")
        return 0
    n = len(todo := pending(files))
    reporter.echo(
        f"{plan.kind} launcher: {n} of {len(files)} jobs pending, {len(packs(todo, plan.options.pack))} "
        f"array tasks of up to {plan.options.pack}; logs in {plan.options.folder or rd.root / 'launcher'}"
    )
    results = submit(
        plan.kind,
        rd,
        files,
        plan.options,
        req.device,
        on_submitted=lambda jobs: reporter.echo(f"submitted {jobs[0].job_id.split('_')[0]}" if jobs else ""),
    )
    for r in results:
        if not r.ok:
            reporter.error(f"array task with {', '.join(Path(f).stem for f in r.files)} failed: {r.error}")
    return sum(not r.ok for r in results)


def emit_sbatch(dest: Path, rd: ResultsDir, job_files: list[Path], opts: LaunchOptions, device: str = "auto") -> Path:
    """A plain sbatch script for sites that forbid submitting from Python: ``#SBATCH --array=0-N``, one line of
    ``DEST.jobs`` per array task (its job files), SIGTERM before the limit (training checkpoints), then a requeue."""
    from ..util.fsutil import atomic_write_text

    todo = packs(pending(job_files), opts.pack)
    if not todo:
        raise PebenchError("every job is done: nothing to put in an sbatch script")
    dest = Path(dest)
    listing = dest.with_suffix(dest.suffix + ".jobs")
    atomic_write_text(listing, "".join(" ".join(shlex.quote(f) for f in t) + "\n" for t in todo))
    atomic_write_text(dest, _sbatch_text(listing, len(todo), opts, device, rd))
    os.chmod(dest, 0o755)
    return dest


def _sbatch_text(listing: Path, n: int, opts: LaunchOptions, device: str, rd: ResultsDir) -> str:
    par = f"%{opts.parallelism}" if opts.parallelism else ""
    flags = [
        "--job-name=pebench",
        f"--array=0-{n - 1}{par}",
        f"--time={opts.time_min}",
        f"--cpus-per-task={opts.cpus_per_task}",
        f"--output={rd.root.resolve()}/launcher/%A_%a.out",
        f"--signal=B:TERM@{opts.signal_delay_s}",
        "--requeue",
        "--open-mode=append",
    ]
    flags += [f"--{k.replace('_', '-')}={v}" for k, v in _site_options(opts).items()]
    if opts.mem_gb:
        flags.append(f"--mem={int(opts.mem_gb)}G")
    py = shlex.quote(sys.executable)
    return "\n".join(
        ["#!/bin/bash"]
        + [f"#SBATCH {f}" for f in flags]
        + [
            f"# {n} array tasks; task i runs the job files on line i+1 of {listing.name}, one after another.",
            f'LINE=$(sed -n "$((SLURM_ARRAY_TASK_ID + 1))p" {shlex.quote(str(listing.resolve()))})',
            "for f in $LINE; do",
            '  [ -e "${f%.json}.done" ] && continue',
            f'  {py} -m pebench job "$f" --device {device} &',
            "  PID=$!",
            "  # Slurm's TERM before the limit: training saves its step, then the task is requeued and resumes",
            '  trap \'kill -TERM $PID; wait $PID; scontrol requeue "${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}"; '
            "exit 0' TERM",
            "  wait $PID || exit $?",
            '  touch "${f%.json}.done"',
            "done",
            "",
        ]
    )
