"""Effective length (after NoLiMa, Modarressi et al. 2025): per row of a report table of a metric that declares an
absolute ``threshold``, the longest evaluated length up to which the score stays at least ``RELATIVE`` (85%) of the
row's own 1x score (relative rule) and at least the threshold (absolute rule), at every evaluated length up to it.
0 means the rule fails already at the first length. The interval [lo, hi] applies the same rule to the ends of
each cell's 95% interval: lo with every score at its lower end against 85% of the 1x score's upper end, hi the
reverse (at 1x itself only the absolute rule applies). Torch-free; reports and the HTML page use it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from ..eval.tasks import metric as find_metric

RELATIVE = 0.85


def bounds(cell) -> Optional[tuple[float, float, float]]:
    """(mean, lo, hi) of a report cell: over seeds (± ci), else one seed's trial interval, else the mean alone."""
    if cell is None or cell[0] is None:
        return None
    m, ci, n, one = cell
    if n > 1:
        return m, m - ci, m + ci
    return (m, one[0], one[1]) if one else (m, m, m)


def reach(lengths: list[int], scores: dict, context: int, base: float, threshold: float) -> int:
    """The longest length up to which every score passes both rules (0: none); a missing score ends the reach."""
    best = 0
    for L in lengths:
        s = scores.get(L)
        if s is None or s < threshold or (L != context and s < RELATIVE * base):
            break
        best = L
    return best


def effective_length(t, label: str) -> Optional[tuple[int, int, int]]:
    """(length, lo, hi) of a row of report Table ``t``; None where the metric has no threshold or 1x is missing."""
    threshold = find_metric(t.metric).threshold
    one = bounds(t.cells.get((label, t.context)))
    if threshold is None or one is None:
        return None
    cells = {L: b for L in t.lengths if (b := bounds(t.cells.get((label, L))))}
    point = reach(t.lengths, {L: b[0] for L, b in cells.items()}, t.context, one[0], threshold)
    lo = reach(t.lengths, {L: b[1] for L, b in cells.items()}, t.context, one[2], threshold)
    hi = reach(t.lengths, {L: b[2] for L, b in cells.items()}, t.context, one[1], threshold)
    return point, lo, hi


def effective_text(t, label: str) -> str:
    e = effective_length(t, label)
    if e is None:
        return "n/a"
    return f"{e[0]} [{e[1]}, {e[2]}]"


def has_effective(t) -> bool:
    return find_metric(t.metric).threshold is not None


def plots(tables: dict, root: Path) -> list[Path]:
    """``effective_TASK.png`` per task of ``tables`` (task -> report Tables of its thresholded metrics): each metric
    against length (a panel each), a line per row, the absolute threshold dashed and each row's effective length
    starred."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..util.fsutil import save_plot
    from ..util.style import legend_labels, style_for

    paths = []
    for name, ts in tables.items():
        fig, axes = plt.subplots(1, len(ts), figsize=(4.2 * len(ts) + 1.8, 3.6), squeeze=False)
        panels = [
            {
                lab: [(L, t.cells[(lab, L)][0]) for L in t.lengths if t.cells.get((lab, L), (None,))[0] is not None]
                for lab in t.rows
            }
            for t in ts
        ]
        rows = list(ts[-1].rows)  # the shared legend: a row named '(= other)' only where every panel agrees
        names = legend_labels(
            rows, {lab: [(i, *p) for i, pts in enumerate(panels) for p in pts.get(lab, [])] for lab in rows}
        )
        for ax, t, points in zip(axes[0], ts, panels):
            for lab in t.rows:
                if not (pts := points[lab]):
                    continue
                st = style_for(lab)
                ax.plot(*zip(*pts), label=names.get(lab, lab), **st.kwargs())
                e = effective_length(t, lab)
                if e and e[0]:
                    ax.plot([e[0]], [t.cells[(lab, e[0])][0]], marker="*", markersize=11, color=st.color)
            ax.axhline(find_metric(t.metric).threshold, color="grey", linestyle="--", linewidth=0.8)
            ax.set_xscale("log", base=2)
            ax.set_ylim(-0.02, 1.02)
            ax.set_xlabel("evaluation length (tokens)")
            ax.set_ylabel(f"{t.metric} (0 to 1)")
            ax.set_title(t.metric, fontsize=9)
        axes[0][-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
        fig.suptitle(
            f"{name}: score by length (star: effective length, >= {RELATIVE:.0%} of 1x and >= the dashed threshold)",
            fontsize=9,
        )
        paths.append(save_plot(fig, root / f"effective_{name}.png"))
    return paths
