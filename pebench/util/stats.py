"""Statistics, from scipy: intervals over draws (Student t at any degrees of freedom), over trials (normal), for
proportions (Wilson); the tests a prediction is decided by (one-sided t against a smallest effect, Welch's t,
equivalence by two one-sided tests), the exact sign test of paired prompts, Benjamini-Hochberg adjusted p-values
for a family, and the power function that says how many fresh draws a prediction needs. Torch-free.

A test's unit is a draw (one trained model). Every p-value here is one-sided where the prediction has a direction:
the probability, if the effect were only the smallest one that matters (``delta``) or less, of a mean at least as
far from it as the one measured.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as _st

Z95 = float(_st.norm.ppf(0.975))


def t_quantile(dof: int, level: float = 0.95) -> float:
    """The two-sided ``level`` quantile of Student's t at ``dof`` degrees of freedom (any dof >= 1)."""
    if dof < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {dof}")
    return float(_st.t.ppf(0.5 + level / 2, dof))


def t95(dof: int) -> float:
    """The two-sided 95% Student-t quantile at ``dof`` degrees of freedom."""
    return t_quantile(dof, 0.95)


def mean_ci(values: list[float]) -> tuple[float, float]:
    """Mean and half-width of the 95% Student-t confidence interval (0 for a single value)."""
    n = len(values)
    m = sum(values) / n
    if n < 2:
        return m, 0.0
    sd = float(np.std(np.asarray(values, dtype=float), ddof=1))
    return m, t95(n - 1) * sd / math.sqrt(n)


