"""The figures a task's records make beside the report (the tasks keep their metrics and records; no plotting):
``TABLE_FIGURES`` beside a table of a task's metric (ppl: loss by token position), ``RECORD_FIGURES`` from a task's
records alone (passkey: exact match by depth and length). Adding a task's figure is one function registered here."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np

from ...util.fsutil import save_plot
from ...util.registry import Registry
from ...util.stats import mean_ci
from ...util.style import CONTEXT_LINE, legend_labels, save_figure, style_for

TABLE_FIGURES: Registry = Registry("table figure")  # task -> fn(Table, df, root, suffix) -> [paths]
RECORD_FIGURES: Registry = Registry("record figure")  # task -> fn(df of its records, root, suffix) -> [paths]


@TABLE_FIGURES.register("ppl")
def ppl_by_position(t, df, root: Path, suffix: str = "") -> list:
    """Loss by token position at the longest length (the learning curves are the report's: findings.curves)."""
    pos = plot_position(t, df, root / f"plot_position{suffix}.png")
    return [pos] if pos else []


def plot_position(t, df, path: Path) -> Optional[Path]:
    """Per-position loss at the longest length, averaged over seeds with a 95% band."""
    import matplotlib.pyplot as plt

    L = t.lengths[-1]
    if t.task != "ppl":
        return None
    sel = df[
        (df["task"] == "ppl")
        & (df["protocol"] == t.protocol)
        & (df["status"] == "ok")
        & (df["length"] == L)
        & df["label"].isin(t.rows)
        & (df["split"] == t.split)
    ]
    if sel.empty or not any(sel["position_buckets"]):
        return None
    fig, ax = plt.subplots(figsize=(7, 4.5))
    rows, curves = [r for r in t.rows if r in set(sel["label"])], {}
    for lab in rows:
        by_hi: dict = {}
        for buckets in sel[sel["label"] == lab]["position_buckets"]:
            for b in buckets or []:  # records without per-position losses add nothing
                if b["tokens"] and b["loss"] is not None:
                    by_hi.setdefault(b["hi"], []).append(b["loss"])
        curves[lab] = [(x, *mean_ci(by_hi[x])) for x in sorted(by_hi)]
    names = legend_labels(rows, curves)  # a curve drawn under an identical one is named in the legend
    for lab in rows:
        xs, stats = [x for x, _, _ in curves[lab]], [(m, c) for _, m, c in curves[lab]]
        st = style_for(lab)
        ax.plot(xs, [m for m, _ in stats], label=names[lab], **{**st.kwargs(), "marker": "."})
        if any(c > 0 for _, c in stats):
            ax.fill_between(
                xs, [m - c for m, c in stats], [m + c for m, c in stats], color=st.color, alpha=0.15, linewidth=0
            )
    ax.axvline(int(sel["train_context"].iloc[0]), label="training context", **CONTEXT_LINE)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("context length of the scored token (bucket end)")
    ax.set_ylabel("mean loss (nats)")
    ax.set_title(f"per-position loss at length {L} ({t.protocol}, {t.split} split)")
    return save_figure(fig, ax, path)


@RECORD_FIGURES.register("passkey")
def passkey_heatmaps(df, root, suffix: str = "") -> list:
    """A heatmap per row label: exact match by depth (rows) and length (columns), the needle-in-a-haystack
    picture; seeds pooled (counts summed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sel = df[(df["task"] == "passkey") & (df["status"] == "ok")]
    paths = []
    for (label, prot), g in sel.groupby(["label", "protocol"]):
        hits: dict = {}
        for L, det in zip(g["length"], g["details"]):
            for c in det["cells"]:
                h = hits.setdefault((c["depth"], int(L)), [0.0, 0])
                h[0] += c["exact"] * c["trials"]
                h[1] += c["trials"]
        depths = sorted({d for d, _ in hits})
        lengths = sorted({L for _, L in hits})
        grid = np.full((len(depths), len(lengths)), np.nan)
        for (d, L), (k, n) in hits.items():
            grid[depths.index(d), lengths.index(L)] = k / n
        fig, ax = plt.subplots(figsize=(1.3 * len(lengths) + 2.6, 0.7 * len(depths) + 1.9))
        # viridis: perceptually uniform and colour-blind safe (red-green maps are not); dark cells get white text
        im = ax.imshow(grid, vmin=0, vmax=1, cmap="viridis", aspect="auto")
        for i in range(len(depths)):
            for j in range(len(lengths)):
                if not np.isnan(grid[i, j]):
                    ink = "white" if grid[i, j] < 0.6 else "black"
                    ax.text(j, i, f"{grid[i, j]:.2f}", ha="center", va="center", fontsize=10, color=ink)
        ax.set_xticks(range(len(lengths)), [str(L) for L in lengths], fontsize=10)
        ax.set_yticks(range(len(depths)), [f"{d:.0%}" for d in depths], fontsize=10)
        ax.set_xlabel("length (tokens)", fontsize=10)
        ax.set_ylabel("needle depth", fontsize=10)
        ax.set_title(f"passkey exact match: {label} ({prot})", fontsize=11)
        fig.colorbar(im, ax=ax, fraction=0.05).set_label("fraction of prompts exact", fontsize=10)
        name = f"passkey_{label}_{prot}{suffix}".replace(" ", "_").replace("+", "-")
        paths.append(save_plot(fig, root / f"heatmap_{name}.png"))
    return paths
