"""The files a report writes: where (never a committed set), the tables in every format, each task's own outputs and
the plots (by length and by position), and the report of ``pebench run``."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import pandas as pd

from ...eval.tasks import TASKS
from ...results import ResultsDir, committed_set
from ...util.fsutil import atomic_path, atomic_write_text
from ...util.style import CONTEXT_LINE, legend_labels, save_figure, style_for
from .. import curves, effective
from .context import context_markdown, effective_tables
from .figures import RECORD_FIGURES, TABLE_FIGURES
from .formats import to_frame, to_json, to_latex, to_markdown
from .table import Table, build_table


def report_suffix(t: Table, schemes: Optional[list[str]] = None) -> str:
    """'' for the default view; otherwise e.g. '-sliding-s64-ratio', so a filtered report never
    replaces the main one."""
    parts = [
        p
        for p in (
            t.split if t.split != "validation" else "",
            t.protocol if t.protocol != "nonoverlap" and t.chosen_protocol else "",
            t.metric if t.metric != "ppl" else "",
            "+".join(schemes) if schemes else "",
        )
        if p
    ]
    return ("-" + "-".join(parts)).replace(" ", "_") if parts else ""


def report_destination(results: ResultsDir, out: Optional[Path]) -> Optional[ResultsDir]:
    """Where a report's files go: ``out`` where given (never a committed result set: ``guard_target`` refuses it);
    else the results folder itself, unless it lies in a committed result set (None: write nothing)."""
    if out is not None:
        return ResultsDir(out).ensure_writable("--out")
    return None if committed_set(results.root) is not None else results


def write_reports(results: ResultsDir, t: Table, df: pd.DataFrame, schemes: Optional[list[str]] = None) -> list[Path]:
    """report.md, report.csv (+ .tex/.json) and the PNG plots next to them, all written atomically."""
    root = results.root
    sfx = report_suffix(t, schemes)
    written = []
    for ext, text in (("md", to_markdown(t)), ("tex", to_latex(t)), ("json", to_json(t))):
        atomic_write_text(root / f"report{sfx}.{ext}", text)
        written.append(root / f"report{sfx}.{ext}")
    with atomic_path(root / f"report{sfx}.csv") as tmp:
        to_frame(t).to_csv(tmp, index=False)
    written.append(root / f"report{sfx}.csv")
    written += write_plots(results, t, df, sfx)
    if not sfx:  # the default view also gets each task's own outputs and, with several tasks, the context table
        written += task_outputs(results, df[df["split"] == t.split])
        written += curves.write_curves(results)  # every run's learning curve, where its training logged one
        written += effective.plots(effective_tables(df, t.split), root)
        if df["task"].nunique() > 1:
            atomic_write_text(root / "report-context.md", context_markdown(df, split=t.split))
            written.append(root / "report-context.md")
    return written


def task_outputs(results: ResultsDir, df: pd.DataFrame) -> list[Path]:
    """Whatever each task present in the records writes beside the tables (passkey heatmaps, copy by distance)."""
    paths = []
    for name in sorted(df["task"].unique()) if not df.empty else []:
        if name in TASKS:
            paths += TASKS.get(name).outputs(df[df["task"] == name], results.root)
        if name in RECORD_FIGURES:
            paths += RECORD_FIGURES.get(name)(df[df["task"] == name], results.root)
    return paths


def _plot_length(t: Table, path: Path) -> Path:
    import matplotlib.pyplot as plt
    from matplotlib.ticker import ScalarFormatter

    fig, ax = plt.subplots(figsize=(7, 4.5))
    points = {
        lab: [(L, *t.cells[(lab, L)][:2]) for L in t.lengths if t.cells.get((lab, L), (None,))[0] is not None]
        for lab in t.rows
    }
    names = legend_labels(t.rows, points)
    for lab in t.rows:
        if not (pts := points[lab]):
            continue
        xs, ys, cis = zip(*pts)
        st = style_for(lab)
        ax.plot(xs, ys, label=names[lab], **st.kwargs())
        if any(c > 0 for c in cis):  # 95% interval over seeds
            ax.fill_between(
                xs,
                [y - c for y, c in zip(ys, cis)],
                [y + c for y, c in zip(ys, cis)],
                color=st.color,
                alpha=0.15,
                linewidth=0,
            )
    if t.context in t.lengths:
        ax.axvline(t.context, label="training context", **CONTEXT_LINE)
    ax.set_xscale("log", base=2)
    if not t.higher_is_better:  # perplexities and losses on a log axis; accuracies on a linear one
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(ScalarFormatter())
        ax.yaxis.set_minor_formatter(ScalarFormatter())
    ax.set_xlabel("evaluation length (tokens)")
    ax.set_ylabel(t.metric)
    ax.set_title(f"{t.metric} vs evaluation length ({t.protocol}, {t.split} split)")
    return save_figure(fig, ax, path)


def write_plots(results: ResultsDir, t: Table, df: pd.DataFrame, sfx: str = "") -> list[Path]:
    """The metric against length, and whatever the table's task plots beside it (ppl: loss by position)."""
    import matplotlib

    matplotlib.use("Agg")
    paths = [_plot_length(t, results.root / f"plot_length{sfx}.png")]
    return paths + (TABLE_FIGURES.get(t.task)(t, df, results.root, sfx) if t.task in TABLE_FIGURES else [])


def suite_report(results: ResultsDir, df: pd.DataFrame, names: list[str], req) -> tuple[Table, str, list[Path]]:
    """The report of `pebench run`: the table of its first task's headline metric, the context-use table when it
    evaluated several tasks ('' otherwise), and every file written."""
    df = df[df["run"].isin(names)]
    tasks, _ = req.resolved_tasks()
    t = build_table(df, tasks[0].headline or tasks[0].metrics[0].name, None, split=req.split)
    paths = write_reports(results, t, df)
    return t, context_markdown(df, split=req.split) if len(tasks) > 1 else "", paths
