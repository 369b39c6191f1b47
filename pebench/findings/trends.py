"""Trends along a scale suite's axes, from records (never models): each scheme's metric at each point with its 95%
interval over draws, whether two points rank the schemes alike (Kendall's tau per draw, scipy's, with its interval
over the draws), and a log-log fit of a quantity along an axis with **the point as the unit**: the line goes
through the points' means (draws at one point are replicates, not more points on a line), a lack-of-fit F test
(the points' scatter about the line against the draws' scatter within each point) says whether a line describes
them at all, and a slope is stated only on at least ``MIN_POINTS`` points whose line the test does not reject; only
such a line is extrapolated to a config beyond the axis (labelled as an extrapolation wherever shown). Otherwise
the table shows the points and the shape they make, as an observation.

A point is a config name (``tiny``, ``tiny-d64``: the records' ``config`` column); lengths are multiples of each
point's own training context, so "16x" is 1,024 tokens at context 64 and 4,096 at context 256.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import pandas as pd
from scipy import stats as _st

from ..util.stats import kendall_tau as _kendall
from ..util.stats import mean_ci, t95

MIN_POINTS = 4  # a slope is stated on at least this many points of an axis
LOF_ALPHA = 0.05  # a line whose lack-of-fit p is below this does not describe the points


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
    """Kendall's tau-b of two equally long lists (scipy's; ties counted as neither concordant nor discordant)."""
    return _kendall(x, y)[0]


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
    r = _st.linregress(lx, ly)  # slope, intercept and the slope's standard error
    n, mx = len(lx), sum(lx) / len(lx)
    sxx = sum((v - mx) ** 2 for v in lx)
    se = 0.0 if math.isnan(r.stderr) else float(r.stderr)
    s = se * math.sqrt(sxx)  # the residual standard deviation
    return Fit(float(r.intercept), float(r.slope), t95(n - 2) * se, n, mx, sxx, s)


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


@dataclass(frozen=True)
class AxisFit:
    """A scheme's log ratio along an axis with the point as the unit: each point's x, mean of log y over its draws
    and draw count; the line through the point means (None under two distinct points); the lack-of-fit p (None
    where it cannot be tested: fewer than three points, or no point with two draws)."""

    xs: tuple
    means: tuple  # mean of log y at each point
    ns: tuple
    fit: Optional[Fit]
    lof_p: Optional[float]
    configs: tuple  # the points the scheme has values at, in the order of xs

    @property
    def points(self) -> int:
        return len(self.xs)

    @property
    def stated(self) -> bool:
        """Whether a slope may be stated: at least MIN_POINTS points and a line the lack-of-fit test keeps."""
        return self.fit is not None and self.points >= MIN_POINTS and (self.lof_p is None or self.lof_p >= LOF_ALPHA)

    def shape(self, configs: tuple) -> str:
        """The points as they are (the geometric mean of y at each), for a reader where no slope is stated: one
        entry per config of the axis, "-" where this scheme was not run."""
        at = dict(zip(self.configs, self.means))
        return " -> ".join("-" if c not in at else f"{math.exp(at[c]):.3g}" for c in configs)

    def counts(self, configs: tuple) -> str:
        """The draws at each config of the axis, aligned as ``shape`` is ("0" where the scheme was not run)."""
        at = dict(zip(self.configs, self.ns))
        return "/".join(str(at.get(c, 0)) for c in configs)


def fit_axis(
    df: pd.DataFrame, points: dict, label: str, num: float = 16, den: float = 1, metric: str = "ppl"
) -> Optional[AxisFit]:
    """A scheme's ``num``x/``den``x ratio along an axis given as {config: x}: the log-log line through the points'
    means of log ratio (the point as the unit: its interval on points - 2 degrees of freedom) and the lack-of-fit
    test of that line against the draws' scatter within the points; None where the scheme has no value."""
    xs, groups, configs = [], [], []
    for config, x in sorted(points.items(), key=lambda t: t[1]):
        vals = [math.log(v) for v in ratio_by_draw(df, config, label, num, den, metric).values() if v > 0]
        if vals:
            xs.append(x), groups.append(vals), configs.append(config)
    if not xs:
        return None
    means = tuple(sum(g) / len(g) for g in groups)
    fit = None
    if len(set(xs)) >= 3:
        fit = fit_loglog(xs, [math.exp(m) for m in means])
    return AxisFit(tuple(xs), means, tuple(len(g) for g in groups), fit, lack_of_fit(xs, groups), tuple(configs))


