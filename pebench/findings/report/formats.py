"""A table in every format a report writes: rich (the console), markdown, LaTeX, CSV, JSON; two tables side by side;
the format registry ``REPORT_FORMATS`` (adding a format is one function registered here)."""

from __future__ import annotations

import json

import pandas as pd

from ...util.registry import Registry
from ...util.style import style_for
from .. import effective
from .table import Table


def _header(t: Table) -> list[str]:
    last = f"{t.metric} {t.contexts[t.lengths[-1]]}/1x"
    return (
        ["scheme"]
        + [f"{L} ({t.contexts[L]})" for L in t.lengths]
        + [last]
        + (["effective length"] if effective.has_effective(t) else [])
    )


def _rows(t: Table, bold, cell=lambda s: s):
    """(label, [cells], last) per row: formatted cells, the best of each column passed through ``bold``; ``last``
    the ratio to 1x and, for a metric with a threshold, the effective length (effective.py)."""
    for lab in t.rows:
        cells = []
        for L in t.lengths:
            s = cell(t.text(lab, L))
            cells.append(bold(s) if t.is_best(lab, L) else s)
        yield (
            lab,
            cells,
            [t.ratio_text(lab)] + ([effective.effective_text(t, lab)] if effective.has_effective(t) else []),
        )


def _unit(t: Table) -> str:
    """A perplexity's unit: per token of each model's own tokenizer, which differs between rows of pebench's byte
    models and an outside model's subwords (then bpb, per byte, is the column that compares them)."""
    if t.metric not in ("ppl", "ppl_far"):
        return ""
    return (
        " per token (tokenizers differ across these rows: compare them by bpb)" if t.chance.startswith("varies") else ""
    )


def to_markdown(t: Table) -> str:
    head = _header(t)
    best = "highest" if t.higher_is_better else "lowest"
    lines = [
        f"Metric: {t.metric}{_unit(t)}; protocol: {t.protocol}; split: {t.split}"
        + (f"; chance (a uniform guess): {t.chance}" if t.chance else "")
        + f"; best ({best}) value per column in bold."
        + (" Brackets: 95% interval over one seed's trials." if any(c[3] for c in t.cells.values()) else "")
        + (f"\n\n{t.note.removeprefix('note: ').capitalize()}." if t.note else ""),
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for lab, cells, last in _rows(t, lambda s: f"**{s}**"):
        lines.append(f"| {lab} | " + " | ".join(cells + last) + " |")
    return "\n".join(lines) + "\n"


def to_latex(t: Table) -> str:
    head = [h.replace("±", r"$\pm$") for h in _header(t)]
    out = [r"\begin{tabular}{l" + "r" * (len(head) - 1) + "}", r"\toprule", " & ".join(head) + r" \\", r"\midrule"]
    for lab, cells, last in _rows(t, lambda s: rf"\textbf{{{s}}}", lambda s: s.replace("±", r"$\pm$")):
        out.append(" & ".join([lab.replace("_", r"\_")] + cells + last) + r" \\")
    out += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(out) + "\n"


def to_frame(t: Table) -> pd.DataFrame:
    rows = []
    for lab in t.rows:
        for L in t.lengths:
            m, ci, n, one = t.cells.get((lab, L), (None, 0.0, 0, None))
            rows.append(
                {
                    "label": lab,
                    "length": L,
                    "multiple": t.contexts[L],
                    "protocol": t.protocol,
                    "split": t.split,
                    "metric": t.metric,
                    "value": m,
                    "ci95": ci if n > 1 else None,
                    "seeds": n,
                    "lo": one[0] if one else None,
                    "hi": one[1] if one else None,
                }
            )
    return pd.DataFrame(rows)


def to_json(t: Table) -> str:
    eff = {lab: effective.effective_length(t, lab) for lab in t.rows} if effective.has_effective(t) else None
    return (
        json.dumps(
            {
                "metric": t.metric,
                "protocol": t.protocol,
                "split": t.split,
                "lengths": t.lengths,
                "rows": to_frame(t).to_dict(orient="records"),
                "ratio": t.ratio,
                **({"effective_length": eff} if eff else {}),
            },
            indent=2,
        )
        + "\n"
    )


def to_rich(t: Table):
    from rich.table import Table as RichTable

    rt = RichTable(title=f"{t.metric} by evaluation length ({t.protocol}, {t.split} split)")
    for h in _header(t):
        rt.add_column(h, justify="left" if h == "scheme" else "right")
    for lab, cells, last in _rows(t, lambda s: f"[bold]{s}[/]"):
        color = style_for(lab).color
        rt.add_row(lab if color == "#000000" else f"[{color}]{lab}[/]", *cells, *last)
    return rt


def compare_tables(a: Table, b: Table) -> pd.DataFrame:
    """Same cells of two result folders side by side with the difference (b - a)."""
    rows = []
    for lab in sorted(set(a.rows) | set(b.rows)):
        for L in sorted(set(a.lengths) | set(b.lengths)):
            va = a.cells.get((lab, L), (None,))[0]
            vb = b.cells.get((lab, L), (None,))[0]
            rows.append(
                {
                    "label": lab,
                    "length": L,
                    "A": va,
                    "B": vb,
                    "diff": (vb - va) if va is not None and vb is not None else None,
                }
            )
    return pd.DataFrame(rows)


REPORT_FORMATS: Registry = Registry("report format")  # name -> fn(Table) -> text (or a rich renderable)


@REPORT_FORMATS.register("table")
def _fmt_table(t: Table):
    return to_rich(t)


REPORT_FORMATS.register("md")(to_markdown)
REPORT_FORMATS.register("latex")(to_latex)
REPORT_FORMATS.register("json")(to_json)


@REPORT_FORMATS.register("csv")
def _fmt_csv(t: Table) -> str:
    return to_frame(t).to_csv(index=False)
