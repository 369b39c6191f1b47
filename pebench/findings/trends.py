"""Trends along a scale suite's axes, from records (never models): each scheme's metric at each point with its 95%
interval over draws, whether two points rank the schemes alike (Kendall's tau per draw, with its interval over the
draws), and a log-log fit of a quantity against training compute with the interval of its slope and of a
prediction, for extrapolating a trend to a config beyond the axis (labelled as an extrapolation wherever shown).

A point is a config name (``tiny``, ``tiny-d64``: the records' ``config`` column); lengths are multiples of each
point's own training context, so "16x" is 1,024 tokens at context 64 and 4,096 at context 256.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import pandas as pd

from ..stats import mean_ci, t95


@dataclass(frozen=True)
class PointValue:
    config: str
    label: str
    mean: float
    lo: float
    hi: float
    n: int  # draws


def at_multiple(df: pd.DataFrame, multiple: float) -> pd.DataFrame:
    """The rows at ``multiple`` times each row's own training context."""
    return df[df["length"] == (df["train_context"] * multiple).round().astype(int)]


def draw_values(df: pd.DataFrame, config: str, label: str, multiple: float, metric: str = "ppl") -> dict:
    """One value per draw (seed, training precision) of a scheme at a point and a multiple of its context."""
    sel = at_multiple(df[(df["config"] == config) & (df["label"] == label) & (df["status"] == "ok")], multiple)
    grouped = sel.groupby(["seed", "precision"])[metric].mean()
    return {k: float(v) for k, v in grouped.items()}


def point_values(df: pd.DataFrame, configs: list[str], labels: list[str], multiple: float, metric: str = "ppl"):
    """Each (point, scheme): mean and 95% Student-t interval over its draws."""
    out = []
    for c in configs:
        for lab in labels:
            vals = list(draw_values(df, c, lab, multiple, metric).values())
            if not vals:
                continue
            m, h = mean_ci(vals)
            out.append(PointValue(c, lab, m, m - h, m + h, len(vals)))
    return out


def kendall_tau(x: list[float], y: list[float]) -> float:
    """Kendall's tau-b of two equally long lists (ties counted as neither concordant nor discordant)."""
    if len(x) != len(y) or len(x) < 2:
        raise ValueError("kendall_tau needs two lists of the same length, at least 2")
    conc = disc = tx = ty = 0
    for i in range(len(x)):
        for j in range(i + 1, len(x)):
            dx, dy = x[i] - x[j], y[i] - y[j]
            if dx == 0 and dy == 0:
                continue
            if dx == 0:
                tx += 1
            elif dy == 0:
                ty += 1
            elif (dx > 0) == (dy > 0):
                conc += 1
            else:
                disc += 1
    denom = math.sqrt((conc + disc + tx) * (conc + disc + ty))
    return (conc - disc) / denom if denom else 0.0


def rank_agreement(
    df: pd.DataFrame, labels: list[str], config_a: str, config_b: str, multiple: float, metric: str = "ppl"
) -> dict:
    """Kendall's tau between the schemes' values at two points, draw by draw (a draw whose every scheme has a
    value at both points): {draw: tau}."""
    per = {c: {lab: draw_values(df, c, lab, multiple, metric) for lab in labels} for c in (config_a, config_b)}
    draws = set.intersection(*(set(v) for c in per.values() for v in c.values())) if labels else set()
    return {
        d: kendall_tau([per[config_a][lab][d] for lab in labels], [per[config_b][lab][d] for lab in labels])
        for d in sorted(draws)
    }


@dataclass(frozen=True)
class Fit:
    """``log y = a + b log x`` by least squares over (x, y) pairs, with the 95% intervals of the slope and of the
    mean prediction at any x."""

    a: float
    b: float
    b_half: float  # half-width of the slope's 95% interval
    n: int
    x_mean: float  # of log x
    sxx: float
    s: float  # residual standard deviation (log scale)

    def predict(self, x: float) -> tuple[float, float, float]:
        """(y, lo, hi) at x: the fit and the 95% interval of its mean there (wider the farther x lies outside)."""
        lx = math.log(x)
        y = self.a + self.b * lx
        half = t95(self.n - 2) * self.s * math.sqrt(1 / self.n + (lx - self.x_mean) ** 2 / self.sxx)
        return math.exp(y), math.exp(y - half), math.exp(y + half)


