"""One self-contained HTML page of a result set: its tables (intervals, the best value per column marked by the
metric's direction), every plot embedded as data, its checked claims and its provenance. No network: no external
script, style sheet, font or image."""

from __future__ import annotations

import base64
import html
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from ..util.errors import PebenchError

STYLE = """body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;color:#222}
nav,li,p,figcaption{overflow-wrap:anywhere}
body{margin:2em auto;max-width:1400px;padding:0 1.5em;box-sizing:border-box}
.wide{overflow-x:auto}table{border-collapse:collapse;margin:1em 0}caption{text-align:left;font-weight:600}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:right;white-space:nowrap}nav li{margin:2px 0}
th:first-child,td:first-child{text-align:left}td.best{font-weight:bold;background:#e8f4e8}
.held{color:#176317}.pending{color:#8a6d00}.failed{color:#b00020;font-weight:bold}
img{max-width:100%;border:1px solid #eee}
code,pre{background:#f6f6f6}pre{padding:6px;white-space:pre-wrap}figure{margin:1em 0}"""


BEST = '<td class="best">'


def table_html(t, draws: str = "") -> str:
    """A report Table as HTML; the best cell of each column (by the metric's direction) gets class 'best'; ``draws``
    (the seeds and precisions behind its cells) ends the caption, so an n is never unexplained."""
    from .effective import effective_text, has_effective
    from .report.formats import _header

    head = "".join(f"<th>{html.escape(h)}</th>" for h in _header(t))
    body = []
    for lab in t.rows:
        cells = "".join(
            (BEST if t.is_best(lab, L) else "<td>") + html.escape(t.text(lab, L)) + "</td>" for L in t.lengths
        )
        last = [t.ratio_text(lab)] + ([effective_text(t, lab)] if has_effective(t) else [])
        body.append(
            f"<tr><td>{html.escape(lab)}</td>{cells}" + "".join(f"<td>{html.escape(x)}</td>" for x in last) + "</tr>"
        )
    best = "highest" if t.higher_is_better else "lowest"
    cap = f"{t.metric} ({t.protocol}, {t.split} split; {best} is best, marked){draws}"
    table = f"<table id='{anchor(t)}'><caption>{html.escape(cap)}</caption><tr>{head}</tr>{''.join(body)}</table>"
    return f"<div class='wide'>{table}</div>"  # a cell never wraps: a table wider than the page scrolls


def draws_text(df: pd.DataFrame, t) -> str:
    """'; seeds 0-4 and 5-11 ...': the seeds and training precisions of the records behind a table's cells."""
    from .report import seeds_behind

    used = df[(df["split"] == t.split) & df["label"].isin(t.rows)]
    if used.empty or used["run"].astype(str).str.startswith("hf-").all():
        return ""
    return f"; seeds behind these cells: {seeds_behind(used)}; n counts draws, a seed in each precision one"


def anchor(t) -> str:
    """The page anchor of a table: split, metric and protocol."""
    return "t-" + "-".join(str(x) for x in (t.split, t.metric, t.protocol)).replace(" ", "_")


def caption(t) -> str:
    return f"{t.metric} ({t.protocol})"


def _tables(df: pd.DataFrame) -> list[tuple[str, list, str]]:
    """(heading, tables, the task's description) per split and task, in the registry's order: the page's sections."""
    from ..eval.tasks import TASKS
    from .report import build_table, context_metrics

    out = []
    for split in sorted(df["split"].unique()):
        groups: dict = {}
        for m in context_metrics(df[df["split"] == split]):
            for prot in sorted(df[(df["split"] == split)]["protocol"].unique()):
                try:
                    t = build_table(df, m, prot, split=split)
                except PebenchError:
                    continue
                if any(c[0] is not None for c in t.cells.values()):  # a metric no record measured: no table
                    groups.setdefault(t.task, []).append(t)
        for task, ts in groups.items():
            out.append((f"{task} ({split} split)", ts, TASKS.get(task).description))
    return out


