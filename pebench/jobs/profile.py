"""Where a `pebench run` spent its time, against the physical floor: built from what the run wrote (each run's
training wall time in its status, each record's evaluation wall time in its provenance), so it is the same for runs
trained in this process and on parallel workers; a run this invocation resumed counts its last segment only (the
status's ``segment_s``, its steps' share of the FLOPs). The floor is the training FLOPs (``DecoderLM.flops_per_token``,
6N + 12LTd) over the fp32 matmul peak measured in the same invocation. Runs that train in bf16 autocast on a CPU
with native bf16 matmuls (``device.train_precision``) are also put against the bf16 matmul peak measured alongside:
the fp32 floor is then no bound, the bf16 one is."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from ..model.checkpoint import train_flops
from ..results import ResultsDir
from ..util.fsutil import atomic_path, atomic_write_text


@dataclass
class Phase:
    kind: str  # setup | train | eval | report
    name: str
    seconds: float
    flops: float = 0.0  # training FLOPs (train phases)
    threads: int = 0  # CPU threads it ran with (train and eval phases on the CPU; 0: unknown, or not the CPU)


@dataclass
class Profile:
    wall_s: float
    peak_flops: float
    workers: int
    phases: list[Phase] = field(default_factory=list)
    peak_bf16: float = 0.0  # the CPU's bf16 matmul peak, measured where runs trained in bf16 (else 0)
    cores: int = 0  # the machine's CPU cores (for core_use)
    # the bf16 peak measured before the jobs and after them (peak_bf16 is the higher): how far the host moved it
    bf16_measured: tuple = ()

    @property
    def core_use(self):
        """Busy core-seconds (each training and evaluation item's seconds times its threads) over cores x wall:
        how much of the machine the schedule kept working, whatever the machine's speed. None where an item's
        threads are unknown or it ran on a GPU."""
        work = [x for x in self.phases if x.kind in ("train", "eval") and x.seconds]
        if not (self.cores and self.wall_s and work) or any(x.threads < 1 for x in work):
            return None
        return sum(x.seconds * x.threads for x in work) / (self.cores * self.wall_s)

    @property
    def floor_s(self) -> float:
        return sum(p.flops for p in self.phases) / self.peak_flops if self.peak_flops else 0.0

    @property
    def floor_bf16_s(self) -> float:
        return sum(p.flops for p in self.phases) / self.peak_bf16 if self.peak_bf16 else 0.0

    @property
    def ratio(self) -> str:
        return f"{self.wall_s / self.floor_s:.2f}x" if self.floor_s else "n/a"

    def bf16_line(self) -> str:
        """The bf16 floor, where the runs trained in bf16 on the CPU; empty otherwise."""
        if not self.floor_bf16_s:
            return ""
        both = ""
        if len(self.bf16_measured) == 2:
            before, after = (f"{x / 1e9:,.1f}" for x in self.bf16_measured)
            both = f" (the higher of {before} before the jobs and {after} after them)"
        return (
            f"Trained in bf16 autocast: at the bf16 matmul peak of {self.peak_bf16 / 1e9:,.1f} GFLOP/s measured "
            f"in this run{both} the floor is {self.floor_bf16_s:,.0f} s, {self.wall_s / self.floor_bf16_s:.2f}x."
        )

    def total(self, kind: str) -> float:
        return sum(p.seconds for p in self.phases if p.kind == kind)


def _after(stamp, since: datetime) -> bool:
    try:
        return datetime.fromisoformat(stamp) >= since
    except (TypeError, ValueError):
        return False


def collect(
    rd: ResultsDir,
    runs: list,
    since: datetime,
    wall_s: float,
    peak_flops: float,
    workers: int,
    setup_s: float = 0.0,
    flops: dict = None,
) -> Profile:
    """The phases of the runs (name, config) that this invocation trained or evaluated (stamped after ``since``):
    training per run, evaluation per (run, row label, length) with every task summed. ``flops``: each run's
    training FLOPs, where already computed."""
    import os

    prof = Profile(
        wall_s, peak_flops, workers, [Phase("setup", "corpus, plan, workers", setup_s)], cores=os.cpu_count() or 0
    )
    for name, cfg in runs:
        st = rd.status(name)
        if st.get("state") == "finished" and _after(st.get("updated"), since) and "wall_s" in st:
            # a run resumed here: only this invocation's segment (its seconds, its share of the steps' FLOPs)
            f = (flops or {}).get(name) or train_flops(cfg)
            steps, start = int(st.get("steps") or 0), int(st.get("resumed_from") or 0)
            share = (steps - start) / steps if steps and 0 <= start < steps else 1.0
            seconds = float(st.get("segment_s", st["wall_s"]))
            shown = f"{name} (resumed at step {start})" if share < 1 else name
            prof.phases.append(Phase("train", shown, seconds, f * share, _cpu_threads(st.get("env"))))
    evals: dict = {}
    for rec in rd.iter_records(runs=[n for n, _ in runs]):
        if _after(rec.get("created"), since):
            key, prov = (rec["run"], rec["label"], rec["length"]), rec.get("provenance") or {}
            seconds = evals.get(key, (0.0, 0))[0] + float(prov.get("wall_s", 0.0))
            evals[key] = (seconds, _cpu_threads(prov))
    prof.phases += [Phase("eval", f"{label} L={L}", s, 0.0, n) for (_, label, L), (s, n) in sorted(evals.items())]
    return prof


def _cpu_threads(env) -> int:
    """The threads a run or record names where it ran on the CPU (0 otherwise)."""
    env = env or {}
    return int(env.get("threads") or 0) if str(env.get("device", "")).startswith("cpu") else 0


def markdown(p: Profile, title: str = "pebench run") -> str:
    lines = [
        f"{title}: wall {p.wall_s:,.0f} s on {p.workers} worker(s); training floor {p.floor_s:,.0f} s "
        f"({sum(x.flops for x in p.phases):.2e} FLOPs at the fp32 matmul peak of {p.peak_flops / 1e9:,.1f} "
        f"GFLOP/s measured in this run): **{p.ratio} the floor**. Seconds per phase are each phase's own wall "
        "time; with several workers they overlap, so their sum exceeds the wall time."
        + _core_use_line(p)
        + (" " + p.bf16_line() if p.bf16_line() else ""),
        "",
        "| phase | seconds | share of wall | what |",
        "|---|---|---|---|",
    ]
    for kind in ("setup", "train", "eval", "report", "other"):
        n = sum(1 for x in p.phases if x.kind == kind)
        if n:
            lines.append(f"| {kind} | {p.total(kind):,.1f} | {p.total(kind) / p.wall_s:.0%} | {n} item(s) |")
    # MFU against the peak of the precision the runs trained in (bf16 work against the fp32 peak reads above 100%)
    peak, which = (p.peak_bf16, "bf16") if p.peak_bf16 else (p.peak_flops, "fp32")
    lines += ["", f"| phase | item | seconds | MFU (at the {which} peak) |", "|---|---|---|---|"]
    for x in p.phases:
        mfu = f"{x.flops / x.seconds / peak:.0%}" if x.flops and x.seconds and peak else ""
        lines.append(f"| {x.kind} | {x.name} | {x.seconds:,.2f} | {mfu} |")
    return "\n".join(lines) + "\n"


def _core_use_line(p: Profile) -> str:
    return (
        ""
        if p.core_use is None
        else (
            f" The cores were busy {p.core_use:.0%} of the wall (each item's seconds "
            "times its threads, over cores x wall)."
        )
    )


def facts(p: Profile, precisions: list, machine: dict) -> dict:
    """The profile's totals as data (profile.json: what the docs' budget tables are generated from)."""
    return {
        "measured": datetime.now(timezone.utc).date().isoformat(),
        "wall_s": round(p.wall_s, 1),
        "workers": p.workers,
        "train_s": round(p.total("train"), 1),
        "eval_s": round(p.total("eval"), 1),
        "train_flops": sum(x.flops for x in p.phases),
        "peak_gflops": round(p.peak_flops / 1e9, 1),
        "floor_s": round(p.floor_s, 1),
        "ratio": round(p.wall_s / p.floor_s, 3) if p.floor_s else None,
        # the wall over the floor at the peak of the precision the runs trained in (bf16 where they did)
        "ratio_own": round(p.wall_s / (p.floor_bf16_s or p.floor_s), 3) if p.floor_s else None,
        "peak_bf16_gflops": round(p.peak_bf16 / 1e9, 1) if p.peak_bf16 else None,
        "peak_bf16_before_after_gflops": [round(x / 1e9, 1) for x in p.bf16_measured] or None,
        "floor_bf16_s": round(p.floor_bf16_s, 1) if p.peak_bf16 else None,
        "core_use": None if p.core_use is None else round(p.core_use, 3),
        "precision": sorted(set(precisions)),
        **machine,
    }


def machine() -> dict:
    """The CPU model (Linux: /proc/cpuinfo; else the platform's word), the cores and torch's version."""
    import os

    import torch

    from ..model.device import cpu_name

    return {"cpu": cpu_name(), "cores": os.cpu_count(), "torch": torch.__version__}


def write(rd: ResultsDir, p: Profile, precisions: list = ()) -> list[Path]:
    """profile.md, profile.csv and profile.json in the results folder."""
    import json

    import pandas as pd

    atomic_write_text(rd.root / "profile.md", markdown(p))
    with atomic_path(rd.root / "profile.csv") as tmp:
        pd.DataFrame([vars(x) for x in p.phases]).to_csv(tmp, index=False)
    atomic_write_text(rd.root / "profile.json", json.dumps(facts(p, list(precisions), machine()), indent=1) + "\n")
    return [rd.root / "profile.md", rd.root / "profile.csv", rd.root / "profile.json"]


def summary(p: Profile) -> str:
    return (
        f"time: {p.wall_s:,.0f} s wall ({p.total('train'):,.0f} s training, {p.total('eval'):,.0f} s evaluation, "
        f"{p.workers} worker(s)); training floor {p.floor_s:,.0f} s at {p.peak_flops / 1e9:,.0f} GFLOP/s: "
        f"{p.ratio}"
        + (f"; bf16 floor {p.floor_bf16_s:,.0f} s: {p.wall_s / p.floor_bf16_s:.2f}x" if p.floor_bf16_s else "")
        + ("" if p.core_use is None else f"; cores busy {p.core_use:.0%}")
    )


def peak_for_work(device: str, flops: float, dtype=None) -> float:
    """The matmul peak (bench.matmul_peak: the best of timed loops; fp32 on the CPU unless ``dtype``); for work too
    small to matter (under 1e12 FLOPs) a quick, rough one, so tiny runs do not pay seconds for it. On the CPU it is
    the whole machine's, measured with a thread per core whatever this process's own thread count: the floor is the
    machine's, and workers started with one thread each (OMP_NUM_THREADS=1) must not halve it. The bf16 peak of a
    CPU without native bf16 matmuls is always the quick one."""
    import os

    import torch

    from ..model.device import native_bf16_cpu, resolve_device
    from ..perf.bench import matmul_peak

    dev = str(resolve_device(device))
    if dev == "cpu" and dtype == torch.bfloat16 and not native_bf16_cpu():
        flops = 0.0  # emulated bf16 is no floor worth seconds (a 2048 matmul takes them): the quick measure
    own = torch.get_num_threads()
    if dev == "cpu":
        torch.set_num_threads(os.cpu_count() or own)
    try:
        if flops >= 1e12:
            return matmul_peak(dev, dtype=dtype)
        return matmul_peak(dev, n=512, runs=2, seconds=0.05, dtype=dtype)
    finally:
        torch.set_num_threads(own)


class Clock:
    """Wall time of a command by lap, the moment it started (records and statuses stamped after it are this
    invocation's) and the matmul peak measured before its jobs (the higher of before and after is the
    denominator: anything else running on the machine can only lower a measurement)."""

    def __init__(self):
        self.since = datetime.now(timezone.utc).replace(microsecond=0)
        self.t0 = self.last = time.perf_counter()
        self.laps: dict = {}
        self.peak_before = self.bf16_before = 0.0
        self.flops: dict = {}  # run -> training FLOPs of the plan, computed once
        self.bf16 = False  # runs train in bf16 on the CPU: the bf16 peak is measured too

    def measure_peaks(self, device: str, runs: list) -> None:
        """Before the jobs (the planned training FLOPs decide how carefully)."""
        import torch

        from ..model.device import cpu_trains_bf16, resolve_device

        t = time.perf_counter()
        self.flops = {name: train_flops(c) for name, c in runs}
        self.peak_before = peak_for_work(device, sum(self.flops.values()))
        self.bf16 = cpu_trains_bf16(resolve_device(device), [c.train.precision for _, c in runs])
        if self.bf16:
            self.bf16_before = peak_for_work(device, sum(self.flops.values()), torch.bfloat16)
        dt = time.perf_counter() - t
        self.t0, self.last = self.t0 + dt, self.last + dt  # not the run's time, nor setup's

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.laps[name] = now - self.last
        self.last = now

    def wall(self) -> float:
        return time.perf_counter() - self.t0


def workers_of(devices: str) -> int:
    if devices == "local":
        return 1
    from .sweep import parse_devices

    return len(parse_devices(devices))


def finish(rd: ResultsDir, runs: list, clock: Clock, devices: str, device: str) -> Profile:
    """The profile of a `pebench run` (the matmul peak measured before the jobs and now, the higher, on the device
    it ran on), written as profile.md and profile.csv."""
    clock.lap("report")
    flops = clock.flops or {name: train_flops(c) for name, c in runs}
    peak = max(clock.peak_before, peak_for_work(device, sum(flops.values())))
    p = collect(rd, runs, clock.since, clock.wall(), peak, workers_of(devices), clock.laps.get("setup", 0.0), flops)
    if clock.bf16:
        import torch

        after = peak_for_work(device, sum(flops.values()), torch.bfloat16)
        p.peak_bf16, p.bf16_measured = max(clock.bf16_before, after), (clock.bf16_before, after)
    p.phases.append(Phase("report", "tables and plots", clock.laps.get("report", 0.0)))
    if p.workers == 1:  # phases in sequence: what they leave of the wall (corpus preparation, checkpoints, ...)
        rest = p.wall_s - sum(x.seconds for x in p.phases)
        p.phases.append(Phase("other", "corpus preparation, checkpoints, process", max(0.0, rest)))
    write(rd, p, _precisions(rd, runs))
    return p


def _precisions(rd: ResultsDir, runs: list) -> list:
    """The precisions the runs trained in (each run's config records its own)."""
    out = []
    for name, _ in runs:
        if (rd.run_dir(name) / "config.yaml").exists():  # a run that never started has none
            out.append(rd.run_precision(name))
    return out
