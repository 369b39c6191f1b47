"""Where a `pebench run` spent its time, against the physical floor: built from what the run wrote (each run's
training wall time in its status, each record's evaluation wall time in its provenance), so it is the same for runs
trained in this process and on parallel workers. The floor is the training FLOPs (``DecoderLM.flops_per_token``,
6N + 12LTd) over the fp32 matmul peak measured in the same invocation."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from .checkpoint import train_flops
from .fsutil import atomic_path, atomic_write_text
from .results import ResultsDir


@dataclass
class Phase:
    kind: str  # setup | train | eval | report
    name: str
    seconds: float
    flops: float = 0.0  # training FLOPs (train phases)


@dataclass
class Profile:
    wall_s: float
    peak_flops: float
    workers: int
    phases: list = field(default_factory=list)

    @property
    def floor_s(self) -> float:
        return sum(p.flops for p in self.phases) / self.peak_flops if self.peak_flops else 0.0

    @property
    def ratio(self) -> str:
        return f"{self.wall_s / self.floor_s:.2f}x" if self.floor_s else "n/a"

    def total(self, kind: str) -> float:
        return sum(p.seconds for p in self.phases if p.kind == kind)


def _after(stamp, since: datetime) -> bool:
    try:
        return datetime.fromisoformat(stamp) >= since
    except (TypeError, ValueError):
        return False


def collect(rd: ResultsDir, runs: list, since: datetime, wall_s: float, peak_flops: float, workers: int,
            setup_s: float = 0.0, flops: dict = None) -> Profile:
    """The phases of the runs (name, config) that this invocation trained or evaluated (stamped after ``since``):
    training per run, evaluation per (run, row label, length) with every task summed. ``flops``: each run's
    training FLOPs, where already computed."""
    prof = Profile(wall_s, peak_flops, workers, [Phase("setup", "corpus, plan, workers", setup_s)])
    for name, cfg in runs:
        st = rd.status(name)
        if st.get("state") == "finished" and _after(st.get("updated"), since) and "wall_s" in st:
            f = (flops or {}).get(name) or train_flops(cfg)
            prof.phases.append(Phase("train", name, float(st["wall_s"]), f))
    evals: dict = {}
    for rec in rd.iter_records(runs=[n for n, _ in runs]):
        if _after(rec.get("created"), since):
            key = (rec["run"], rec["label"], rec["length"])
            evals[key] = evals.get(key, 0.0) + float((rec.get("provenance") or {}).get("wall_s", 0.0))
    prof.phases += [Phase("eval", f"{label} L={L}", s) for (_, label, L), s in sorted(evals.items())]
    return prof


def markdown(p: Profile, title: str = "pebench run") -> str:
    lines = [f"{title}: wall {p.wall_s:,.0f} s on {p.workers} worker(s); training floor {p.floor_s:,.0f} s "
             f"({sum(x.flops for x in p.phases):.2e} FLOPs at the fp32 matmul peak of {p.peak_flops / 1e9:,.1f} "
             f"GFLOP/s measured in this run): **{p.ratio} the floor**. Seconds per phase are each phase's own wall "
             "time; with several workers they overlap, so their sum exceeds the wall time.", "",
             "| phase | seconds | share of wall | what |", "|---|---|---|---|"]
    for kind in ("setup", "train", "eval", "report", "other"):
        n = sum(1 for x in p.phases if x.kind == kind)
        if n:
            lines.append(f"| {kind} | {p.total(kind):,.1f} | {p.total(kind) / p.wall_s:.0%} | {n} item(s) |")
    lines += ["", "| phase | item | seconds | MFU |", "|---|---|---|---|"]
    for x in p.phases:
        mfu = f"{x.flops / x.seconds / p.peak_flops:.0%}" if x.flops and x.seconds and p.peak_flops else ""
        lines.append(f"| {x.kind} | {x.name} | {x.seconds:,.2f} | {mfu} |")
    return "\n".join(lines) + "\n"


def write(rd: ResultsDir, p: Profile) -> list[Path]:
    """profile.md and profile.csv in the results folder."""
    import pandas as pd

    atomic_write_text(rd.root / "profile.md", markdown(p))
    with atomic_path(rd.root / "profile.csv") as tmp:
        pd.DataFrame([vars(x) for x in p.phases]).to_csv(tmp, index=False)
    return [rd.root / "profile.md", rd.root / "profile.csv"]


def summary(p: Profile) -> str:
    return (f"time: {p.wall_s:,.0f} s wall ({p.total('train'):,.0f} s training, {p.total('eval'):,.0f} s evaluation, "
            f"{p.workers} worker(s)); training floor {p.floor_s:,.0f} s at {p.peak_flops / 1e9:,.0f} GFLOP/s: "
            f"{p.ratio}")


def measure_peak(device: str, flops: float) -> float:
    """The fp32 matmul peak (bench.matmul_peak: the best of timed loops); for work too small to matter (under 1e12
    FLOPs) a quick, rough one, so tiny runs do not pay seconds for it."""
    from .bench import matmul_peak
    from .device import resolve_device

    dev = str(resolve_device(device))
    return matmul_peak(dev) if flops >= 1e12 else matmul_peak(dev, n=512, runs=2, seconds=0.05)


class Clock:
    """Wall time of a command by lap, the moment it started (records and statuses stamped after it are this
    invocation's) and the matmul peak measured before its jobs (the higher of before and after is the
    denominator: anything else running on the machine can only lower a measurement)."""

    def __init__(self):
        self.since = datetime.now(timezone.utc).replace(microsecond=0)
        self.t0 = self.last = time.perf_counter()
        self.laps: dict = {}
        self.peak_before = 0.0
        self.flops: dict = {}  # run -> training FLOPs of the plan, computed once

    def measure_peak(self, device: str, runs: list) -> None:
        """Before the jobs (the planned training FLOPs decide how carefully)."""
        t = time.perf_counter()
        self.flops = {name: train_flops(c) for name, c in runs}
        self.peak_before = measure_peak(device, sum(self.flops.values()))
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
    peak = max(clock.peak_before, measure_peak(device, sum(flops.values())))
    p = collect(rd, runs, clock.since, clock.wall(), peak, workers_of(devices), clock.laps.get("setup", 0.0), flops)
    p.phases.append(Phase("report", "tables and plots", clock.laps.get("report", 0.0)))
    if p.workers == 1:  # phases in sequence: what they leave of the wall (corpus preparation, checkpoints, ...)
        rest = p.wall_s - sum(x.seconds for x in p.phases)
        p.phases.append(Phase("other", "corpus preparation, checkpoints, process", max(0.0, rest)))
    write(rd, p)
    return p