def _contents(sections: list[tuple[str, list, str]]) -> str:
    """The contents list: a section per split and task, a link to each of its tables, then claims and plots."""
    items = []
    for i, (head, ts, _) in enumerate(sections):
        links = ", ".join(f"<a href='#{anchor(t)}'>{html.escape(caption(t))}</a>" for t in ts)
        items.append(f"<li><a href='#s{i}'>{html.escape(head)}</a>: {links}</li>")
    items += ["<li><a href='#claims'>Claims</a></li>", "<li><a href='#plots'>Plots</a></li>"]
    return "<nav><h2>Contents</h2><ul>" + "".join(items) + "</ul></nav>"


def _images(root: Path) -> list[str]:
    out = []
    for p in sorted([*root.glob("*.png"), *root.glob("*.svg")]):
        data = base64.b64encode(p.read_bytes()).decode("ascii")
        kind = "svg+xml" if p.suffix == ".svg" else "png"
        out.append(
            f'<figure><img alt="{html.escape(p.name)}" src="data:image/{kind};base64,{data}">'
            f"<figcaption>{html.escape(p.name)}</figcaption></figure>"
        )
    return out


def _claims(root: Path, df: pd.DataFrame) -> list[str]:
    from .claims import CLAIMS_FILE, MARKS, check_set

    if not (root / CLAIMS_FILE).is_file():
        return ["<p>No claims file in this result set.</p>"]
    out = []
    for v in check_set(root, df):
        mark = MARKS[v.state]  # the words `check` and the README use: confirmed, FAILED, observed, ...
        cls = "failed" if mark.isupper() else "pending" if v.state == "pending" else "held"
        out.append(
            f'<li><span class="{cls}">{mark}</span> ({html.escape(v.claim["rule"])}) '
            f"{html.escape(v.claim['text'])}<pre>{html.escape(v.id)}\n{html.escape(v.why)}</pre></li>"
        )
    return ["<ul>" + "".join(out) + "</ul>"]


def _provenance(df_prov: list[dict], created: list[str]) -> str:
    keys = (
        "git_commit",
        "config_hash",
        "config_name",
        "device",
        "host",
        "threads",
        "torch_version",
        "pebench_version",
        "corpus",
        "steps",
    )
    rows = []
    for k in keys:
        vals = sorted({str(p[k]) for p in df_prov if p.get(k) is not None})
        if not vals:
            continue
        rows.append(
            f"<tr><td>{k}</td><td>{html.escape(', '.join(vals[:6]) + (' ...' if len(vals) > 6 else ''))}</td></tr>"
        )
    if created:
        rows.append(f"<tr><td>measured</td><td>{html.escape(min(created))} .. {html.escape(max(created))}</td></tr>")
    return "<div class='wide'><table>" + "".join(rows) + "</table></div>"


def write_html(root: Path, dest: Path | None = None) -> Path:
    """``report.html`` of the result set at ``root`` (tables, plots, claims, provenance), written atomically."""
    from ..results import ResultsDir
    from ..util.fsutil import atomic_write_text
    from .report import records_frame

    rd = ResultsDir(root)
    df = records_frame(rd)
    if df.empty:
        raise PebenchError(f"no records in {root}; run `pebench eval` first")
    recs = list(rd.iter_records())
    prov, created = [r["provenance"] for r in recs], [r["created"] for r in recs if r.get("created")]
    sections = _tables(df)
    parts = [
        f"<h1>pebench: {html.escape(str(root))}</h1>",
        f"<p>{len(df)} records, {df['run'].nunique()} runs; written "
        f"{datetime.now(timezone.utc).isoformat(timespec='seconds')}</p>",
        _contents(sections),
        "<h2>Tables</h2>",
        *[
            f"<h3 id='s{i}'>{html.escape(h)}</h3><p>{html.escape(what)}</p>"
            + "".join(table_html(x, draws_text(df, x)) for x in ts)
            for i, (h, ts, what) in enumerate(sections)
        ],
        "<h2 id='claims'>Claims</h2>",
        *_claims(Path(root), df),
        "<h2 id='plots'>Plots</h2>",
        *_images(Path(dest).parent if dest else Path(root)),
        "<h2>Provenance</h2>",
        _provenance(prov, created),
    ]
    page = (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>pebench report</title>"
        f"<style>{STYLE}</style></head><body>{''.join(parts)}</body></html>\n"
    )
    dest = Path(dest or Path(root) / "report.html")
    atomic_write_text(dest, page)
    return dest
