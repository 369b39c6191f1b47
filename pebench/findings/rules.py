"""The rules that decide a claim from its cells: a ``Cell`` (one compared quantity: a value per draw, or a table's
mean and interval) and ``decide`` (whether a relation holds under a rule, and the numbers that decided it), plus
``expand`` (a cell spec with lists as one spec per combination). Both the claims (``claims``) and their audit
(``audit``) use them."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Optional

from ..util.stats import mean_ci, wilson

Draw = tuple  # (seed, training precision): one trained model; a seed trained in another precision is another draw


@dataclass
class Cell:
    """One compared quantity: a value per draw where records hold them (a rerun of the same draw averaged, never
    counted twice), else a table's mean and interval."""

    name: str
    values: dict[Draw, float] = field(default_factory=dict)  # draw -> value
    mean: Optional[float] = None
    lo: Optional[float] = None
    hi: Optional[float] = None
    n: int = 0
    undefined: int = 0  # records that say the scheme cannot represent this cell (learned beyond its table)
    # draw -> (lo, hi): the 95% interval over that draw's prompts (Wilson's at least, for a proportion)
    trials: dict[Draw, tuple[float, float]] = field(default_factory=dict)
    copy_of: set = field(default_factory=set)  # labels this cell's records were copied from (measured_as)
    metric: str = ""
    commits: dict[Draw, set] = field(default_factory=dict)  # draw -> the commits its records were measured at
    untrained: dict[Draw, str] = field(default_factory=dict)  # draw -> why its run counts as untrained
    length_multiple: Optional[float] = None  # the cell's length over its training context (records only)
    first_created: str = ""  # when the earliest of its records was written (ISO 8601; records only)

    @classmethod
    def from_values(cls, name: str, values: dict, trial: Optional[tuple] = None) -> "Cell":
        vals = list(values.values())
        if not vals:
            return cls(name)
        m, ci = mean_ci(vals)
        lo, hi = (m - ci, m + ci) if len(vals) > 1 else (trial or (None, None))
        return cls(name, dict(values), m, lo, hi, len(vals))

    def seed(self, s: Draw) -> "Cell":
        """Draw ``s`` alone: its value and, where the task has one, the interval over its prompts."""
        return Cell(
            self.name, {s: self.values[s]}, self.values[s], *self.trials.get(s, (None, None)), 1, metric=self.metric
        )

    def text(self) -> str:
        if self.mean is None:
            return f"{self.name}: no value"
        iv = f" [{self.lo:.3g}, {self.hi:.3g}]" if self.lo is not None else ""
        return f"{self.name} = {self.mean:.4g}{iv} (n={self.n})"


def expand(spec: dict) -> list[dict]:
    """A cell spec with lists (label: [a, b], or inside where) as one spec per combination."""
    keys = [
        k
        for k in ("label", "length", "row", "col", "protocol", "split", "metric", "file", "key", "config")
        if isinstance(spec.get(k), list)
    ]
    wkeys = [k for k, v in (spec.get("where") or {}).items() if isinstance(v, list)]
    out = []
    for combo in itertools.product(*(spec[k] for k in keys), *(spec["where"][k] for k in wkeys)):
        one = {**spec, **dict(zip(keys, combo[: len(keys)]))}
        if wkeys:
            one["where"] = {**spec["where"], **dict(zip(wkeys, combo[len(keys) :]))}
        out.append(one)
    return out


def decide(claim: dict, a: Cell, b: Optional[Cell]) -> tuple[bool, str]:
    """Whether the relation holds under the claim's rule, and the numbers that decided it."""
    rel, rule = claim["relation"], claim["rule"]
    if rel == "undefined":
        return a.mean is None and a.undefined > 0, f"{a.undefined} records undefined, {a.n} with a value"
    if a.mean is None or (b is not None and b.mean is None):
        return False, "a cell has no value"
    if rule == "seeds":
        return _per_seed(claim, a, b)
    if rel in ("above", "below") or (rel == "overlap" and b is None):  # overlap with a value: a's interval covers it
        return _against_value(a, float(claim["value"]), rel, rule)
    if rel == "flat":
        r = max(a.mean / b.mean, b.mean / a.mean)
        return r <= claim["within"], f"ratio {a.mean / b.mean:.3f} (allowed 1/{claim['within']}..{claim['within']})"
    if rule == "paired":
        return _paired(a, b, rel)
    if rule == "intervals":
        return _intervals(a, b, rel)
    if rel == "overlap":
        return False, f"rule {rule} cannot decide overlap"
    lower = a.mean < b.mean
    return (lower if rel == "lower" else not lower and a.mean != b.mean), f"{rule}: means {a.mean:.4g} vs {b.mean:.4g}"


