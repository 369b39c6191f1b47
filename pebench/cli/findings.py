"""Commands on the findings: ``report`` (tables and plots from records), ``check`` (decide every claim), ``docs``
(regenerate the generated sections), ``pack`` (keep the evidence) and ``compare`` (a run against the reference)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from ..errors import PebenchError, UsageError
from . import console
from .app import app
from .console import handle_errors
from .options import FigureFormatOpt, ResultsOpt, SplitOpt


@app.command()
@handle_errors
def report(
    format: str = typer.Option("table", "--format", help="table | md | csv | latex | json"),
    metric: Optional[str] = typer.Option(
        None,
        "--metric",
        help="a metric of a task, or ratio (pebench list shows them; default: ppl, else the first task's)",
    ),
    protocol: Optional[str] = typer.Option(None, "--protocol", help="e.g. nonoverlap, sliding-s64, fixed-k256"),
    pe: Optional[str] = typer.Option(None, "--pe", help="comma list of schemes or row labels"),
    compare: Optional[List[Path]] = typer.Option(None, "--compare", help="two result folders: A then B"),
    html: bool = typer.Option(False, "--html", help="also write report.html: one self-contained page"),
    figure_format: str = FigureFormatOpt,
    split: str = SplitOpt,
    results: Path = ResultsOpt,
    out: Optional[Path] = typer.Option(
        None,
        "--out",
        help="the folder to write the report files into (default: the results folder, never a committed set)",
    ),
):
    """Tables and plots from every record; writes report.md/.csv/.tex/.json and plots (PNG, PDF or SVG)."""
    from ..findings import report as rp
    from ..findings.html import write_html
    from ..fsutil import figure_format as figures
    from ..parsing import parse_list
    from ..results import ResultsDir

    fmt, schemes = rp.REPORT_FORMATS.get(format), parse_list(pe, "--pe")
    _check_figures(figure_format, html)
    if compare:
        return _compare_sets(compare, metric or "ppl", protocol, schemes, split)
    rd = ResultsDir(results).existing()
    df = console.load_records(rd)
    metric = metric or rp.default_metric(df)
    for r in rd.runs_in("failed"):
        console.warn(f"note: run {r!r} failed during training and is left out")
    t = rp.build_table(df, metric, protocol, schemes, split)
    console.show(fmt(t))
    if (dest := rp.report_destination(rd, out)) is None:
        console.warn(f"note: {rd.root} is a committed result set: nothing written; pass --out DIR for the files")
        return
    with figures(figure_format):
        paths = rp.write_reports(dest.ensure_writable(), t, df, schemes)
    if html:
        paths.append(write_html(rd.root, dest.root / "report.html"))
    console.warn("wrote " + ", ".join(str(p) for p in paths))


def _check_figures(figure_format: str, html: bool) -> None:
    from ..fsutil import check_figure_format

    if check_figure_format(figure_format) == "pdf" and html:
        raise UsageError("--html embeds png or svg figures; drop --html or use --figure-format png|svg")


def _compare_sets(dirs: list, metric: str, protocol, schemes, split: str) -> None:
    """``report --compare A --compare B``: the two sets' tables side by side."""
    from ..findings import report as rp
    from ..results import ResultsDir

    if len(dirs) != 2:
        raise UsageError("--compare takes exactly two result folders: --compare A --compare B")
    a, b = (rp.build_table(console.load_records(ResultsDir(d)), metric, protocol, schemes, split) for d in dirs)
    console.echo(rp.compare_tables(a, b).to_string(index=False, float_format=lambda v: f"{v:.3f}"))


@app.command()
@handle_errors
def check(
    sets: Optional[List[Path]] = typer.Argument(None, help="result sets or folders above them (default: results)"),
    quiet: bool = typer.Option(False, "--quiet", help="print failed claims only"),
):
    """Decide every claim (claims.yaml beside each result set) from the committed evidence; exit 1 if any fails (a
    claim registered before its runs is pending until their records are in, then decided)."""
    from ..findings.claims import check_set, claim_sets, render_verdicts

    found = claim_sets(sets or [Path("results")])
    if not found:
        raise PebenchError("no claims.yaml under " + ", ".join(str(s) for s in sets or ["results"]))
    failed = total = pending = 0
    for root in found:
        verdicts = check_set(root)
        total, pending = total + len(verdicts), pending + sum(v.pending for v in verdicts)
        failed += sum(not (v.held or v.pending) for v in verdicts)
        shown = [v for v in verdicts if not (quiet and (v.held or v.pending))]
        if shown:
            console.echo(f"# {root}\n" + render_verdicts(shown))
    waiting = f"; {pending} pending (registered before their runs, decided when the records come)" if pending else ""
    console.echo(f"{total - failed - pending} of {total} claims held in {len(found)} result sets{waiting}")
    if failed:
        raise typer.Exit(1)


@app.command()
@handle_errors
def docs(
    check_only: bool = typer.Option(False, "--check", help="write nothing; exit 1 if a doc is stale"),
    root: Path = typer.Option(Path("."), "--root", help="the repository root"),
):
    """Regenerate every generated section (tables, claims) of README.md, docs/*.md and results/*/README.md."""
    from ..findings.docs import regenerate

    changed = regenerate(root, check=check_only)
    for p in changed:
        console.echo(("stale: " if check_only else "rewrote: ") + str(p))
    if not changed:
        console.echo("every generated section is up to date")
    if check_only and changed:
        raise typer.Exit(1)


@app.command()
@handle_errors
def pack(
    dest: Path = typer.Argument(..., help="the result set folder to write records.jsonl.gz into"),
    pe: Optional[str] = typer.Option(None, "--runs", help="comma list of runs (default: every run)"),
    results: List[Path] = typer.Option(
        [Path("results")], "--results", help="results folder (repeatable: one set from several folders)"
    ),
):
    """Keep the evidence: every record of the results folder(s) in one compact records.jsonl.gz (no checkpoints);
    several --results put every draw of an experiment (reruns, more seeds, the other precision) in one set."""
    from ..parsing import parse_list
    from ..results import PACKED_RECORDS, ResultsDir, pack_records

    n = pack_records([ResultsDir(r) for r in results], Path(dest) / PACKED_RECORDS, parse_list(pe, "--runs"))
    size = (Path(dest) / PACKED_RECORDS).stat().st_size
    console.echo(f"packed {n} records into {Path(dest) / PACKED_RECORDS} ({size / 1e3:.0f} kB)")


@app.command()
@handle_errors
def compare(
    reference: Path = typer.Option(Path("results/reference"), "--reference", help="the committed set"),
    metric: str = typer.Option("ppl", "--metric", help="a metric of a task (pebench list shows them)"),
    split: str = SplitOpt,
    protocol: str = typer.Option("nonoverlap", "--protocol", help="e.g. nonoverlap, sliding-s64, fixed-k256"),
    results: Path = ResultsOpt,
):
    """Your run against the committed reference: per cell, yours, the same seed there, and the range a new seed
    is expected in."""
    from ..findings import reference as ref
    from ..results import ResultsDir

    if not (Path(reference) / "records.jsonl.gz").is_file() and not (Path(reference) / "records").is_dir():
        raise PebenchError(
            f"no reference records in {reference}; pass --reference DIR (the committed set is results/reference in a "
            "clone of the repository)"
        )
    df = ref.compare_runs(
        console.load_records(ResultsDir(results)), console.load_records(ResultsDir(reference)), metric, split, protocol
    )
    console.echo(df.to_string(index=False, float_format=lambda v: f"{v:.3f}", na_rep="-"))
    console.echo(ref.summary(df))