def lack_of_fit(xs: list[float], groups: list[list[float]]) -> Optional[float]:
    """The lack-of-fit F test of a straight line in log x through replicated points: the residual sum of squares of
    the least-squares line over every draw split into pure error (each draw about its point's mean, N - m degrees
    of freedom) and lack of fit (the rest, m - 2); p = P(F > observed). None under three points or without
    replicates."""
    m, n = len(xs), sum(len(g) for g in groups)
    if m < 3 or n - m < 1:
        return None
    lx = [math.log(x) for x, g in zip(xs, groups) for _ in g]
    ly = [v for g in groups for v in g]
    mx, my = sum(lx) / n, sum(ly) / n
    sxx = sum((u - mx) ** 2 for u in lx)
    b = sum((u - mx) * (v - my) for u, v in zip(lx, ly)) / sxx
    a = my - b * mx
    sse = sum((v - (a + b * u)) ** 2 for u, v in zip(lx, ly))
    pure = sum((v - sum(g) / len(g)) ** 2 for g in groups for v in g)
    lof = max(0.0, sse - pure)
    if pure <= 0:
        return 0.0 if lof > 0 else 1.0
    f = (lof / (m - 2)) / (pure / (n - m))
    return float(_st.f.sf(f, m - 2, n - m))


def fit_table(frame: pd.DataFrame, xs_of: dict, schemes: list[str], targets: dict, col: str) -> list[str]:
    """One axis's table: per scheme, the 16x/1x ratio at each point (geometric mean over its draws), the
    lack-of-fit p of a log-log line through them, and the slope with its 95% interval and the extrapolations to
    ``targets`` ({name: x}) only where the slope may be stated (``AxisFit.stated``); else why not. A point where a
    scheme was not run shows "-" in its row, and its fit has one point fewer; a scheme at one point has no row."""
    order = tuple(c for c, _ in sorted(xs_of.items(), key=lambda t: t[1]))
    out = [
        f"| scheme | 16x/1x at each point ({', '.join(order)}) "
        f"| draws | lack-of-fit p | {col} | "
        + " | ".join(f"{t} at x = {x:,.4g} (extrapolated)" for t, x in targets.items())
        + " |",
        "|---|---|---|---|---|" + "---|" * len(targets),
    ]
    for s_ in schemes:
        f = fit_axis(frame, xs_of, s_)
        if f is None or f.points < 2:
            continue  # a scheme without a 16x value (learned), or run at one point of this axis only
        lof = "n/a" if f.lof_p is None else f"{f.lof_p:.2g}"
        if f.stated:
            slope = f"{f.fit.b:+.3f} ± {f.fit.b_half:.3f}"
            preds = [f.fit.predict(x) for x in targets.values()]
            ext = [f"{y:.2f} [{lo:.2f}, {hi:.2f}]" for y, lo, hi in preds]
        else:
            why = (
                f"not stated: {f.points} points ({MIN_POINTS} needed)"
                if f.points < MIN_POINTS
                else "not stated: the line is rejected (lack of fit)"
            )
            slope, ext = why, ["-"] * len(targets)
        out.append(f"| {s_} | {f.shape(order)} | {f.counts(order)} | {lof} | {slope} | " + " | ".join(ext) + " |")
    return out


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

    from ..util import style

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