def wilson(successes: int, n: int) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (95%); (0, 1) for n = 0."""
    if n == 0:
        return 0.0, 1.0
    ci = _st.binomtest(int(successes), int(n)).proportion_ci(0.95, method="wilson")
    return max(0.0, float(ci.low)), min(1.0, float(ci.high))


def mean_interval(values: list[float]) -> tuple[float, float, float]:
    """Mean and a 95% normal interval over independent trials (per-trial accuracies), clipped to [0, 1]."""
    n = len(values)
    m = sum(values) / n
    if n < 2:
        return m, m, m
    sd = float(np.std(np.asarray(values, dtype=float), ddof=1))
    half = Z95 * sd / math.sqrt(n)
    return m, max(0.0, m - half), min(1.0, m + half)


# ---- tests -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Test:
    """One decided test: its p-value (one-sided, against the smallest effect), the estimate and its 95% interval
    (in the test's own scale: a log ratio or a difference), the draws, and its name."""

    p: float
    estimate: float
    lo: float
    hi: float
    n: int
    name: str

    def text(self) -> str:
        return f"{self.name}: {self.estimate:+.3g} [{self.lo:+.3g}, {self.hi:+.3g}] (n={self.n}), p={_p(self.p)}"


def _p(p: float) -> str:
    return f"{p:.2g}" if p >= 1e-4 else "<1e-4"


def one_sample(diffs: list[float], delta: float, direction: str, name: str = "paired") -> Test:
    """One-sided t test that the mean of ``diffs`` is above ``delta`` (direction ``higher``) or below ``-delta``
    (``lower``): H0 is that the effect is no larger than the smallest one that matters."""
    x = np.asarray(diffs, dtype=float)
    n = len(x)
    if n < 2:
        raise ValueError(f"a t test needs at least 2 draws, got {n}")
    m, se = float(x.mean()), float(x.std(ddof=1) / math.sqrt(n))
    h = t95(n - 1) * se
    shift = delta if direction == "higher" else -delta
    alternative = "greater" if direction == "higher" else "less"
    if se == 0:
        p = 0.0 if (m > shift if direction == "higher" else m < shift) else 1.0
    else:
        p = float(_st.ttest_1samp(x, shift, alternative=alternative).pvalue)
    return Test(p, m, m - h, m + h, n, name)


def welch(a: list[float], b: list[float], delta: float, direction: str) -> Test:
    """Welch's one-sided t test that mean(a) - mean(b) is above ``delta`` (``higher``) or below ``-delta``
    (``lower``); unpaired draws, unequal variances."""
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if len(xa) < 2 or len(xb) < 2:
        raise ValueError(f"Welch's test needs at least 2 draws a side, got {len(xa)} and {len(xb)}")
    shift = delta if direction == "higher" else -delta
    r = _st.ttest_ind(xa - shift, xb, equal_var=False, alternative="greater" if direction == "higher" else "less")
    va, vb = xa.var(ddof=1) / len(xa), xb.var(ddof=1) / len(xb)
    se = math.sqrt(va + vb)
    dof = (va + vb) ** 2 / ((va**2 / (len(xa) - 1)) + (vb**2 / (len(xb) - 1))) if se > 0 else len(xa) + len(xb) - 2
    d = float(xa.mean() - xb.mean())
    h = t_quantile(max(1, int(round(dof)))) * se if se > 0 else 0.0
    p = float(r.pvalue) if se > 0 else (0.0 if (d > shift if direction == "higher" else d < shift) else 1.0)
    return Test(p, d, d - h, d + h, len(xa) + len(xb), "Welch")


def equivalence(diffs: list[float], bound: float) -> Test:
    """Two one-sided t tests (TOST) that the mean of ``diffs`` lies within (-bound, +bound): p is the larger of
    the two one-sided p-values; the interval is the 90% one (the one TOST's 5% level corresponds to)."""
    x = np.asarray(diffs, dtype=float)
    n = len(x)
    if n < 2:
        raise ValueError(f"an equivalence test needs at least 2 draws, got {n}")
    m, se = float(x.mean()), float(x.std(ddof=1) / math.sqrt(n))
    if se == 0:
        p = 0.0 if -bound < m < bound else 1.0
    else:
        p_lo = float(_st.ttest_1samp(x, -bound, alternative="greater").pvalue)
        p_hi = float(_st.ttest_1samp(x, bound, alternative="less").pvalue)
        p = max(p_lo, p_hi)
    h = t_quantile(n - 1, 0.90) * se
    return Test(p, m, m - h, m + h, n, f"equivalence within ±{bound:.3g}")


def sign_test(diffs: list[float]) -> tuple[float, int]:
    """One-sided exact sign test that paired differences lean positive: the binomial p-value (probability 1/2 a
    side) of at least as many positive differences among the nonzero ones, and how many were nonzero (zeros, the
    pairs that tie, say nothing about a direction and are dropped). p is 1 where every pair ties."""
    x = np.asarray(diffs, dtype=float)
    pos, n = int((x > 0).sum()), int((x != 0).sum())
    if n == 0:
        return 1.0, 0
    return float(_st.binomtest(pos, n, 0.5, alternative="greater").pvalue), n


def bh_adjust(pvalues: list[float]) -> list[float]:
    """Benjamini-Hochberg adjusted p-values (the false discovery rate of a family), in the input's order."""
    if not pvalues:
        return []
    return [float(v) for v in _st.false_discovery_control(np.asarray(pvalues, dtype=float), method="bh")]


def kendall_tau(x: list[float], y: list[float]) -> tuple[float, float]:
    """Kendall's tau-b between two rankings and its two-sided p-value (scipy)."""
    if len(x) != len(y) or len(x) < 2:
        raise ValueError("kendall_tau needs two lists of the same length, at least 2")
    r = _st.kendalltau(x, y)
    tau = float(r.statistic)
    return (0.0 if math.isnan(tau) else tau), (1.0 if math.isnan(r.pvalue) else float(r.pvalue))


# ---- power -----------------------------------------------------------------------------------------------------


def power_one_sample(effect: float, sd: float, n: int, alpha: float = 0.05) -> float:
    """Power of the one-sided one-sample t test at level ``alpha`` with ``n`` draws, when the true mean exceeds the
    null by ``effect`` and the draws' standard deviation is ``sd`` (noncentral t)."""
    if n < 2:
        return 0.0
    if sd <= 0:
        return 1.0 if effect > 0 else 0.0
    dof = n - 1
    crit = _st.t.ppf(1 - alpha, dof)
    return float(_st.nct.sf(crit, dof, effect / sd * math.sqrt(n)))


def power_welch(effect: float, sd_a: float, sd_b: float, n: int, alpha: float = 0.05) -> float:
    """Power of Welch's one-sided test with ``n`` draws a side (noncentral t, Welch-Satterthwaite dof)."""
    if n < 2:
        return 0.0
    va, vb = sd_a**2 / n, sd_b**2 / n
    if va + vb <= 0:
        return 1.0 if effect > 0 else 0.0
    dof = (va + vb) ** 2 / (va**2 / (n - 1) + vb**2 / (n - 1))
    crit = _st.t.ppf(1 - alpha, dof)
    return float(_st.nct.sf(crit, dof, effect / math.sqrt(va + vb)))


def power_equivalence(mean: float, sd: float, bound: float, n: int, alpha: float = 0.05) -> float:
    """A lower bound on the power of TOST with ``n`` draws: 1 minus the two one-sided tests' miss rates."""
    miss_lo = 1 - power_one_sample(mean + bound, sd, n, alpha)
    miss_hi = 1 - power_one_sample(bound - mean, sd, n, alpha)
    return max(0.0, 1 - miss_lo - miss_hi)


@dataclass(frozen=True)
class Power:
    """What the power function said: the draws needed (capped), whether the cap binds, the power at that count,
    and the estimate it was computed from."""

    draws: int
    capped: bool
    power: float
    effect: float
    sd: float
    n_in_hand: int
    level: float

    def text(self) -> str:
        cap = " (the cap binds)" if self.capped else ""
        return (
            f"{self.draws} draws{cap} for {self.power:.0%} power at level {self.level:.3g}, from {self.n_in_hand} "
            f"draws in hand (effect beyond the smallest that matters {self.effect:+.3g}, sd {self.sd:.3g})"
        )


def draws_for_power(power_at, *, target: float = 0.8, floor: int = 2, cap: int = 20) -> tuple[int, bool, float]:
    """The smallest n in floor..cap with ``power_at(n) >= target``; (cap, True, power) where none reaches it."""
    for n in range(max(2, floor), cap + 1):
        if (pw := power_at(n)) >= target:
            return n, False, pw
    return cap, True, power_at(cap)
