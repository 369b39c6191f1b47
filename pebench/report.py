"""Reports: records -> pandas -> tables (rich, markdown, CSV, LaTeX, JSON) and plots. Reads records only."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import pandas as pd

from .errors import PebenchError, UsageError
from .fsutil import atomic_path, atomic_write_text
from .results import ResultsDir, protocol_key

METRICS = ("ppl", "bpb", "loss", "ratio")
FORMATS = ("table", "md", "csv", "latex", "json")
# Two-sided 95% Student t quantiles for 1..30 degrees of freedom (scipy is not a dependency).
_T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
        2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
        2.045, 2.042]


def t95(dof: int) -> float:
    return _T95[dof - 1] if dof <= 30 else 1.96


def mean_ci(values: list[float]) -> tuple[float, float]:
    """Mean and half-width of the 95% Student-t confidence interval (0 for a single value)."""
    n = len(values)
    m = sum(values) / n
    if n < 2:
        return m, 0.0
    sd = math.sqrt(sum((v - m) ** 2 for v in values) / (n - 1))
    return m, t95(n - 1) * sd / math.sqrt(n)


def records_frame(results: ResultsDir) -> pd.DataFrame:
    rows = []
    failed = {r for r in results.run_names() if results.status(r).get("state") == "failed"}
    for rec in results.iter_records():
        if rec["run"] in failed:
            continue
        rows.append({
            "run": rec["run"], "label": rec["label"], "scheme": rec["scheme"], "variant": rec["variant"],
            "seed": rec["seed"], "protocol": protocol_key(rec), "length": rec["length"],
            "train_context": rec["train_context"], "status": rec["status"], "loss": rec["loss"],
            "ppl": rec["ppl"], "bpb": rec["bpb"], "tokens_scored": rec["tokens_scored"],
        })
    return pd.DataFrame(rows)


@dataclass
class Table:
    """Cells by (label, length): mean, ci, seeds; plus the column metadata used by every format."""

    metric: str
    protocol: str
    lengths: list[int]
    contexts: dict[int, str]
    rows: list[str]
    cells: dict  # (label, length) -> (mean | None, ci, n_seeds)
    ratio: dict  # label -> value at the longest length / value at the first length

    def best(self, length: int) -> Optional[str]:
        vals = [(c[0], lab) for lab in self.rows if (c := self.cells.get((lab, length))) and c[0] is not None]
        return min(vals)[1] if vals else None


def build_table(df: pd.DataFrame, metric: str = "ppl", protocol: Optional[str] = None,
                schemes: Optional[list[str]] = None) -> Table:
    if metric not in METRICS:
        from .registry import unknown_name_message

        raise UsageError(unknown_name_message("metric", metric, list(METRICS)))
    if df.empty:
        raise PebenchError("no records to report; run `pebench eval` first")
    protocols = sorted(df["protocol"].unique())
    protocol = protocol or ("nonoverlap" if "nonoverlap" in protocols else protocols[0])
    df = df[df["protocol"] == protocol]
    if schemes:
        df = df[df["scheme"].isin(schemes) | df["label"].isin(schemes)]
    if df.empty:
        raise PebenchError(f"no records match protocol {protocol!r}" + (f" and schemes {schemes}" if schemes else "")
                           + f"; protocols present: {', '.join(protocols)}")
    if metric == "ratio":  # value / value at 1x for the same run (perplexity)
        one = df[(df["length"] == df["train_context"]) & (df["status"] == "ok")].set_index("run")["ppl"]
        df = df.assign(ratio=[p / one[r] if r in one.index and p is not None and not pd.isna(p) else None
                              for r, p in zip(df["run"], df["ppl"])])
    lengths = sorted(int(x) for x in df["length"].unique())
    ctx = int(df["train_context"].mode().iloc[0])
    contexts = {L: f"{L / ctx:g}x" for L in lengths}
    order = {n: i for i, n in enumerate(["none", "sinusoidal", "learned", "shaw", "t5", "rope", "alibi"])}
    rows = sorted(df["label"].unique(), key=lambda lab: (order.get(lab.split("+")[0].split(" ")[0], 99), lab))
    cells = {}
    for (label, L), g in df.groupby(["label", "length"]):
        ok = [float(v) for v, s in zip(g[metric], g["status"]) if s == "ok" and v is not None and not pd.isna(v)]
        if ok:
            m, ci = mean_ci(ok)
            cells[(label, int(L))] = (m, ci, len(ok))
        else:
            cells[(label, int(L))] = (None, 0.0, 0)
    ratio = {}
    for lab in rows:
        have = [L for L in lengths if cells.get((lab, L), (None,))[0] is not None]
        ratio[lab] = None
        if have and cells.get((lab, lengths[-1]), (None,))[0] is not None:
            first = cells[(lab, have[0])][0]
            ratio[lab] = cells[(lab, lengths[-1])][0] / first if first else None
    return Table(metric, protocol, lengths, contexts, rows, cells, ratio)


def _fmt(cell, metric: str) -> str:
    if cell is None or cell[0] is None:
        return "n/a"
    m, ci, n = cell
    digits = 3 if metric in ("bpb", "loss", "ratio") else 2
    s = f"{m:.{digits}f}"
    if n > 1:
        s += f" ± {ci:.{digits}f} (n={n})"
    return s


def _header(t: Table) -> list[str]:
    last = "ratio" if t.metric == "ratio" else f"{t.metric} {t.contexts[t.lengths[-1]]}/{t.contexts[t.lengths[0]]}"
    return ["scheme"] + [f"{L} ({t.contexts[L]})" for L in t.lengths] + [last]


def _rows(t: Table, bold, cell=lambda s: s):
    """(label, [cells], ratio) per row: formatted cells, the best of each column passed through ``bold``."""
    for lab in t.rows:
        cells = []
        for L in t.lengths:
            s = cell(_fmt(t.cells.get((lab, L)), t.metric))
            cells.append(bold(s) if t.best(L) == lab else s)
        r = t.ratio.get(lab)
        yield lab, cells, "n/a" if r is None else f"{r:.2f}"


def to_markdown(t: Table) -> str:
    head = _header(t)
    lines = [f"Metric: {t.metric}; protocol: {t.protocol}; best value per column in bold.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for lab, cells, ratio in _rows(t, lambda s: f"**{s}**"):
        lines.append(f"| {lab} | " + " | ".join(cells) + f" | {ratio} |")
    return "\n".join(lines) + "\n"


def to_latex(t: Table) -> str:
    head = [h.replace("±", r"$\pm$") for h in _header(t)]
    out = [r"\begin{tabular}{l" + "r" * (len(head) - 1) + "}", r"\toprule", " & ".join(head) + r" \\", r"\midrule"]
    for lab, cells, ratio in _rows(t, lambda s: rf"\textbf{{{s}}}", lambda s: s.replace("±", r"$\pm$")):
        out.append(" & ".join([lab.replace("_", r"\_")] + cells + [ratio]) + r" \\")
    out += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(out) + "\n"


def to_frame(t: Table) -> pd.DataFrame:
    rows = []
    for lab in t.rows:
        for L in t.lengths:
            m, ci, n = t.cells.get((lab, L), (None, 0.0, 0))
            rows.append({"label": lab, "length": L, "multiple": t.contexts[L], "protocol": t.protocol,
                         "metric": t.metric, "value": m, "ci95": ci if n > 1 else None, "seeds": n})
    return pd.DataFrame(rows)


def to_json(t: Table) -> str:
    return json.dumps({"metric": t.metric, "protocol": t.protocol, "lengths": t.lengths,
                       "rows": to_frame(t).to_dict(orient="records"), "ratio": t.ratio}, indent=2) + "\n"


def to_rich(t: Table):
    from rich.table import Table as RichTable

    rt = RichTable(title=f"{t.metric} by evaluation length ({t.protocol})")
    for h in _header(t):
        rt.add_column(h, justify="left" if h == "scheme" else "right")
    for lab, cells, ratio in _rows(t, lambda s: f"[bold green]{s}[/]"):
        rt.add_row(lab, *cells, ratio)
    return rt


def compare_tables(a: Table, b: Table) -> pd.DataFrame:
    """Same cells of two result folders side by side with the difference (b - a)."""
    rows = []
    for lab in sorted(set(a.rows) | set(b.rows)):
        for L in sorted(set(a.lengths) | set(b.lengths)):
            va = a.cells.get((lab, L), (None,))[0]
            vb = b.cells.get((lab, L), (None,))[0]
            rows.append({"label": lab, "length": L, "A": va, "B": vb,
                         "diff": (vb - va) if va is not None and vb is not None else None})
    return pd.DataFrame(rows)


def report_suffix(t: Table, schemes: Optional[list[str]] = None) -> str:
    """'' for the default view; otherwise e.g. '-sliding-s64-ratio', so a filtered report never
    replaces the main one."""
    parts = [p for p in (t.protocol if t.protocol != "nonoverlap" else "", t.metric if t.metric != "ppl" else "",
                         "+".join(schemes) if schemes else "") if p]
    return ("-" + "-".join(parts)).replace(" ", "_") if parts else ""


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
    return written


def write_plots(results: ResultsDir, t: Table, df: pd.DataFrame, sfx: str = "") -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    root = results.root
    paths = []
    from matplotlib.ticker import ScalarFormatter

    fig, ax = plt.subplots(figsize=(7, 4.5))
    colors = plt.cm.tab20.colors
    for n, lab in enumerate(t.rows):
        pts = [(L, *t.cells[(lab, L)][:2]) for L in t.lengths if t.cells.get((lab, L), (None,))[0] is not None]
        if not pts:
            continue
        xs, ys, cis = zip(*pts)
        style = "--" if "+" in lab else "-"  # RoPE variants dashed next to their base scheme
        (line,) = ax.plot(xs, ys, style, marker="o", label=lab, color=colors[(2 * n) % 20 if n < 10 else (2 * n + 1) % 20])
        if any(c > 0 for c in cis):
            ax.fill_between(xs, [y - c for y, c in zip(ys, cis)], [y + c for y, c in zip(ys, cis)],
                            color=line.get_color(), alpha=0.2)
    ctx = t.lengths[0] if t.contexts[t.lengths[0]] == "1x" else None
    if ctx:
        ax.axvline(ctx, color="gray", linestyle="--", linewidth=1, label="training context")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(ScalarFormatter())
    ax.yaxis.set_minor_formatter(ScalarFormatter())
    ax.set_xlabel("evaluation length (tokens)")
    ax.set_ylabel(t.metric)
    ax.set_title(f"{t.metric} vs evaluation length ({t.protocol})")
    ax.legend(fontsize=7)
    fig.tight_layout()
    with atomic_path(root / f"plot_length{sfx}.png") as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)
    paths.append(root / f"plot_length{sfx}.png")

    # Per-position loss at the longest length: where does each scheme break?
    recs = [r for r in results.iter_records() if protocol_key(r) == t.protocol and r["status"] == "ok"
            and r["label"] in t.rows and r["length"] == t.lengths[-1]]
    if recs:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        seen = set()
        for r in sorted(recs, key=lambda r: t.rows.index(r["label"])):
            if r["label"] in seen:
                continue
            seen.add(r["label"])
            n = t.rows.index(r["label"])
            b = [x for x in r["position_buckets"] if x["tokens"]]
            ax.plot([x["hi"] for x in b], [x["loss"] for x in b], "--" if "+" in r["label"] else "-", marker=".",
                    label=r["label"], color=colors[(2 * n) % 20 if n < 10 else (2 * n + 1) % 20])
        ax.axvline(r["train_context"], color="gray", linestyle="--", linewidth=1, label="training context")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("context length of the scored token (bucket end)")
        ax.set_ylabel("mean loss (nats)")
        ax.set_title(f"per-position loss at length {t.lengths[-1]} ({t.protocol})")
        ax.legend(fontsize=7)
        fig.tight_layout()
        with atomic_path(root / f"plot_position{sfx}.png") as tmp:
            fig.savefig(tmp, format="png", dpi=110)
        plt.close(fig)
        paths.append(root / f"plot_position{sfx}.png")
    return paths