def fit_loglog(xs: list[float], ys: list[float]) -> Fit:
    """The log-log least-squares line through (x, y) pairs (every value > 0; at least 3 pairs at 2 distinct x)."""
    if len(xs) != len(ys) or len(xs) < 3 or len(set(xs)) < 2 or min(xs) <= 0 or min(ys) <= 0:
        raise ValueError("fit_loglog needs >= 3 positive pairs at >= 2 distinct x")
    lx, ly = [math.log(v) for v in xs], [math.log(v) for v in ys]
    n, mx, my = len(lx), sum(lx) / len(lx), sum(ly) / len(ly)
    sxx = sum((v - mx) ** 2 for v in lx)
    b = sum((u - mx) * (v - my) for u, v in zip(lx, ly)) / sxx
    a = my - b * mx
    resid = [v - (a + b * u) for u, v in zip(lx, ly)]
    s = math.sqrt(sum(r * r for r in resid) / (n - 2)) if n > 2 else 0.0
    return Fit(a, b, t95(n - 2) * s / math.sqrt(sxx), n, mx, sxx, s)


def ratio_by_draw(
    df: pd.DataFrame, config: str, label: str, num: float = 16, den: float = 1, metric: str = "ppl"
) -> dict:
    """A scheme's metric at ``num`` times its context over its value at ``den`` times, draw by draw."""
    top, bottom = draw_values(df, config, label, num, metric), draw_values(df, config, label, den, metric)
    return {d: top[d] / bottom[d] for d in top if d in bottom}


def with_rerun(df: pd.DataFrame, point: str, rerun: str, schemes: tuple) -> Optional[pd.DataFrame]:
    """The records with ``point``'s draws of each scheme in ``schemes`` replaced by that scheme's draws at the
    config ``rerun`` (the same point trained again, at other rates), named ``point``; the rerun's own rows leave.
    None until the rerun has every one of ``schemes``: a point is fitted with all its reruns or none of them."""
    again = df[(df["config"] == rerun) & df["scheme"].isin(schemes)]
    if set(again["scheme"]) != set(schemes):
        return None
    keep = ~((df["config"] == point) & df["scheme"].isin(schemes)) & (df["config"] != rerun)
    return pd.concat([df[keep], again.assign(config=point)], ignore_index=True)


def fit_axis(
    df: pd.DataFrame, points: dict, label: str, num: float = 16, den: float = 1, metric: str = "ppl"
) -> Optional[Fit]:
    """The log-log fit of a scheme's ``num``x/``den``x ratio against an axis given as {config: x}, one pair per
    draw at each point; None where the scheme has a value at fewer than three distinct x (a line through two
    points says nothing about the shape of a trend)."""
    xs, ys = [], []
    for config, x in points.items():
        for v in ratio_by_draw(df, config, label, num, den, metric).values():
            xs.append(x), ys.append(v)
    return fit_loglog(xs, ys) if len(set(xs)) >= 3 else None


def plot_axis(
    df: pd.DataFrame,
    axis: list[tuple[str, float]],
    labels: list[str],
    multiple: float,
    path,
    xlabel: str,
    metric: str = "ppl",
    ratio_to: Optional[float] = None,
) -> None:
    """One line per scheme, its band the 95% interval over draws, against an axis given as (config, x) pairs
    (log-scale axes); ``ratio_to``: the metric at ``multiple`` over its value at that multiple, draw by draw."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .. import style

    fig, ax = plt.subplots(figsize=(6, 4))
    for lab in labels:
        xs, ms, los, his = [], [], [], []
        for config, x in axis:
            if ratio_to is None:
                vals = list(draw_values(df, config, lab, multiple, metric).values())
            else:
                vals = list(ratio_by_draw(df, config, lab, multiple, ratio_to, metric).values())
            if not vals:
                continue
            m, h = mean_ci(vals)
            xs.append(x), ms.append(m), los.append(m - h), his.append(m + h)
        if not xs:
            continue
        st = style.style_for(lab)  # the per-scheme colours every other plot uses
        ax.plot(xs, ms, label=lab, **st.kwargs())
        ax.fill_between(xs, [max(v, 1e-9) for v in los], his, alpha=0.2, color=st.color, linewidth=0)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(f"{metric} at {multiple:g}x" + (f" / at {ratio_to:g}x" if ratio_to is not None else ""))
    style.save_figure(fig, ax, path)
    plt.close(fig)
