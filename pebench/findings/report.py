"""Reports: records -> pandas -> tables (rich, markdown, CSV, LaTeX, JSON) and plots. Reads records, and for the
learning curves beside the main report every run's training log (``ResultsDir.learning_curves``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import pandas as pd

from ..results import ResultsDir, committed_set, protocol_key, record_precision
from ..tasks import TASKS, task_names
from ..tasks import metric as find_metric
from ..util.errors import PebenchError
from ..util.fsutil import atomic_path, atomic_write_text
from ..util.groups import row_key
from ..util.parsing import canonical_label
from ..util.registry import Registry
from ..util.stats import mean_ci
from ..util.style import CONTEXT_LINE, legend_labels, save_figure, style_for
from . import curves, effective


def records_frame(results: ResultsDir, skipped: Optional[list] = None) -> pd.DataFrame:
    """One row per usable record (runs that failed in training left out); files that could not be used are
    appended to ``skipped`` as (path, reason), so the caller can name them."""
    rows = []
    failed = set(results.runs_in("failed"))
    for rec in results.iter_records(skipped):
        if rec["run"] in failed:
            continue
        if stale := stale_version(rec):
            if skipped is not None:
                skipped.append((results.record_path(rec), stale))
            continue
        rows.append(
            {
                "task": rec["task"],
                "run": rec["run"],
                "label": canonical_label(rec["label"]),  # records written under a scaling's other spelling too
                "scheme": rec["scheme"],
                "variant": rec["variant"],
                "seed": rec["seed"],
                "protocol": protocol_key(rec),
                "length": rec["length"],
                "train_context": rec["train_context"],
                "status": rec["status"],
                **(rec["metrics"] or {}),
                "intervals": rec.get("intervals") or {},
                "details": rec.get("details") or {},
                "position_buckets": (rec.get("details") or {}).get("position_buckets"),
                "split": rec.get("split", "validation"),
                "precision": record_precision(rec),
                "measured_as": (rec.get("provenance") or {}).get("measured_as"),
                "config": (rec.get("provenance") or {}).get("config_name"),  # a scale suite's point: tiny-d64
                "chance": rec.get("chance") or {},
                "git_commit": (rec.get("provenance") or {}).get("git_commit"),
                "created": rec.get("created"),
                # every commit a resumed run trained at, else the one
                "train_commit": (rec.get("provenance") or {}).get("train_commits")
                or (rec.get("provenance") or {}).get("train_commit"),
                "train_tree_clean": (rec.get("provenance") or {}).get("train_tree_clean"),
                "steps": (rec.get("provenance") or {}).get("steps"),
                "corpus": (rec.get("provenance") or {}).get("corpus"),
                "parent": (rec.get("provenance") or {}).get("parent"),  # a run continued from another (a fine-tune)
                "dtype": (rec.get("provenance") or {}).get("dtype"),  # an outside model's evaluation precision
            }
        )
    return pd.DataFrame(rows)


def records_frame_noting(results: ResultsDir, warn) -> pd.DataFrame:
    """``records_frame``, with every record file that could not be used named through ``warn``, one line each."""
    skipped: list = []
    df = records_frame(results, skipped)
    for path, reason in skipped:
        warn(f"warning: skipped record {path}: {reason}")
    if skipped:
        warn(
            f"warning: {len(skipped)} record file(s) skipped; rerun `pebench eval` for those runs to measure them again"
        )
    return df


def stale_version(rec: dict) -> Optional[str]:
    """Why a record measured by another version of its task is left out (None when it is current)."""
    if rec["task"] not in TASKS:
        return None
    have, want = rec.get("task_version", 1), TASKS.get(rec["task"]).version
    return (
        None
        if have == want
        else (
            f"measured by version {have} of task {rec['task']!r}, this pebench's is "
            f"version {want}; rerun `pebench eval --task {rec['task']}`"
        )
    )


@dataclass
class Table:
    """Cells by (label, length): mean, ci, seeds; plus the column metadata used by every format."""

    metric: str
    protocol: str
    lengths: list[int]
    contexts: dict[int, str]
    rows: list[str]
    cells: dict[
        tuple[str, int], tuple
    ]  # (label, length) -> (mean | None, ci, n_seeds, (lo, hi) of one seed's trials | None)
    ratio: dict[
        str, Optional[float]
    ]  # label -> value at the longest length / value at 1x (None where either is missing)
    context: int = 0  # the training context (the 1x length)
    split: str = "validation"
    higher_is_better: bool = False  # the metric's direction: bold and "best" follow it
    digits: int = 2
    task: str = "ppl"
    chosen_protocol: bool = True  # the protocol was asked for (False: the default one of the records present)
    chance: str = ""  # the metric's chance level in these records ('0.1'; 'varies' across them; '' unknown)
    states: dict = field(default_factory=dict)  # (label, length) -> why a cell with records has no value
    note: str = ""  # said beside the table: its runs trained far short of their config's steps ('' when not)

    def text(self, label: str, length: int) -> str:
        """A cell as the tables print it: the value (± ci over seeds, or one seed's trial interval), else why it
        has none: 'undefined' (the scheme has no value there), 'failed', 'not a number', 'invalid' (a value the
        metric cannot take), or 'not evaluated' (no record)."""
        cell = self.cells.get((label, length))
        if cell is None:
            return "not evaluated"
        return _fmt(cell, self.digits) if cell[0] is not None else self.states.get((label, length), "n/a")

    def ratio_text(self, label: str) -> str:
        r = self.ratio.get(label)
        if r is not None:
            return f"{r:.2f}"
        return "n/a (1x missing)" if self.cells.get((label, self.context), (None,))[0] is None else "n/a"

    def best(self, length: int) -> Optional[str]:
        vals = [(c[0], lab) for lab in self.rows if (c := self.cells.get((lab, length))) and c[0] is not None]
        return (
            min(vals)[1] if vals and not self.higher_is_better else max(vals, key=lambda v: v[0])[1] if vals else None
        )

    def is_best(self, label: str, length: int) -> bool:
        """Whether the cell holds the column's best value (every tied cell does)."""
        b = self.best(length)
        return b is not None and self.cells.get((label, length), (None,))[0] == self.cells[(b, length)][0]


def under_trained(df: pd.DataFrame) -> str:
    """A note for runs trained under half their built-in config's steps (the quick look's 40): their table reads
    about the same for every scheme, which says nothing about the encodings, so the table says so; '' otherwise."""
    from ..config import builtin_configs, load_config

    if not {"config", "steps"} <= set(df.columns):  # a frame built without provenance: nothing to say
        return ""
    if "parent" in df.columns:  # a fine-tune's steps are its own, on top of its parent's full training
        df = df[df["parent"].isna()]
    short = []
    for (name, steps), _ in df.groupby([df["config"].fillna(""), df["steps"].fillna(-1)]):
        if name in builtin_configs() and 0 <= steps < (full := load_config(name).train.steps) / 2:
            short.append(f"{int(steps)} steps, {steps / full:.0%} of the {name} config's {full}")
    return (
        f"note: trained {'; '.join(short)}: under-trained, so these numbers say little about the encodings"
        " (`pebench compare` does not judge such runs)"
        if short
        else ""
    )


def one_setup(df: pd.DataFrame, config: Optional[str] = None) -> pd.DataFrame:
    """The records of one training setup, so that no row pools draws trained differently: ``config`` keeps that
    config's records; records of several configs (a scale suite's points) are refused in one line naming them; one
    config's runs at different step counts are keyed apart, their rows labelled ``rope [20 steps]``. Records with no
    config (outside models, trained elsewhere: a row of their own) stand beside any of them."""
    if not {"config", "steps"} <= set(df.columns):  # a frame built without provenance: one setup as far as known
        return df
    named = df["config"].notna()
    if config is not None:
        if config not in set(df.loc[named, "config"]):
            present = ", ".join(sorted(set(df.loc[named, "config"]))) or "none"
            raise PebenchError(f"no records of config {config!r}; configs present: {present}")
        df, named = df[~named | (df["config"] == config)], named[~named | (df["config"] == config)]
    if df.loc[named, "config"].nunique() > 1:
        runs = df[named].groupby("config")["run"].nunique()
        raise PebenchError(
            f"the records come from {len(runs)} configs ({', '.join(f'{c}: {n} runs' for c, n in runs.items())}) and a"
            " row must not pool them: pass --config NAME for one"
        )
    steps = df["steps"].where(df["steps"].notna(), "?").astype(str).str.removesuffix(".0")
    mixed = steps.where(df["steps"].notna()).groupby(df["label"]).transform("nunique") > 1
    if mixed.any():
        df = df.assign(label=df["label"].where(~mixed, df["label"] + " [" + steps + " steps]"))
    return df


def _records_of(
    df: pd.DataFrame,
    m,
    metric: str,
    protocol: Optional[str],
    schemes: Optional[list[str]],
    split: str,
    config: Optional[str] = None,
) -> tuple[pd.DataFrame, str]:
    """The records a table of ``metric`` reads: its task's, on ``split``, under ``protocol`` (default nonoverlap, else
    the first present), of ``schemes``, of one training setup (``one_setup``); and the protocol chosen. One line
    naming what is there when nothing is."""
    if df.empty:
        raise PebenchError("no records to report; run `pebench eval` first")
    if not (df["task"] == m.task).any():
        raise PebenchError(f"no {m.task} records for the metric {metric}; run `pebench eval --task {m.task}`")
    df = df[df["task"] == m.task]
    if not (df["split"] == split).any():
        raise PebenchError(
            f"no records on the {split} split; splits present: {', '.join(sorted(df['split'].unique()))}"
            + ("; evaluate with `pebench eval --split test`" if split == "test" else "")
        )
    df = df[df["split"] == split]
    protocols = sorted(df["protocol"].unique())
    protocol = protocol or ("nonoverlap" if "nonoverlap" in protocols else protocols[0])
    if protocol not in protocols:
        raise PebenchError(f"no {m.task} records with protocol {protocol!r}; protocols present: {', '.join(protocols)}")
    df = df[df["protocol"] == protocol]
    if schemes:
        df = df[df["scheme"].isin(schemes) | df["label"].isin(schemes)]
    if df.empty:
        raise PebenchError(
            f"no records match protocol {protocol!r}"
            + (f" and schemes {schemes}" if schemes else "")
            + f"; protocols present: {', '.join(protocols)}"
        )
    return one_setup(df, config), protocol


def _cells(df: pd.DataFrame, metric: str) -> tuple[dict, dict]:
    """(label, length) -> (mean over seeds, 95% half-width, seeds, one seed's own trials' interval or None); and,
    for a cell whose records give no value, why (``Table.states``). A value the metric cannot take (a perplexity
    below 1, a share outside [0, 1]) is never averaged in: the cell says 'invalid'."""
    m = find_metric(metric)
    cells, states = {}, {}
    for (label, L), g in df.groupby(["label", "length"]):
        ok, seen = [], set()
        for v, s, iv in zip(g[metric], g["status"], g["intervals"]):
            if s != "ok":
                seen.add("undefined" if s == "undefined" else "failed")
            elif v is None or pd.isna(v):
                seen.add("not a number" if v is not None else "not measured")
            elif not m.possible(float(v)):
                seen.add("invalid")
            else:
                ok.append((float(v), iv.get(metric)))
        if ok:
            mean, ci = mean_ci([v for v, _ in ok])
            one = tuple(ok[0][1]) if len(ok) == 1 and ok[0][1] else None  # a single seed: its trials' interval
            cells[(label, int(L))] = (mean, ci, len(ok), one)
        else:
            cells[(label, int(L))] = (None, 0.0, 0, None)
            states[(label, int(L))] = " / ".join(sorted(seen)) or "n/a"
    return cells, states


def build_table(
    df: pd.DataFrame,
    metric: str = "ppl",
    protocol: Optional[str] = None,
    schemes: Optional[list[str]] = None,
    split: str = "validation",
    config: Optional[str] = None,
) -> Table:
    m = find_metric(metric)  # registered with its task and direction (derived ones such as ppl's ratio too)
    chosen = protocol is not None
    df, protocol = _records_of(df, m, metric, protocol, schemes, split, config)
    if m.derived:  # computed from the task's records by the task (ppl's ratio to 1x)
        df = TASKS.get(m.task).derive(df, metric)
    lengths = sorted(int(x) for x in df["length"].unique())
    ctx = int(df["train_context"].mode().iloc[0])
    contexts = {L: f"{L / ctx:g}x" for L in lengths}
    rows = sorted(df["label"].unique(), key=row_key)
    cells, states = _cells(df, metric)
    ratio = {}  # always the longest length over 1x (the training context): never a silently different base
    for lab in rows:
        top, one = cells.get((lab, lengths[-1]), (None,))[0], cells.get((lab, ctx), (None,))[0]
        ratio[lab] = top / one if top is not None and one else None
    return Table(
        metric,
        protocol,
        lengths,
        contexts,
        rows,
        cells,
        ratio,
        ctx,
        split,
        m.higher_is_better,
        m.digits,
        m.task,
        chosen,
        chance_text(df, m),
        states,
        under_trained(df),
    )


def seeds_behind(used: pd.DataFrame) -> str:
    """'0, 1, 2 (3 seeds; trained in bf16 and fp32)': the seeds and training precisions of a table's records."""
    seeds = sorted(int(x) for x in used["seed"].unique())
    n = f"{len(seeds)} seeds" if len(seeds) > 1 else "one seed"
    trained = " and ".join(sorted(str(p) for p in used["precision"].unique()))
    return f"{', '.join(map(str, seeds))} ({n}; trained in {trained})"


def chance_text(df: pd.DataFrame, m) -> str:
    """The chance level of metric ``m`` over the records of a table: what they state (``chance``), else the
    metric's own where it is one number (records written before they stated it); 'varies' where they differ."""
    stated = {c[m.name] for c in df.get("chance", pd.Series([], dtype=object)) if isinstance(c, dict) and m.name in c}
    if not stated and isinstance(m.chance, (int, float)):
        stated = {float(m.chance)}
    if len(stated) > 1:
        return "varies across these records"
    return f"{stated.pop():.3g}" if stated else ""


def _fmt(cell, digits: int) -> str:
    if cell is None or cell[0] is None:
        return "n/a"
    m, ci, n, one = cell
    s = f"{m:.{digits}f}"
    if n > 1:
        s += f" ± {ci:.{digits}f} (n={n})"
    elif one is not None:
        s += f" [{one[0]:.{digits}f}, {one[1]:.{digits}f}]"
    return s


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


def default_metric(df: pd.DataFrame) -> str:
    """The metric a report shows unless told: ppl where there are ppl records, else the first summary metric of the
    first task the records hold (a set of retrieval records alone reports what is there)."""
    if df.empty or "ppl" in set(df["task"]) or not any(t in TASKS for t in df["task"].unique()):
        return "ppl"
    task = TASKS.get(sorted(t for t in df["task"].unique() if t in TASKS)[0])
    return task.summary_metrics()[0]


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
    return paths


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
    return paths + TASKS.get(t.task).plots(t, df, results.root, sfx)


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


def suite_report(results: ResultsDir, df: pd.DataFrame, names: list[str], req) -> tuple[Table, str, list[Path]]:
    """The report of `pebench run`: the table of its first task's headline metric, the context-use table when it
    evaluated several tasks ('' otherwise), and every file written."""
    df = df[df["run"].isin(names)]
    tasks, _ = req.resolved_tasks()
    t = build_table(df, tasks[0].headline or tasks[0].metrics[0].name, None, split=req.split)
    paths = write_reports(results, t, df)
    return t, context_markdown(df, split=req.split) if len(tasks) > 1 else "", paths
