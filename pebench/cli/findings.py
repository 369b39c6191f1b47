"""Commands on the findings: ``report`` (tables and plots from records), ``check`` (decide every claim), ``docs``
(regenerate the generated sections), ``pack`` (keep the evidence) and ``compare`` (a run against the reference)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from ..config import ConfigFlags
from ..util.errors import PebenchError, UsageError
from . import console
from .app import app
from .console import handle_errors
from .flags import takes
from .options import FigureFormatOpt, MetricOpt, OutOpt, ProtocolKeyOpt, ResultsOpt, SplitOpt

NO_FLAGS = ConfigFlags()  # the placeholder where cli.flags.takes puts report's --pe


@app.command()
@handle_errors
@takes(ConfigFlags, "cf", only=("pe",))
def report(
    format: str = typer.Option("table", "--format", help="table | md | csv | latex | json"),
    metric: Optional[str] = MetricOpt,
    protocol: Optional[str] = ProtocolKeyOpt,
    cf: ConfigFlags = NO_FLAGS,  # --pe: the rows (made by cli.flags.takes)
    compare: Optional[List[Path]] = typer.Option(None, "--compare", help="two result folders: A then B"),
    html: bool = typer.Option(False, "--html", help="also write report.html: one self-contained page"),
    figure_format: str = FigureFormatOpt,
    split: str = SplitOpt,
    config: Optional[str] = typer.Option(
        None, "--config", help="the runs of one config (a scale suite's point: tiny-d64); needed where configs mix"
    ),
    results: Path = ResultsOpt,
    out: Optional[Path] = OutOpt,
):
    """Tables and plots from every record; writes report.md/.csv/.tex/.json and plots (PNG, PDF or SVG)."""
    from ..findings import report as rp
    from ..findings.html import write_html
    from ..results import ResultsDir
    from ..util.fsutil import figure_format as figures

    fmt, schemes = rp.REPORT_FORMATS.get(format), cf.pe
    _check_figures(figure_format, html)
    if compare:
        return _compare_sets(compare, metric or "ppl", protocol, schemes, split)
    rd = ResultsDir(results).existing()
    dest = rp.report_destination(rd, out)  # refused before anything is read or shown
    df = console.load_records(rd)
    t = rp.build_table(df, metric or rp.default_metric(df), protocol, schemes, split, config)
    _show(rd, fmt, t)
    if dest is None:
        console.warn(f"note: {rd.root} is a committed result set: nothing written; pass --out DIR for the files")
        return
    with figures(figure_format):
        paths = rp.write_reports(dest.ensure_writable("--out"), t, df, schemes)
    paths += [write_html(rd.root, dest.root / "report.html")] if html else []
    console.warn("wrote " + ", ".join(str(p) for p in paths))


def _show(rd, fmt, t) -> None:
    """The table as asked, with what the reader must know beside it: runs that failed in training (left out) and
    runs trained far short of their config's steps."""
    for r in rd.runs_in("failed"):
        console.warn(f"note: run {r!r} failed during training and is left out")
    console.show(fmt(t))
    if t.note:
        console.warn(t.note)


def _check_figures(figure_format: str, html: bool) -> None:
    from ..util.fsutil import check_figure_format

    if check_figure_format(figure_format) == "pdf" and html:
        raise UsageError("--html embeds png or svg figures; drop --html or use --figure-format png|svg")


def _compare_sets(dirs: list, metric: str, protocol, schemes, split: str) -> None:
    """``report --compare A --compare B``: the two sets' tables side by side."""
    from ..findings import report as rp
    from ..results import ResultsDir

    if len(dirs) != 2:
        raise UsageError("--compare takes exactly two result folders: --compare A --compare B")
    for d in dirs:
        if not Path(d).is_dir():
            raise UsageError(f"--compare {d}: no such results folder")
    a, b = (rp.build_table(console.load_records(ResultsDir(d)), metric, protocol, schemes, split) for d in dirs)
    console.echo(rp.compare_tables(a, b).to_string(index=False, float_format=lambda v: f"{v:.3f}"))


@app.command()
@handle_errors
def check(
    sets: Optional[List[Path]] = typer.Argument(None, help="result sets or folders above them (default: results)"),
    quiet: bool = typer.Option(
        False, "--quiet", help="print the scoreboards and the refused or contradicted claims only"
    ),
    engines: bool = typer.Option(
        True,
        "--engines/--no-engines",
        help="decide each prediction again with the claims engine of its registration commit (cached); "
        "--no-engines: today's engine alone",
    ),
):
    """Decide every claim (claims.yaml beside each result set) and print each set's scoreboard: predictions
    (registered before their records, proved from git) confirmed, failed or pending; observations apart. Exit 1 on
    a refused claim (a prediction edited since its registration or decided on older records, a claim reading an
    untrained run, one that cannot fail) or an observation its data no longer shows; a failed prediction is a
    finding, not an error. A prediction the engine of its registration decides otherwise fails unless the set's
    engine-changes.yaml shows both verdicts and why."""
    from ..findings.claims import check_sets

    if check_sets(sets or [Path("results")], quiet, console.echo, console.warn, engines=engines):
        raise typer.Exit(1)


