"""Predictions decided by tests, and the power function used when registering one.

A prediction (``kind: prediction`` in a claims file) states a direction and the smallest effect that matters
(``effect``: ``"20%"`` is a ratio a/b of at least 1.2 or at most 1/1.2, tested on log ratios; a plain number is a
difference in the metric's units; absent, 0). Its rule names the test, on draws (one trained model each):

- ``paired``: the per-draw difference (or log ratio) of a and b, one-sided t test against the smallest effect;
- ``welch``: a's draws against b's, unpaired, Welch's one-sided t test against the smallest effect;
- ``equivalence``: relation ``flat`` with ``within`` (the largest ratio): two one-sided tests that the per-draw log
  ratio lies inside (-log within, +log within);
- ``one-sample``: relation ``above``/``below`` a ``value``: one-sided t test of a's draws;
- ``point``: relation ``undefined``, decided exactly (no test).

A prediction whose cells expand to several comparisons needs each: its p-value is the largest of theirs (an
intersection-union test). A result set's predictions are one family: ``check`` adjusts their p-values by
Benjamini-Hochberg and confirms the ones whose adjusted p is below ``ALPHA``.
"""

from __future__ import annotations

import math
import statistics
from typing import Callable, Optional

from ..util import stats
from .rules import Cell

ALPHA = 0.05  # the false discovery rate of a result set's predictions
PREDICTION_RULES = ("paired", "welch", "equivalence", "one-sample", "point")


def effect_of(claim: dict) -> tuple[float, bool]:
    """The smallest effect that matters and whether it is relative (a percentage: tested on log values)."""
    e = claim.get("effect", 0)
    if isinstance(e, str) and e.strip().endswith("%"):
        return math.log(1 + float(e.strip()[:-1]) / 100), True
    return float(e), False


def _scale(claim: dict, a: Cell) -> Callable[[float], float]:
    relative = effect_of(claim)[1] or claim["relation"] == "flat"
    return math.log if relative else (lambda x: x)


def test(claim: dict, a: Cell, b: Optional[Cell]) -> stats.Test:
    """The prediction's test on one comparison (a against b, or a against the claim's value)."""
    rule, rel = claim["rule"], claim["relation"]
    f = _scale(claim, a)
    delta = effect_of(claim)[0]
    if rule == "equivalence":
        diffs = _paired_diffs(a, b, f)
        return stats.equivalence(diffs, math.log(float(claim["within"])))
    if rule == "one-sample":
        v = f(float(claim["value"]))
        diffs = [f(x) - v for x in a.values.values()]
        return stats.one_sample(diffs, delta, "higher" if rel == "above" else "lower", f"one-sample against {v:.3g}")
    if rule == "welch":
        return stats.welch([f(x) for x in a.values.values()], [f(x) for x in b.values.values()], delta, rel)
    return stats.one_sample(_paired_diffs(a, b, f), delta, rel)


def _paired_diffs(a: Cell, b: Cell, f) -> list[float]:
    draws = sorted(set(a.values) & set(b.values))
    return [f(a.values[d]) - f(b.values[d]) for d in draws]


def power(claim: dict, a: Cell, b: Optional[Cell], level: float, cap: int = 20, floor: int = 2) -> stats.Power:
    """How many fresh draws give 80% power to confirm the prediction at ``level``, if the effect is the one the
    draws in hand (``a`` and ``b``) show: the noncentral t of the prediction's own test."""
    rule, rel = claim["rule"], claim["relation"]
    f = _scale(claim, a)
    delta = effect_of(claim)[0]
    if rule == "welch":
        xa, xb = [f(x) for x in a.values.values()], [f(x) for x in b.values.values()]
        sa, sb = _sd(xa), _sd(xb)
        d = _mean(xa) - _mean(xb)
        beyond = (d - delta) if rel == "higher" else (-d - delta)
        n, capped, pw = stats.draws_for_power(
            lambda k: stats.power_welch(beyond, sa, sb, k, level), floor=floor, cap=cap
        )
        return stats.Power(n, capped, pw, beyond, math.sqrt((sa**2 + sb**2) / 2), min(len(xa), len(xb)), level)
    if rule == "one-sample":
        v = f(float(claim["value"]))
        x = [f(y) - v for y in a.values.values()]
    else:
        x = _paired_diffs(a, b, f)
    m, sd = _mean(x), _sd(x)
    if rule == "equivalence":
        bound = math.log(float(claim["within"]))
        n, capped, pw = stats.draws_for_power(
            lambda k: stats.power_equivalence(m, sd, bound, k, level), floor=floor, cap=cap
        )
        return stats.Power(n, capped, pw, bound - abs(m), sd, len(x), level)
    beyond = (m - delta) if rel in ("higher", "above") else (-m - delta)
    n, capped, pw = stats.draws_for_power(lambda k: stats.power_one_sample(beyond, sd, k, level), floor=floor, cap=cap)
    return stats.Power(n, capped, pw, beyond, sd, len(x), level)


def _mean(x: list[float]) -> float:
    return statistics.fmean(x)


def _sd(x: list[float]) -> float:
    return statistics.stdev(x) if len(x) > 1 else 0.0
