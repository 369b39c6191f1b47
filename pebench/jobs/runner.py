"""``pebench run`` after its plan: the suite's jobs (here, on local workers or through a launcher), then its report
and its profile (where the time went, against the training floor)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from ..results import ResultsDir
from ..util.progress import Reporter
from . import launch, profile
from .plan import SuitePlan

if TYPE_CHECKING:
    from ..findings.report import Table


@dataclass
class SuiteDone:
    """What a suite run left: failures (jobs or runs), the main table (None when the jobs were only written, as
    ``--emit-sbatch`` does), the context-use tables' markdown and the closing summary."""

    failed: int
    table: Optional[Table] = None  # findings.report.Table
    context_md: Optional[str] = None
    summary: str = ""


def run_suite(
    sp: SuitePlan, lp: Optional[launch.LaunchPlan], clock: profile.Clock, reporter: Reporter, show: bool = False
) -> SuiteDone:
    """Run a suite plan here, on local workers or through a launcher (``lp``: --launcher local|slurm, a submitit
    job array, or --emit-sbatch): measure the peaks, run the jobs, report and profile."""
    from ..findings.report import records_frame_noting, suite_report

    rd = ResultsDir(sp.results).ensure_writable()
    clock.measure_peaks(sp.request.device, sp.runs)
    clock.lap("setup")
    if failed := launch.run_jobs(rd, sp, lp, reporter, show):
        return SuiteDone(failed)
    if lp and lp.emit:
        return SuiteDone(0)
    clock.lap("jobs")
    df = records_frame_noting(rd, reporter.warn)
    t, context_md, paths = suite_report(rd, df, [n for n, _ in sp.runs], sp.request)
    prof = profile.finish(rd, sp.runs, clock, sp.devices, sp.request.device)
    wrote = "wrote " + ", ".join(str(p) for p in paths + [rd.root / "profile.md"])
    return SuiteDone(0, t, context_md, wrote + "\n" + profile.summary(prof))