@app.command()
@handle_errors
def power(
    set_: Path = typer.Argument(..., metavar="SET", help="the result set whose claims.yaml holds the prediction"),
    claim: str = typer.Option(..., "--claim", help="the prediction's id"),
    seeds: str = typer.Option(..., "--seeds", help="the draws in hand to estimate the effect from, e.g. 0,1,2,3,4"),
    precision: str = typer.Option(
        "all", "--precision", help="the in-hand draws' training precision: all | fp32 | bf16"
    ),
    level: float = typer.Option(0.05, "--level", help="the test's level (divide by the family's size to be safe)"),
    floor: int = typer.Option(2, "--floor", help="the fewest draws to ask for"),
    cap: int = typer.Option(20, "--cap", help="the most draws to ask for (the answer says when the cap binds)"),
):
    """How many fresh draws give 80% power to confirm a prediction if its effect is what the draws in hand show:
    run it when registering, and copy its line into the prediction's ``power`` field."""
    from ..findings.claims import power_of
    from ..util.parsing import parse_list

    if precision not in ("all", "fp32", "bf16"):
        raise UsageError(f"--precision must be all, fp32 or bf16, got {precision!r}")
    if not 0 < level < 1:
        raise UsageError(f"--level must be between 0 and 1, got {level}")
    if not 2 <= floor <= cap:
        raise UsageError(f"--floor and --cap need 2 <= floor <= cap, got {floor} and {cap}")
    got = power_of(
        set_,
        claim,
        parse_list(seeds, "--seeds", int, lo=0),
        None if precision == "all" else precision,
        level,
        floor,
        cap,
    )
    console.echo(got.text())


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
    overwrite: bool = typer.Option(False, "--overwrite", help="replace DEST's packed records instead of refusing"),
    update_set: bool = typer.Option(
        False,
        "--update-set",
        help="write into a committed result set (a folder with claims.yaml or packed records): without it, pack "
        "shows what would change there and writes nothing",
    ),
):
    """Keep the evidence: every record of the results folder(s) in one compact records.jsonl.gz (no checkpoints);
    several --results put every draw of an experiment (reruns, more seeds, the other precision) in one set. A DEST
    that already holds packed records is merged only when it is one of the --results; else it is refused (its
    records would be lost) unless --overwrite says so. Into a committed result set pack first shows what would
    change (records added and removed, by row) and writes only with --update-set."""
    from ..results import PACKED_RECORDS, ResultsDir, collect_records, committed_set, pack_change, pack_records
    from ..util.parsing import parse_list

    target = Path(dest) / PACKED_RECORDS
    merged = any(Path(r).resolve() == Path(dest).resolve() for r in results)
    if target.is_file() and not merged and not overwrite:
        raise UsageError(
            f"{target} already holds packed records; add --results {dest} to merge them with the new ones, or "
            "--overwrite to replace them"
        )
    sources, runs = [ResultsDir(r) for r in results], parse_list(pe, "--runs")
    if (owner := committed_set(dest)) is not None:
        console.echo(pack_change(target, collect_records(sources, runs)))
        if not update_set:
            raise UsageError(
                f"{owner} is a committed result set: nothing written; the change is shown above; rerun with "
                "--update-set to write it"
            )
    n = pack_records(sources, target, runs)
    size = (Path(dest) / PACKED_RECORDS).stat().st_size
    console.echo(f"packed {n} records into {Path(dest) / PACKED_RECORDS} ({size / 1e3:.0f} kB)")


@app.command()
@handle_errors
def compare(
    reference: Path = typer.Option(Path("results/reference"), "--reference", help="the committed set"),
    metric: Optional[str] = MetricOpt,
    split: str = SplitOpt,
    protocol: Optional[str] = ProtocolKeyOpt,
    results: Path = ResultsOpt,
):
    """Your run against the committed reference: per cell, yours, the same seed there, and the range a new seed
    is expected in."""
    from ..findings import reference as ref
    from ..results import ResultsDir

    ResultsDir(results).existing()
    if not (Path(reference) / "records.jsonl.gz").is_file() and not (Path(reference) / "records").is_dir():
        raise PebenchError(
            f"no reference records in {reference}; pass --reference DIR (the committed set is results/reference in a "
            "clone of the repository)"
        )
    df = ref.compare_runs(
        console.load_records(ResultsDir(results)),
        console.load_records(ResultsDir(reference)),
        metric or "ppl",
        split,
        protocol or "nonoverlap",
    )
    console.echo(df.to_string(index=False, float_format=lambda v: f"{v:.3f}", na_rep="-"))
    console.echo(ref.summary(df))
