"""The context-use tables: each task's headline metric by length beside perplexity, the effective lengths, and one
length seed by seed."""

from __future__ import annotations

from typing import Optional

import pandas as pd

from ...eval.tasks import TASKS, task_names
from ...eval.tasks import metric as find_metric
from ...util.errors import PebenchError
from ...util.groups import row_key
from .. import effective
from .table import build_table


def effective_tables(df: pd.DataFrame, split: str = "validation") -> dict:
    """Task -> report Tables of its summary metrics that have an effective length (those with records)."""
    out: dict = {}
    for name in [n for n in task_names() if not df.empty and n in set(df["task"])]:
        for m in TASKS.get(name).summary_metrics():
            if find_metric(m).threshold is None:
                continue
            try:
                t = build_table(df, m, split=split)
            except PebenchError:
                continue
            if any(c[0] is not None for c in t.cells.values()):
                out.setdefault(name, []).append(t)
    return out


def context_metrics(df: pd.DataFrame) -> list[str]:
    """The metrics of the context-use table: each task's summary metrics, for the tasks with records, in the
    registry's order."""
    present = set(df["task"]) if not df.empty else set()
    return [m for n in task_names() if n in present for m in TASKS.get(n).summary_metrics()]


def context_markdown(
    df: pd.DataFrame, metrics=None, split: str = "validation", protocols: Optional[dict] = None
) -> str:
    """The context-use table: one row per (label, metric), lengths as columns, each metric's best per column in
    bold (lowest perplexity, highest accuracy); metrics without records are left out."""
    metrics = metrics or context_metrics(df)
    tables = []
    for m in metrics:
        try:
            tables.append(build_table(df, m, (protocols or {}).get(m), split=split))
        except PebenchError:
            continue
    if not tables:
        raise PebenchError("no records for the context-use table")
    lengths = sorted({L for t in tables for L in t.lengths})
    ctx = tables[0].context
    eff = any(effective.has_effective(t) for t in tables)
    head = ["scheme", "metric"] + [f"{L} ({L / ctx:g}x)" for L in lengths] + (["effective length"] if eff else [])
    lines = [
        "Context use: "
        + "; ".join(
            f"{t.metric} ({t.protocol}, {'higher' if t.higher_is_better else 'lower'} is better"
            + (f", chance {t.chance}" if t.chance else "")
            + ")"
            for t in tables
        )
        + f"; split: {split}; best per column in bold; brackets: 95% interval over one seed's trials, "
        "± over seeds."
        + (
            f" Effective length: the longest length up to which the score stays >= "
            f"{effective.RELATIVE:.0%} of its 1x score and >= the metric's threshold "
            "("
            + ", ".join(
                f"{t.metric} {effective.find_metric(t.metric).threshold:g}"
                for t in tables
                if effective.has_effective(t)
            )
            + "), 0 if none; brackets: the same rule on the intervals' ends."
            if eff
            else ""
        ),
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    rows = []
    for t in tables:
        rows += [lab for lab in t.rows if lab not in rows]
    rows.sort(key=row_key)
    for lab in rows:
        first = True
        for t in tables:
            if lab not in t.rows:
                continue
            cells = []
            for L in lengths:
                s = t.text(lab, L) if L in t.lengths else ""
                cells.append(f"**{s}**" if L in t.lengths and t.is_best(lab, L) else s)
            if eff:
                cells.append(effective.effective_text(t, lab) if effective.has_effective(t) else "")
            lines.append(f"| {lab if first else ''} | {t.metric} | " + " | ".join(cells) + " |")
            first = False
    return "\n".join(lines) + "\n"


def by_seed_markdown(
    df: pd.DataFrame, metrics: list[str], length: int, split: str = "validation", protocols: Optional[dict] = None
) -> str:
    """One length, draw by draw (a seed in a training precision: '3' in fp32, '3/bf16' in bf16): a row per label, a
    column per (metric, draw), each draw's value with the 95% interval over its prompts where the task has one. What
    a mean over seeds hides (an outcome that came in some seeds and not in others) shows here."""
    draws = sorted({(int(s), str(p)) for s, p in zip(df["seed"], df["precision"])}) if not df.empty else []
    name = {d: f"{d[0]}" + ("" if d[1] == "fp32" else f"/{d[1]}") for d in draws}

    def table(d, m):
        one = df[(df["seed"] == d[0]) & (df["precision"] == d[1])]
        return build_table(one, m, (protocols or {}).get(m), split=split)

    tables = {d: [table(d, m) for m in metrics] for d in draws}
    if not draws or any(length not in t.lengths for ts in tables.values() for t in ts):
        raise PebenchError(f"no records at {length} tokens for every seed and metric ({', '.join(metrics)})")
    first = tables[draws[0]]
    head = ["scheme"] + [f"{t.metric}, seed {name[d]}" for t in first for d in draws]
    lines = [
        f"Seed by seed at {length} tokens ({length / first[0].context:g}x): "
        + "; ".join(f"{t.metric} ({t.protocol})" for t in first)
        + f"; split: {split}; brackets: 95% interval over the seed's prompts; '/bf16': trained in bf16.",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    rows = sorted({lab for ts in tables.values() for t in ts for lab in t.rows}, key=row_key)
    for lab in rows:
        cells = [tables[d][i].text(lab, length) for i in range(len(first)) for d in draws]
        lines.append(f"| {lab} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