def _against_value(a: Cell, v: float, rel: str, rule: str) -> tuple[bool, str]:
    if rule == "intervals":
        if a.lo is None:
            return False, "no interval (one seed, no trials)"
        ok = {"above": a.lo > v, "below": a.hi < v, "overlap": a.lo <= v <= a.hi}[rel]
        return ok, f"interval [{a.lo:.3g}, {a.hi:.3g}] {'covers' if rel == 'overlap' else rel} {v:g}?"
    if rel == "overlap":
        return False, f"rule {rule} cannot decide overlap with a value (it needs an interval)"
    ok = a.mean > v if rel == "above" else a.mean < v
    return ok, f"{rule}: {a.mean:.4g} {'>' if rel == 'above' else '<'} {v:g}?"


def _intervals(a: Cell, b: Cell, rel: str) -> tuple[bool, str]:
    if a.lo is None or b.lo is None:
        return False, "rule intervals needs an interval on both sides (>= 2 seeds, or a task's trial interval)"
    disjoint_low, disjoint_high = a.hi < b.lo, a.lo > b.hi
    ok = {"lower": disjoint_low, "higher": disjoint_high, "overlap": not (disjoint_low or disjoint_high)}[rel]
    return ok, f"95% intervals {'disjoint' if disjoint_low or disjoint_high else 'overlap'}"


def _per_seed(claim: dict, a: Cell, b: Optional[Cell]) -> tuple[bool, str]:
    """The relation in each seed alone (its trial intervals where both sides have them, else its values); holds
    when the number of seeds where it holds is an allowed count of exactly ``of`` seeds."""
    seeds, held = held_draws(claim, a, b)
    if len(seeds) != claim["of"]:
        return False, f"rule seeds: {len(seeds)} seed(s) with values, the claim is about {claim['of']}"
    each = [
        f"{draw_name(s)}: {a.values[s]:.3g}"
        + (f" vs {b.values[s]:.3g}" if b is not None else "")
        + ("" if s in held else " no")
        for s in seeds
    ]
    counts = claim["count"] if isinstance(claim["count"], list) else [claim["count"]]
    lo, hi = wilson(len(held), len(seeds))
    return len(held) in counts, (
        f"rate {len(held)}/{len(seeds)}, Wilson 95% [{lo:.2f}, {hi:.2f}]; "
        f"holds in seeds [{', '.join(map(draw_name, held))}]: {len(held)} of {len(seeds)} "
        f"(claimed {' or '.join(map(str, counts))}; by seed {', '.join(each)})"
    )


def held_draws(claim: dict, a: Cell, b: Optional[Cell]) -> tuple[list, list]:
    """The draws both sides have, and those where the relation holds in the draw alone, as the rule ``seeds``
    decides it: by the draw's trial intervals where both sides have them, else by its values (a ratio for flat)."""
    seeds = sorted(set(a.values) & set(b.values)) if b is not None else sorted(a.values)
    held = []
    for s in seeds:
        one_a, one_b = a.seed(s), None if b is None else b.seed(s)
        rule = "ratio" if claim["relation"] == "flat" else "intervals" if _has_trials(one_a, one_b) else "one-seed"
        if decide({**claim, "rule": rule}, one_a, one_b)[0]:
            held.append(s)
    return seeds, held


def _has_trials(a: Cell, b: Optional[Cell]) -> bool:
    return a.lo is not None and (b is None or b.lo is not None)


def _paired(a: Cell, b: Cell, rel: str) -> tuple[bool, str]:
    seeds = sorted(set(a.values) & set(b.values))
    if len(seeds) < 2:
        return False, f"rule paired needs >= 2 seeds with both values (have {len(seeds)})"
    m, h = mean_ci([a.values[s] - b.values[s] for s in seeds])
    ok = {"lower": m + h < 0, "higher": m - h > 0, "overlap": m - h <= 0 <= m + h}[rel]
    return ok, f"paired a-b over seeds [{', '.join(map(draw_name, seeds))}]: {m:.3g} ± {h:.3g}"


def draw_name(d) -> str:
    """'3' for seed 3 in fp32, '3/bf16' in bf16 (a table's seedless value: '-')."""
    if not isinstance(d, tuple):
        return str(d)
    seed, precision = d
    return f"{seed}" + ("" if precision == "fp32" else f"/{precision}")
