"""Findings as data: each claim names the cells it compares, the relation and the statistical rule; ``check``
decides it from the committed evidence (packed records, or a committed table where a result set has no records)
and says which numbers decided it.

A claims file (``claims.yaml`` beside a result set) holds ``defaults`` (any cell field) and ``claims``::

    claims:
    - id: alibi-flat                      # unique, the name a failure is reported by
      text: ALiBi stays flat from 1x to 16x.
      a: {label: [alibi, shaw, t5], length: 16x}   # a list expands: the claim must hold for each
      b: {length: 1x}                     # fields b does not name are a's
      relation: flat                      # lower | higher | flat | overlap | above | below | undefined
      within: 1.05                        # flat: max(a/b, b/a) of the means
      value: 0                            # above/below: the threshold; overlap without b: the value a's interval
                                          # must cover (no difference from it shown: a fit's slope told from 0)
      rule: intervals                     # intervals | paired | one-seed | ratio | point
      zip: false                          # true: a's and b's lists pair element by element, not every with every

Rules: ``intervals`` disjoint 95% intervals (over seeds; one seed's trial interval where a task has one),
``paired`` a per-seed difference whose 95% interval excludes 0, ``one-seed`` the point values (the text must say
"one seed"), ``ratio`` the means within ``within`` (flat), ``point`` single measurements such as benchmark medians,
``seeds`` the relation decided in each seed on its own (by that seed's trial intervals where a task has them, else
its values): the claim holds when the number of seeds where it holds is ``count`` (a number, or a list of the
numbers allowed) out of ``of`` seeds, which the text must say ("2 of 3 seeds"). It states an outcome that differs
between seeds, such as whether a phase change came, as what it is: a count.

A prediction written before its runs adds ``awaits`` (the runs or command that decide it) and ``registered``
(YYYY-MM-DD): while any of its cells has no records it is pending, neither held nor failed (its text is still
linted); once they are in it is decided like any other claim, and its registration is shown with its numbers.
Such a claim predates the git proof below: it is an observation like the rest, its date kept as what it said.

Two kinds of claim. An **observation** (the default, ``kind: observation``) was written after its data was seen: it
is decided as above, shown as what it is ("observed", with the count of draws that show it), and never counted as a
confirmed finding; one that its data no longer shows is *contradicted*, and ``check`` fails. A **prediction**
(``kind: prediction``) is committed before any record that decides it exists: ``check`` finds the commit that
registered it in git (``registration``), refuses it if its YAML changed since, and decides it by a test (``power``:
``paired``, ``welch``, ``equivalence``, ``one-sample``, ``point``) against its smallest effect that matters
(``effect``) on its ``draws`` fresh draws (pending until all are in). Where a record it reads was measured, or its
model trained, at a commit that does not descend from the registration (or trained from a changed tree), its order
is not proved and it counts only against itself (``settle``): failed where its test fails, refused where it would be
confirmed. ``withdrawn`` takes it out of the count only where the withdrawal precedes every record it reads
(``withdraw``). A prediction no data could contradict (relation ``undefined``: a scheme undefined by construction)
is a **property**, shown apart and never counted. A set's predictions are one family: their p-values are adjusted by
Benjamini-Hochberg (final once none of them is pending: until then a decided one stays pending, its verdict so
far shown as provisional), and a prediction is confirmed when its adjusted p is below 0.05, failed otherwise; a failed
prediction stays on its page as failed (``check`` passes: a failure is a finding). A prediction also records what
the power function said when it was registered (``power``: the text ``pebench power`` prints).

A claim that reads a run that did not train (``untrained``: its 1x perplexity above its point's NoPE) beyond its
training context is refused: a model that did not learn makes no extrapolation claim.

A cell from records: ``label``, ``length`` (tokens or ``Nx``), ``metric``, ``split``, ``protocol``, ``seeds``,
``precision``, ``config`` (the runs' config name: one point of a scale suite, ``tiny-d64``, whose ``Nx`` is of its
own training context), ``unit`` (``draw``, the default: a value per trained model; ``window``: one model's value
per full evaluation window, from its record's ``window_losses``, paired window by window; for an outside model,
which is one draw). A rank agreement between two points: ``tau`` (``{labels: [...], configs: [A, B], length:
16x}``), Kendall's tau of the schemes' values at the two points, one value per draw.
A cell from a committed markdown table: ``file``, ``row``, ``col`` (header text), optional ``table`` (index) and
``where`` ({column: value} for rows keyed by more than their first column). A number from a committed JSON file
(such as the ``profile.json`` a run writes): ``file`` (ending ``.json``) and ``key`` (a dotted path into it); with
``per_draw: true`` (and optional ``seeds``), the file's ``draws`` give one value per trained model, with the commit
it was trained at, which a prediction is decided on as on records.
"""

from __future__ import annotations

import csv
import io
import itertools
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import yaml

from ..results import CLAIMS_FILE, NOT_RECORDED
from ..util.errors import PebenchError, UsageError
from ..util.parsing import canonical_label
from ..util.yamlio import load_yaml
from .rules import Cell, decide, draw_name, expand, held_draws

RELATIONS = ("lower", "higher", "flat", "overlap", "above", "below", "undefined")
RULES = ("intervals", "paired", "one-seed", "ratio", "point", "seeds")
KINDS = ("observation", "prediction")
_CELL_KEYS = {
    "label",
    "per_draw",
    "length",
    "metric",
    "split",
    "protocol",
    "seeds",
    "file",
    "row",
    "col",
    "table",
    "where",
    "task",
    "over",
    "part",
    "key",
    "precision",
    "config",
    "tau",
    "unit",
}


@dataclass
class Verdict:
    claim: dict[str, Any]
    held: bool
    cells: list[Cell]
    why: str
    pending: bool = False  # a prediction (or a claim with ``awaits``) some of whose draws are not in yet
    refused: bool = False  # it cannot be a finding as written (the audit's reasons, or its order not proved)
    p: Optional[float] = None  # a prediction's p-value (the largest over its comparisons)
    p_adj: Optional[float] = None  # adjusted over its set's predictions (Benjamini-Hochberg)
    observed: str = ""  # an observation's count: "lower in 3 of 3 draws"
    withdrawn: str = ""  # a prediction its registration cannot decide, and why (the claim's ``withdrawn``)
    unproven: str = ""  # why git cannot prove a decided prediction came before its data (it can then only fail)

    @property
    def id(self) -> str:
        return self.claim["id"]

    @property
    def kind(self) -> str:
        """observation | prediction | property: a prediction that no data could contradict (``relation:
        undefined``: a scheme that cannot represent a length says so by its construction, trained or not) is a
        property, shown apart and never counted as confirmed."""
        kind = self.claim.get("kind", "observation")
        return "property" if kind == "prediction" and self.claim.get("relation") == "undefined" else kind

    @property
    def state(self) -> str:
        """withdrawn | refused | pending | confirmed | failed (a prediction) | holds | contradicted (a property) |
        observed | contradicted (an observation)."""
        if self.withdrawn:
            return "withdrawn"
        if self.refused:
            return "refused"
        if self.pending:
            return "pending"
        if self.kind == "prediction":
            return "confirmed" if self.held else "failed"
        if self.kind == "property":
            return "holds" if self.held else "contradicted"
        return "observed" if self.held else "contradicted"

    @property
    def bad(self) -> bool:
        """What makes ``check`` fail: a refused claim, or an observation its data no longer shows."""
        return self.state in ("refused", "contradicted")


# ---- loading -------------------------------------------------------------------------------------------------


def load_claims(path: Path) -> list[dict]:
    """The claims of one file, defaults merged in and every field checked (a bad file is one clear line)."""
    try:
        data = load_yaml(Path(path).read_text()) or {}
    except (OSError, yaml.YAMLError) as e:
        raise UsageError(f"cannot read claims file {path}: {e}") from e
    if not isinstance(data, dict) or not isinstance(data.get("claims") or [], list):
        raise UsageError(f"{path}: a claims file is a mapping with `claims:` (a list) and optional `defaults:`")
    defaults, out = data.get("defaults") or {}, []
    for i, c in enumerate(data.get("claims") or []):
        out.append(_checked_claim(c, defaults, f"{path}: claim {i + 1}"))
    ids = [c["id"] for c in out]
    if dup := sorted({x for x in ids if ids.count(x) > 1}):
        raise UsageError(f"{path}: claim ids must be unique; repeated: {', '.join(dup)}")
    return out


def _checked_claim(c: dict, defaults: dict, where: str) -> dict:
    if not isinstance(c, dict) or not c.get("id") or not c.get("text"):
        raise UsageError(f"{where}: needs an id and a text")
    where = f"{where} ({c['id']})"
    rel, rule = c.get("relation"), c.get("rule")
    kind = c.get("kind", "observation")
    if kind not in KINDS:
        raise UsageError(f"{where}: kind {kind!r} is not one of {', '.join(KINDS)}")
    if kind == "prediction":
        return _checked_prediction(c, defaults, where)
    if (aliases := c.get("aliases")) is not None and not (
        isinstance(aliases, dict) and all(isinstance(v, list) for v in aliases.values())
    ):
        raise UsageError(f"{where}: aliases must map a row label to a list of its spellings")
    if rel not in RELATIONS:
        raise UsageError(f"{where}: relation {rel!r} is not one of {', '.join(RELATIONS)}")
    if rule not in RULES:
        raise UsageError(f"{where}: rule {rule!r} is not one of {', '.join(RULES)}")
    if rule == "one-seed" and "one seed" not in c["text"]:
        raise UsageError(f"{where}: a one-seed claim must say 'one seed' in its text")
    if rule == "seeds":
        _check_seed_count(c, where)
    _check_registration(c, where)
    if rel in ("above", "below") and "value" not in c:
        raise UsageError(f"{where}: relation {rel} needs a value")
    covers_value = rel == "overlap" and "b" not in c and "value" in c  # a's interval covers the value
    if covers_value and rule != "intervals":
        raise UsageError(f"{where}: overlap with a value (a's interval covers it) needs rule intervals")
    if rel not in ("above", "below", "undefined") and "b" not in c and not covers_value:
        raise UsageError(f"{where}: relation {rel} compares a with b (or, for overlap, a value); b is missing")
    if rel == "flat" and not (isinstance(c.get("within"), (int, float)) and c["within"] >= 1):
        raise UsageError(f"{where}: relation flat needs within >= 1 (the largest ratio of the means)")
    return _with_sides(c, defaults, where)


def _with_sides(c: dict, defaults: dict, where: str) -> dict:
    """The claim with its cell fields checked, the file's defaults in a, and b completed from a (what it inherits
    named)."""
    for side in ("a", "b"):
        if side in c and (unknown := set(c[side]) - _CELL_KEYS):
            raise UsageError(f"{where}: unknown cell fields {sorted(unknown)}; allowed: {sorted(_CELL_KEYS)}")
    a = {**defaults, **c["a"]}
    if "b" not in c:
        return {**c, "a": a, "b": None, "b_inherits": []}
    b = {**a, **c["b"], "where": {**(a.get("where") or {}), **(c["b"].get("where") or {})}}
    inherited = sorted(set(a) - set(c["b"]) - {"where"}) + [
        f"where.{k}" for k in (a.get("where") or {}) if k not in (c["b"].get("where") or {})
    ]
    return {
        **c,
        "a": a,
        "b": b if b["where"] else {k: v for k, v in b.items() if k != "where"},
        "b_inherits": inherited,
    }


_PREDICTION_RELATIONS = {
    "paired": ("lower", "higher"),
    "welch": ("lower", "higher"),
    "equivalence": ("flat",),
    "one-sample": ("above", "below"),
    "point": ("undefined",),
}


def _checked_prediction(c: dict, defaults: dict, where: str) -> dict:
    """A prediction: a test (its rule) fit for its relation, the fresh draws it is decided on, its effect."""
    from .power import PREDICTION_RULES, effect_of

    rel, rule = c.get("relation"), c.get("rule")
    if rule not in PREDICTION_RULES:
        raise UsageError(f"{where}: a prediction's rule {rule!r} is not one of {', '.join(PREDICTION_RULES)}")
    if rel not in _PREDICTION_RELATIONS[rule]:
        raise UsageError(
            f"{where}: rule {rule} decides relation {' or '.join(_PREDICTION_RELATIONS[rule])}, not {rel!r}"
        )
    if "awaits" in c or "registered" in c:
        raise UsageError(f"{where}: a prediction is registered by its commit (git proves it); drop awaits/registered")
    if "withdrawn" in c and not (isinstance(c["withdrawn"], str) and c["withdrawn"].strip()):
        raise UsageError(f"{where}: withdrawn says why the prediction cannot be decided as registered (a sentence)")
    draws = c.get("draws")
    if not (isinstance(draws, int) and not isinstance(draws, bool) and draws >= (1 if rule == "point" else 2)):
        raise UsageError(f"{where}: a prediction needs draws, the number of fresh draws it is decided on (>= 2)")
    try:
        effect_of(c)
    except (TypeError, ValueError) as e:
        raise UsageError(f"{where}: effect must be a number or a percentage such as '5%' ({e})") from e
    if rel == "flat" and not (isinstance(c.get("within"), (int, float)) and c["within"] > 1):
        raise UsageError(f"{where}: an equivalence needs within > 1 (the largest ratio that is still flat)")
    if rel in ("above", "below") and "value" not in c:
        raise UsageError(f"{where}: relation {rel} needs a value")
    if rule in ("paired", "welch", "equivalence") and "b" not in c:
        raise UsageError(f"{where}: rule {rule} compares a with b; b is missing")
    return _with_sides(c, defaults, where)


def _check_registration(c: dict, where: str) -> None:
    """A claim written before its runs names them (``awaits``: the command or runs that decide it) and the day it
    was written (``registered``: YYYY-MM-DD); git keeps the proof of the order."""
    import datetime

    if "awaits" not in c and "registered" not in c:
        return
    day = c.get("registered")
    if isinstance(day, str):
        try:
            day = datetime.date.fromisoformat(day)
        except ValueError:
            day = None
    if not (isinstance(c.get("awaits"), str) and c["awaits"].strip() and isinstance(day, datetime.date)):
        raise UsageError(
            f"{where}: a claim registered before its runs needs awaits (the runs) and registered (YYYY-MM-DD)"
        )
    c["registered"] = day.isoformat()


def _check_seed_count(c: dict, where: str) -> None:
    of, count = c.get("of"), c.get("count")
    counts = count if isinstance(count, list) else [count]
    if not (isinstance(of, int) and of >= 1 and counts and all(isinstance(k, int) and 0 <= k <= of for k in counts)):
        raise UsageError(
            f"{where}: rule seeds needs of (the number of seeds, >= 1) and count (a number of them, "
            f"or a list of numbers, each 0..of)"
        )
    if f"of {of} seeds" not in c["text"] and f"of {of} draws" not in c["text"]:  # a draw: a seed in one precision
        raise UsageError(
            f"{where}: a seeds claim must say how many of how many in its text ('of {of} seeds' or 'of {of} draws')"
        )


# ---- cells from evidence -------------------------------------------------------------------------------------


def parse_length(v, context: int) -> int:
    if isinstance(v, str) and v.endswith("x"):
        return int(round(float(v[:-1]) * context))
    return int(v)


class Evidence:
    """The cells of one result set: its records (packed or loose) and its committed markdown tables."""

    def __init__(self, root: Path, df=None):
        self.root = Path(root)
        self._df = df  # the set's records frame, where the caller has read it already
        self._tables: dict = {}
        self._untrained: Optional[dict] = None
        self._frames: dict = {}  # (task, config) -> the records of that task (at that point): filtered once

    @property
    def df(self):
        if self._df is None:
            from ..results import ResultsDir
            from .report import records_frame

            self._df = records_frame(ResultsDir(self.root))
        return self._df

    @property
    def untrained(self) -> dict[str, str]:
        """The runs that did not train: run name -> why (its 1x perplexity above the NoPE runs' mean at its point,
        on the same split). NoPE learns only from the causal mask, so a scheme that ends above it learned less
        than no position at all; a claim that reads such a run beyond its context is refused."""
        if self._untrained is None:
            self._untrained = untrained_runs(self.df)
        return self._untrained

    def cell(self, spec: dict) -> Cell:
        """The spec's cell; with ``over`` (fields that differ), the ratio of this cell to that one (per seed
        where records hold seeds)."""
        if "over" in spec:
            base = {k: v for k, v in spec.items() if k != "over"}
            over = {**base, **spec["over"], "where": {**(base.get("where") or {}), **(spec["over"].get("where") or {})}}
            num, den = self.cell(base), self.cell(over)
            return ratio_cell(num, den)
        if "tau" in spec:
            return self._tau_cell(spec)
        if "file" not in spec:
            return self._record_cell(spec)
        return self._json_cell(spec) if spec["file"].endswith(".json") else self._table_cell(spec)

    def _record_cell(self, spec: dict) -> Cell:
        from ..tasks import metric as find_metric

        metric = spec.get("metric", "ppl")
        if self.df.empty:
            raise UsageError(f"{self.root}: no records (packed or loose) for the claims that name no file")
        m = find_metric(metric)
        df, ctx = self._frame(m.task, spec.get("config"))
        sel = df[
            (df["label"] == canonical_label(spec["label"]))  # a scaling's other spelling is read as its one name
            & (df["length"] == parse_length(spec["length"], ctx))
            & (df["split"] == spec.get("split", "validation"))
            & (df["protocol"] == spec.get("protocol", "nonoverlap"))
        ]
        if spec.get("seeds") is not None:
            sel = sel[sel["seed"].isin(spec["seeds"] if isinstance(spec["seeds"], list) else [spec["seeds"]])]
        if spec.get("precision") is not None:
            sel = sel[sel["precision"] == spec["precision"]]
        undefined = int((sel["status"] == "undefined").sum())
        draws = _by_draw(sel, metric)
        if spec.get("unit", "draw") == "window":
            values, trials, copies, commits = _windows(sel[sel["status"] == "ok"], metric, _cell_name(spec, metric))
        elif spec.get("unit", "draw") == "draw":
            values, trials, copies = _draws(draws, metric, m.proportion)
            commits = _commits(draws)
        else:
            raise UsageError(f"cell unit {spec['unit']!r} is not one of draw, window")
        cell = Cell.from_values(_cell_name(spec, metric), values, next(iter(trials.values()), None))
        cell.undefined, cell.trials, cell.copy_of, cell.metric = undefined, trials, copies, metric
        cell.commits = commits
        cell.first_created = min((str(c) for c in sel["created"] if isinstance(c, str)), default="")
        if ctx:
            cell.length_multiple = parse_length(spec["length"], ctx) / ctx
        bad = self.untrained
        for key, rows in draws.items():
            if why := next((bad[r["run"]] for r in rows if r["run"] in bad), None):
                cell.untrained[key] = why
        return cell

    def _frame(self, task: str, config: Optional[str]):
        """(the records of one task, at one point of a scale suite where ``config`` names it, and their training
        context: the mode of the point's runs', which an ``Nx`` length multiplies), filtered once per set."""
        key = (task, config)
        if key not in self._frames:
            df = self.df[self.df["task"] == task]
            if config is not None:  # one point of a scale suite: its runs' config (its own context)
                df = df[df["config"] == config]
            self._frames[key] = (df, int(df["train_context"].mode().iloc[0]) if not df.empty else 0)
        return self._frames[key]

    def _tau_cell(self, spec: dict) -> Cell:
        """Kendall's tau between two points' rankings of the schemes (``tau: {labels, configs: [A, B], length}``,
        the length a multiple of each point's own context), one value per draw both points hold."""
        from .trends import rank_agreement

        t = spec["tau"]
        length = str(t.get("length", "16x"))
        if not length.endswith("x") or len(t.get("configs") or []) != 2 or len(t.get("labels") or []) < 2:
            raise UsageError("a tau cell needs labels (>= 2), configs (two points) and a length Nx")
        df = self.df[self.df["split"] == spec.get("split", "validation")]
        df = df[(df["task"] == "ppl") & (df["protocol"] == spec.get("protocol", "nonoverlap"))]
        a, b = t["configs"]
        taus = rank_agreement(df, list(t["labels"]), a, b, float(length[:-1]), spec.get("metric", "ppl"))
        name = f"Kendall's tau of {', '.join(t['labels'])} at {length}, {a} vs {b}"
        cell = Cell.from_values(name, taus)
        cell.metric = "tau"
        return cell

    def _json_cell(self, spec: dict) -> Cell:
        """One number of a committed JSON file, at the dotted path ``key``; with ``per_draw``, a value per draw."""
        import json

        path, key = self.root / spec["file"], spec.get("key")
        if not key:
            raise UsageError(f"{path}: a cell from a JSON file needs a key (a dotted path to a number)")
        if spec.get("per_draw") and not path.exists():  # a prediction's measurement not made yet: no draws in
            return Cell(f"{spec['file']}: {key}")
        try:
            value = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise UsageError(f"cannot read {path}: {e}") from e
        if spec.get("per_draw"):
            return _per_draw_cell(f"{spec['file']}: {key}", value, key, spec.get("seeds"))
        for part in key.split("."):
            if not isinstance(value, dict) or part not in value:
                raise UsageError(f"{path}: no number at {key!r} ({part!r} is missing)")
            value = value[part]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise UsageError(f"{path}: {key!r} is {value!r}, not a number")
        return Cell(f"{spec['file']}: {key}", {}, float(value), None, None, 1)

    def _table_cell(self, spec: dict) -> Cell:
        file = spec["file"]
        if file not in self._tables:
            text = (self.root / file).read_text()
            self._tables[file] = csv_table(text) if file.endswith(".csv") else markdown_tables(text)
        idx = spec.get("table")
        cands = [self._tables[file][idx]] if idx is not None else [t for t in self._tables[file] if spec["col"] in t[0]]
        where = {**({0: spec["row"]} if "row" in spec else {}), **(spec.get("where") or {})}
        name = f"{file}: " + ", ".join(f"{v}" for v in where.values()) + f" / {spec['col']}"
        for header, rows in cands:
            cols = {k: (k if isinstance(k, int) else header.index(k)) for k in where if k in header or k == 0}
            if len(cols) < len(where):
                continue
            for row in rows:
                if all(row[cols[k]] == str(v) for k, v in where.items()):
                    text = row[header.index(spec["col"])]
                    if "part" in spec:  # 'digit / exact': the n-th of several values in one cell
                        text, name = text.split(" / ")[spec["part"]].strip(), f"{name} [{spec['part']}]"
                    return table_value(name, text)
        raise UsageError(f"{self.root / file}: no cell where {where} in column {spec['col']!r}")


def _cell_name(spec: dict, metric: str) -> str:
    prot = spec.get("protocol", "nonoverlap")
    return (
        f"{spec['label']} {metric} @{spec['length']} ({spec.get('split', 'validation')}"
        + ("" if prot == "nonoverlap" else f", {prot}")
        + (f", seed {spec['seeds']}" if "seeds" in spec else "")
        + (f", {spec['precision']}" if "precision" in spec else "")
        + (f", {spec['config']}" if "config" in spec else "")
        + ")"
    )


def _by_draw(sel, metric: str) -> dict[tuple[int, str], list[dict]]:
    """A cell's records grouped by draw (seed, precision), as plain rows of the columns a draw's reading needs (a
    cell holds a few dozen records; grouping them in Python is many times cheaper than a DataFrame group-by)."""
    cols = [c for c in (*_DRAW_COLUMNS, metric) if c in sel.columns]
    out: dict = {}
    for r in sel[list(dict.fromkeys(cols))].to_dict("records"):
        if any(r[c] is None or pd_isna(r[c]) for c in ("seed", "precision")):  # no draw (a group-by drops it too)
            continue
        out.setdefault((int(r["seed"]), str(r["precision"])), []).append(r)
    return dict(sorted(out.items()))


_DRAW_COLUMNS = (
    *("seed", "precision", "status", "run", "intervals", "details", "measured_as"),
    *("git_commit", "train_commit", "train_tree_clean"),
)
TRAINED, DIRTY = "trained:", "dirty:"  # a model trained at the commit; the same from a tree not the commit's


def _draws(draws: dict, metric: str, proportion: bool) -> tuple[dict, dict, set]:
    """Per draw (seed, precision): the mean of its records' values (a rerun of one draw is not another sample),
    the interval over its prompts (for a proportion, at least Wilson's on its prompts: never zero-wide), and the
    labels any record was copied from. Only records whose status is ok count."""
    from ..util.stats import wilson

    values, trials, copies = {}, {}, set()
    for key, rows in draws.items():
        g = [r for r in rows if r["status"] == "ok"]
        vals = [float(r[metric]) for r in g if r.get(metric) is not None and not pd_isna(r[metric])]
        if not vals:
            continue
        values[key] = sum(vals) / len(vals)
        ivs = [tuple(r["intervals"][metric]) for r in g if r["intervals"].get(metric)]
        if proportion:
            n = max(prompts_of(r["details"]) for r in g)
            lo, hi = wilson(round(values[key] * n), n) if n else (0.0, 1.0)
            ivs = [(min(lo, *(i[0] for i in ivs)), max(hi, *(i[1] for i in ivs)))] if ivs else [(lo, hi)]
        if ivs:
            trials[key] = ivs[0]
        copies |= {r["measured_as"] for r in g if isinstance(r.get("measured_as"), str)}
    return values, trials, copies


WINDOW_METRICS = {"loss": lambda x: x, "ppl": math.exp}


def _windows(sel, metric: str, name: str) -> tuple[dict, dict, set, dict]:
    """``unit: window``: one model's evidence, a value per full window of its one record at this cell (``details.
    window_losses``, in stream order), keyed (window index, precision) so that two cells over the same stream at the
    same length pair window by window; the commit of the record for every window."""
    if metric not in WINDOW_METRICS:
        raise UsageError(f"{name}: unit window reads {' or '.join(WINDOW_METRICS)} per window, not {metric}")
    if len(sel) > 1:
        raise UsageError(f"{name}: unit window reads one record per cell, found {len(sel)} (one model, one seed)")
    values, commits = {}, {}
    for _, r in sel.iterrows():
        losses = (r["details"] or {}).get("window_losses")
        if not losses:
            raise UsageError(f"{name}: its record keeps no window_losses (too many windows, or measured before them)")
        for i, x in enumerate(losses):
            values[(i, str(r["precision"]))] = WINDOW_METRICS[metric](float(x))
            commits[(i, str(r["precision"]))] = {r["git_commit"] if isinstance(r["git_commit"], str) else None}
    return values, {}, {c for c in sel["measured_as"] if isinstance(c, str)}, commits


def _commits(draws: dict) -> dict:
    """Per draw, the commits its records were measured at (None where a record names none) and, where a record
    names it, the commit its model trained at (marked ``DIRTY`` when that tree was not clean)."""
    out = {}
    for key, rows in draws.items():
        out[key] = {r.get("git_commit") if isinstance(r.get("git_commit"), str) else None for r in rows}
        for r in rows:
            trained = r.get("train_commit")
            for train in [trained] if isinstance(trained, str) else trained if isinstance(trained, list) else []:
                if train != NOT_RECORDED:
                    out[key].add((DIRTY if r.get("train_tree_clean") is False else TRAINED) + train)
    return out


def untrained_runs(df) -> dict[str, str]:
    """Runs whose 1x perplexity (non-overlapping windows) is above the mean of the NoPE runs at the same point
    (config) and split: run -> why. Sets without NoPE at a point mark nothing there."""
    if df is None or df.empty or "ppl" not in df:
        return {}
    one = df[(df["task"] == "ppl") & (df["protocol"] == "nonoverlap") & (df["length"] == df["train_context"])]
    one = one[one["status"] == "ok"]
    out: dict[str, str] = {}
    for (_point, split), g in one.groupby([one["config"].fillna(""), "split"]):
        nope = g[g["label"] == "none"]["ppl"].dropna()
        if nope.empty:
            continue
        floor = float(nope.mean())
        for run, r in g[g["scheme"] != "none"].groupby("run"):
            ppl = float(r["ppl"].mean())
            if ppl > floor and run not in out:
                out[run] = f"{run}: 1x perplexity {ppl:.3g} above NoPE's {floor:.3g} at its point ({split})"
    return out


def prompts_of(details: dict) -> int:
    """How many prompts a record's proportion was measured on: its cells' trials summed (one cell per depth or
    distance), else its trials."""
    cells = (details or {}).get("cells") or []
    if cells and all(isinstance(c, dict) and "trials" in c for c in cells):
        return int(sum(c["trials"] for c in cells))
    return int((details or {}).get("trials") or 0)


def csv_table(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """A CSV file as one table (header, rows)."""
    rows = list(csv.reader(io.StringIO(text)))
    return [(rows[0], rows[1:])] if rows else []


def ratio_cell(num: Cell, den: Cell) -> Cell:
    name = f"({num.name}) / ({den.name})"
    if num.values and den.values:
        out = Cell.from_values(name, {s: num.values[s] / den.values[s] for s in num.values if s in den.values})
        out.commits = {d: num.commits.get(d, set()) | den.commits.get(d, set()) for d in out.values}
        out.untrained = {**den.untrained, **num.untrained}
        out.length_multiple = max((x for x in (num.length_multiple, den.length_multiple) if x), default=None)
        out.first_created = min((x for x in (num.first_created, den.first_created) if x), default="")
        return out
    if num.mean is None or not den.mean:
        return Cell(name)
    return Cell(name, {}, num.mean / den.mean, None, None, min(num.n, den.n))


def pd_isna(v) -> bool:
    return isinstance(v, float) and math.isnan(v)


def markdown_tables(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """Every pipe table of a markdown text as (header, rows); a blank first cell repeats the row above's."""
    out, lines = [], text.splitlines()
    for i, line in enumerate(lines[:-1]):
        if line.startswith("|") and re.match(r"^\|[\s|:-]+\|$", lines[i + 1].strip()):
            header, rows = _cells(line), []
            for row_line in itertools.takewhile(lambda x: x.startswith("|"), lines[i + 2 :]):
                row = _cells(row_line)
                if rows and not row[0]:
                    row[0] = rows[-1][0]
                rows.append(row)
            out.append((header, rows))
    return out


def _cells(line: str) -> list[str]:
    return [c.strip().replace("**", "") for c in line.strip().strip("|").split("|")]


_NUM = r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?"


def _per_draw_cell(name: str, data: dict, key: str, seeds: Optional[list]) -> Cell:
    """A measurement a script made of each trained model (``{"draws": {SEED: {"precision", "git_commit", KEY: x}}}``,
    as scripts/learned_tables.py writes): a value per draw, each with the commit its model was trained at, so a
    prediction on it is decided, and its order proved, as on records. A draw whose KEY is null (a run that did not
    train) is left out."""
    from ..util.stats import mean_ci

    draws = data.get("draws") if isinstance(data, dict) else None
    if not isinstance(draws, dict):
        raise UsageError(f"{name}: a per-draw cell needs a 'draws' object keyed by seed")
    values, commits = {}, {}
    for seed, d in draws.items():
        if (seeds is None or int(seed) in seeds) and d.get(key) is not None:
            draw = (int(seed), str(d.get("precision")))
            values[draw] = float(d[key])
            commits[draw] = {d.get("git_commit")}
    if not values:
        return Cell(name)
    mean, half = mean_ci(list(values.values()))
    return Cell(name, values, mean, mean - half, mean + half, len(values), commits=commits)


def table_value(name: str, text: str) -> Cell:
    """A committed table's cell as a Cell: '3.47 ± 0.02 (n=3)', '0.85 [0.81, 0.86]', '69.2%', '26,351', 'n/a'."""
    text = re.sub(r"(?<=\d),(?=\d{3}\b)", "", text)
    m = re.match(rf"^({_NUM})%?(?:\s*±\s*({_NUM}))?(?:\s*\(n=(\d+)\))?(?:\s*\[({_NUM}),\s*({_NUM})\])?", text)
    if not m:
        return Cell(name)
    v = float(m.group(1))
    n = int(m.group(3) or 1)
    if m.group(2):
        h = float(m.group(2))
        return Cell(name, {}, v, v - h, v + h, n)
    if m.group(4):
        return Cell(name, {}, v, float(m.group(4)), float(m.group(5)), n)
    return Cell(name, {}, v, None, None, n)


# ---- checking ------------------------------------------------------------------------------------------------


def check_claim(ev: Evidence, claim: dict) -> Verdict:
    """Every expansion of a claim must hold; the verdict keeps each compared cell and the deciding numbers."""
    if claim.get("kind") == "prediction" and "file" not in claim["a"] and ev.df.empty:
        return Verdict(
            claim, False, [], f"pending: 0 of {claim['draws']} fresh draws in (no records yet)", pending=True
        )
    a_specs = expand(claim["a"])
    zipped = expand(claim["b"]) if claim.get("zip") else None
    if zipped is not None and len(zipped) != len(a_specs):
        raise UsageError(f"claim {claim['id']}: zip needs as many b cells as a cells ({len(zipped)} vs {len(a_specs)})")
    pairs = []
    for i, a_spec in enumerate(a_specs):
        b_spec = None
        if claim.get("b") is not None:
            b_spec = paired_spec(claim["b"], a_spec, claim["b_inherits"])
        for b_one in [zipped[i]] if zipped else expand(b_spec) if b_spec else [None]:
            pairs.append((ev.cell(a_spec), ev.cell(b_one) if b_one else None))
    cells = [c for a, b in pairs for c in ([a] + ([b] if b else []))]
    if claim.get("kind") == "prediction":
        return _predict(claim, pairs, cells)
    if claim.get("awaits") and (empty := [c.name for c in cells if _no_records(c)]):
        return Verdict(
            claim,
            False,
            cells,
            f"pending: registered {claim['registered']}; no records yet for {empty[0]}; awaits {claim['awaits']}",
            pending=True,
        )
    why, held = [], True
    for a, b in pairs:
        ok, reason = decide(claim, a, b)
        held &= ok
        why.append(f"{'ok' if ok else 'FAILS'}: {a.text()}" + (f" vs {b.text()}" if b else "") + f"; {reason}")
    return Verdict(claim, held, cells, "\n".join(why), observed=observed_count(claim, pairs))


def _predict(claim: dict, pairs: list, cells: list[Cell]) -> Verdict:
    """A prediction's test on each comparison (pending until its fresh draws are in); held is settled later, on
    the set's adjusted p-values (``check_set``)."""
    from .power import test

    want = int(claim["draws"])
    undefined = claim["relation"] == "undefined"  # its draws are the records that say so
    if short := [c for c in cells if len(c.values) + (c.undefined if undefined else 0) < want]:
        c = short[0]
        have = len(c.values) + (c.undefined if undefined else 0)
        return Verdict(claim, False, cells, f"pending: {have} of {want} fresh draws in for {c.name}", pending=True)
    if claim["rule"] == "point":
        why, held = [], True
        for a, b in pairs:
            ok, reason = decide(claim, a, b)
            held &= ok
            why.append(f"{'ok' if ok else 'FAILS'}: {a.text()}; {reason}")
        return Verdict(claim, held, cells, "\n".join(why))
    tests, why = [], []
    for a, b in pairs:
        try:
            t = test(claim, a, b)
        except ValueError as e:
            raise UsageError(f"claim {claim['id']}: {e}") from e
        tests.append(t)
        why.append(f"{a.text()}" + (f" vs {b.text()}" if b else "") + f"; {t.text()}")
    p = max(t.p for t in tests)
    return Verdict(claim, False, cells, "\n".join(why), p=p)


def observed_count(claim: dict, pairs: list) -> str:
    """How many draws show an observation's relation, each draw on its own (the smallest count over its
    comparisons): 'lower in 3 of 3 draws'; under the rule ``seeds`` counted as that rule counts (by a draw's trial
    intervals where it has them), so the line and the rule's count agree. Empty where the cells hold no draws (a
    table's value)."""
    rel = claim["relation"]
    if rel == "undefined" or (rel == "overlap" and claim.get("b") is None):
        return ""
    if claim["rule"] == "seeds" and rel != "overlap":
        counted = [held_draws(claim, a, b) for a, b in pairs]
        if not counted or any(not draws for draws, _ in counted):
            return ""
        draws, held = min(counted, key=lambda c: len(c[1]) / len(c[0]))
        return f"{rel} in {len(held)} of {len(draws)} draws"
    if rel == "overlap":  # "not told apart": the direction the draws lean, and that the level does not show it
        counts = []
        for a, b in pairs:
            draws = sorted(set(a.values) & set(b.values))
            if not draws:
                return ""
            counts.append((sum(a.values[d] < b.values[d] for d in draws), len(draws)))
        k, n = max(counts, key=lambda c: abs(c[0] / c[1] - 0.5))
        return f"a lower in {k} of {n} draws, not shown at 95%"
    worst = None
    for a, b in pairs:
        draws = sorted(set(a.values) & set(b.values)) if b is not None else sorted(a.values)
        if not draws or (b is not None and not b.values):
            return ""
        k = 0
        for d in draws:
            x, y = a.values[d], (b.values[d] if b is not None else float(claim.get("value", 0)))
            k += {
                "lower": x < y,
                "below": x < y,
                "higher": x > y,
                "above": x > y,
                "flat": x > 0 and y > 0 and max(x / y, y / x) <= float(claim.get("within", 1)),
            }[rel]
        if worst is None or k / len(draws) < worst[0] / worst[1]:
            worst = (k, len(draws))
    return f"{rel} in {worst[0]} of {worst[1]} draws" if worst else ""


def _no_records(c: Cell) -> bool:
    return not c.values and c.mean is None and not c.undefined


def paired_spec(b: dict, a: dict, inherited: list[str]) -> dict:
    """b with the fields it took from a set to this expansion of a (so a list in a pairs element by element)."""
    out = {**b, **{k: a[k] for k in inherited if "." not in k and k in a}}
    keys = [k.split(".", 1)[1] for k in inherited if k.startswith("where.")]
    if keys:
        out["where"] = {**b["where"], **{k: a["where"][k] for k in keys}}
    return out


def check_set(root: Path, df=None) -> list[Verdict]:
    """Every claim of one result set, decided (from ``df``, its records frame, where already read): the audit's
    refusals, each prediction's order proved from git, and the predictions' p-values adjusted as one family."""
    from .audit import audit
    from .registration import deleted_predictions, repo_root

    path = Path(root) / CLAIMS_FILE
    ev = Evidence(root, df)
    claims = load_claims(path)
    verdicts = audit(claims, ev, [check_claim(ev, c) for c in claims])
    root = str(repo_root(str(path.resolve().parent)))
    decided = [settle(v) for v in adjust([withdraw(v, root) for v in prove_order(path, verdicts)])]
    stays = "a registered prediction stays on its page"
    gone = [
        _refuse(
            Verdict({"rule": "?", "text": "", **c}, False, [], ""),
            f"registered, then deleted from {path.name} (last held at {at[:7]}): {stays}",
        )
        for c, at in deleted_predictions(path)
    ]
    return decided + gone


def _withdrawn(v: Verdict, why: str = "") -> Verdict:
    from dataclasses import replace

    reason = str(v.claim["withdrawn"])
    body = f"{why}\n{v.why}" if why else v.why
    return replace(v, withdrawn=reason, held=False, refused=False, pending=False, why=f"WITHDRAWN: {reason}\n{body}")


def withdraw(v: Verdict, root: str) -> Verdict:
    """A prediction whose ``withdrawn`` says why its registration cannot decide it (a baseline measured before it was
    registered; draws that will never come) is withdrawn, shown with its numbers and that reason, never counted and
    outside the family's adjustment, only where the withdrawal came before every record it reads: its first commit
    that says ``withdrawn`` is older than the earliest record's creation, and every record's commit descends from it.
    A withdrawal written after any of its data was in hand is not honoured: the prediction is decided as it falls and
    the page says so. ``withdrawn`` is the one field a registered prediction may gain (``registration``); a successor
    decides the statement under a new id."""
    from dataclasses import replace

    if v.kind != "prediction" or not v.claim.get("withdrawn") or v.refused:
        return v  # an edit, or the audit's reasons, stay refusals
    reg = v.claim.get("_registration")
    late = _late_withdrawal(v, reg, root)
    if not late:
        return _withdrawn(v, v.unproven)
    return replace(v, why=f"its withdrawal is not honoured: {late}; decided as it falls\n{v.why}")


def _late_withdrawal(v: Verdict, reg, root: str) -> str:
    """Why a prediction's withdrawal came too late ("" where it came before every record it reads)."""
    from datetime import datetime

    from .registration import descends

    if reg is None or reg.withdrawn_commit is None:
        return "the withdrawal is not committed"
    first = min((c.first_created for c in v.cells if c.first_created), default="")
    at = reg.withdrawn_commit[:7]
    if first and datetime.fromisoformat(first) <= datetime.fromisoformat(reg.withdrawn_time):
        return f"withdrawn at {at} ({reg.withdrawn_time}), after its first record was written ({first})"
    for c in v.cells:
        for commits in c.commits.values():
            for commit in commits:
                if commit is not None and not descends(root, reg.withdrawn_commit, _sha(commit)):
                    return f"withdrawn at {at}, after a record of {c.name} {_when(commit)}"
    return ""


def settle(v: Verdict) -> Verdict:
    """A prediction whose order git cannot prove (a record it reads predates its registration, or its model trained
    before it or from a changed tree) counts only against itself: failed where its test fails, refused where it
    would be confirmed (data in hand before a prediction can never confirm it)."""
    if v.kind != "prediction" or not v.unproven or v.state in ("withdrawn", "refused", "pending"):
        return v
    if v.held:
        return _refuse(v, v.unproven)
    from dataclasses import replace

    return replace(v, why=f"its order is not proved ({v.unproven}): it counts as failed, never as confirmed\n{v.why}")


def prove_order(path: Path, verdicts: list[Verdict]) -> list[Verdict]:
    """Each prediction refused unless git proves it was registered before every record it is decided on and is
    unchanged since; a pending one that is not committed yet says so."""
    from dataclasses import replace

    from .registration import descends, registrations, repo_root

    preds = [v for v in verdicts if v.kind == "prediction"]
    if not preds:
        return verdicts
    regs = registrations(path, [v.id for v in preds])
    root = str(repo_root(str(path.resolve().parent)))
    out = []
    for v in verdicts:
        if v.kind != "prediction":
            out.append(v)
            continue
        if regs is None:
            if v.pending:
                out.append(replace(v, why=v.why + f"; its order cannot be proved: {path} is not in a git repository"))
            else:
                out.append(_refuse(v, f"its order cannot be proved: {path} is not in a git repository"))
            continue
        reg = regs[v.id]
        if reg.changed:
            out.append(_refuse(v, f"{'; '.join(reg.changed)} ({reg.short}); a changed prediction needs a new id"))
            continue
        v = replace(v, claim={**v.claim, "_registration": reg})
        if v.pending:
            note = "" if reg.commit else "; not registered yet: commit it before its runs start"
            out.append(replace(v, why=v.why + note))
            continue
        if reg.commit is None:
            out.append(_refuse(v, "decided on records, but it is not committed: it cannot predate them"))
            continue
        late = None
        for c in v.cells:
            for draw, commits in sorted(c.commits.items(), key=str):
                for commit in sorted(commits, key=str):
                    if commit is None or commit.startswith(DIRTY) or not descends(root, reg.commit, _sha(commit)):
                        late = late or (c.name, draw, commit)
        if late:
            name, draw, commit = late
            when = "names no commit" if commit is None else _when(commit)
            late_why = f"a record of {name} ({draw_name(draw)}) {when}, not after its registration {reg.short}"
            v = replace(v, unproven=late_why)
        out.append(v)
    return out


def _sha(commit: str) -> str:
    return commit.split(":", 1)[-1]


def _when(commit: str) -> str:
    """What a late commit of a draw was: a model trained at it (from a changed tree), or a measurement."""
    if commit.startswith(DIRTY):
        return f"was trained from a changed tree at {_sha(commit)[:7]}"
    return f"was {'trained' if commit.startswith(TRAINED) else 'measured'} at {_sha(commit)[:7]}"


def _refuse(v: Verdict, reason: str) -> Verdict:
    from dataclasses import replace

    return replace(v, held=False, pending=False, refused=True, why=f"REFUSED: {reason}\n{v.why}")


def adjust(verdicts: list[Verdict]) -> list[Verdict]:
    """The set's decided predictions as one family: Benjamini-Hochberg adjusted p-values, confirmed below
    ``ALPHA``. While any prediction of the family is pending, the adjustment is not final (the family it adjusts
    over is not all in, and each pending one could change every other's adjusted p): a decided prediction stays
    pending too, its numbers and the verdict so far shown as provisional."""
    from dataclasses import replace

    from ..util.stats import bh_adjust
    from .power import ALPHA

    live = [
        i
        for i, v in enumerate(verdicts)
        if v.kind == "prediction" and v.p is not None and v.state not in ("refused", "withdrawn")
    ]
    idx = [i for i in live if not verdicts[i].pending]
    waiting = sum(v.kind == "prediction" and v.state == "pending" for v in verdicts)
    adjusted = bh_adjust([verdicts[i].p for i in idx])
    out = list(verdicts)
    for i, q in zip(idx, adjusted):
        v = out[i]
        line = (
            f"Benjamini-Hochberg adjusted p={q:.2g} over {len(idx)} predictions ({'<' if q < ALPHA else '>='} {ALPHA})"
        )
        if waiting:
            so_far = "confirmed" if q < ALPHA else "failed"
            line = f"provisional: {line}, {so_far} so far; {waiting} of its family's predictions are pending"
        out[i] = replace(v, p_adj=q, held=q < ALPHA, pending=bool(waiting), why=v.why + "\n" + line)
    return out


def scoreboard(verdicts: list[Verdict]) -> str:
    """One line: the set's predictions registered, confirmed, failed, pending (refused), its properties (which hold
    by construction, never counted) and its observations."""
    preds = [v for v in verdicts if v.kind == "prediction"]
    props = [v for v in verdicts if v.kind == "property"]
    obs = [v for v in verdicts if v.kind == "observation"]
    count = {s: sum(v.state == s for v in preds) for s in ("confirmed", "failed", "pending", "refused", "withdrawn")}
    line = (
        f"predictions: {len(preds)} registered, {count['confirmed']} confirmed, {count['failed']} failed, "
        f"{count['pending']} pending"
        + (f", {count['withdrawn']} withdrawn" if count["withdrawn"] else "")
        + (f", {count['refused']} refused" if count["refused"] else "")
        + (f"; properties (true by construction, never counted as findings): {len(props)}" if props else "")
        + f"; observations (written after their data, never counted as findings): {len(obs)}"
    )
    bad = [v for v in obs + props if v.bad]
    return line + (f", {len(bad)} contradicted or refused" if bad else "")


def check_sets(paths: list[Path], quiet: bool, echo, warn, engines: bool = False) -> int:
    """``pebench check``: every set's scoreboard and claims through ``echo`` (``quiet``: the refused and
    contradicted ones only), every damaged record named through ``warn`` and counted; returns how many claims are
    refused or contradicted plus how many records are damaged (0: all is well)."""
    from ..results import ResultsDir
    from .report import records_frame

    found = claim_sets(paths)
    if not found:
        raise PebenchError("no claims.yaml under " + ", ".join(str(s) for s in paths))
    every, damaged = [], 0
    for root in found:
        skipped: list = []
        df = records_frame(ResultsDir(root), skipped)  # damaged evidence is named and counted, as report does
        for path, reason in skipped:
            warn(f"warning: skipped record {path}: {reason}")
        damaged += len(skipped)
        verdicts = check_set(root, df)
        every += verdicts
        shown = [v for v in verdicts if not (quiet and not v.bad)]
        note = f"; damaged evidence: {len(skipped)} record(s) skipped" if skipped else ""
        echo(f"# {root}: {scoreboard(verdicts)}{note}" + ("\n" + render_verdicts(shown) if shown else ""))
        if engines:
            damaged += check_engines(root, verdicts, echo)
    bad = sum(v.bad for v in every)
    echo(f"all {len(found)} result sets: {scoreboard(every)}")
    if bad or damaged:
        echo(
            f"{bad} claim(s) refused or contradicted by their data"
            + (f"; {damaged} damaged record(s): a committed set's evidence must be whole" if damaged else "")
        )
    return bad + damaged


def check_engines(root: Path, verdicts: list[Verdict], echo) -> int:
    """Each prediction (and property) decided again by the engine of its registration commit; every difference not
    shown in the set's engine-changes.yaml, and every row there that no difference backs, printed and counted."""
    from . import engines
    from .registration import registrations

    ids = [v.id for v in verdicts if v.claim.get("kind") == "prediction" and not v.id.startswith("_")]
    regs = registrations(Path(root) / CLAIMS_FILE, ids) or {}
    commits = {i: r.commit for i, r in regs.items() if r.commit and not r.changed}
    diffs = engines.compare(Path(root), [v for v in verdicts if v.id in commits], commits)
    bad = 0
    for d in diffs:
        if d.shown:
            echo(f"[engines differ, shown] {d.id}: {d.then} by the engine at {d.commit[:7]}, {d.now} today: {d.shown}")
        else:
            bad += 1
            echo(
                f"[ENGINES DIFFER] {d.id}: {d.then} by the engine at {d.commit[:7]}, {d.now} today; show both and why "
                f"in {Path(root) / engines.ENGINE_CHANGES}" + (f"\n    {d.detail}" if d.detail else "")
            )
    for i in engines.stale_rows(Path(root), diffs):
        bad += 1
        echo(f"[STALE] {Path(root) / engines.ENGINE_CHANGES}: {i}'s row no longer matches what the engines decide")
    return bad


def claim_sets(paths: list[Path]) -> list[Path]:
    """The result sets with a claims file among ``paths`` and their subfolders (sorted)."""
    found = set()
    for p in paths:
        p = Path(p)
        if not p.exists():
            raise UsageError(f"no such folder: {p}")
        found |= {f.parent for f in ([p / CLAIMS_FILE] if (p / CLAIMS_FILE).is_file() else [])}
        found |= {f.parent for f in p.rglob(CLAIMS_FILE)}
    return sorted(found)


MARKS = {
    "confirmed": "confirmed",
    "failed": "FAILED",
    "pending": "pending",
    "refused": "REFUSED",
    "withdrawn": "WITHDRAWN",
    "observed": "observed",
    "holds": "holds by construction",
    "contradicted": "CONTRADICTED",
}


def render_verdicts(verdicts: list[Verdict], markdown: bool = False) -> str:
    """Each claim with its state (a prediction: confirmed, failed, pending; an observation: observed, with its
    count of draws; either: refused) and its numbers (markdown bullets for the docs)."""
    out = []
    for v in verdicts:
        mark = MARKS[v.state]
        kind = f"{v.kind}, {v.claim['rule']}" if v.kind in ("prediction", "property") else v.claim["rule"]
        if v.observed:
            kind += f"; {v.observed}"
        lines = [re.sub(r"^(ok|FAILS|pending): ", "", line) for line in v.why.splitlines()]
        if markdown:
            nums = "; ".join(lines)
            out.append(f"- **{mark}** ({kind}) {v.claim['text']} <sub>`{v.id}`: {nums}{_registered(v)}</sub>")
        else:
            out.append(f"[{mark}] {v.id} ({kind}): {v.claim['text']}\n    " + "\n    ".join(lines) + _registered(v))
    return "\n".join(out) + "\n"


def _registered(v: Verdict) -> str:
    """Where a prediction was registered (its commit and day), or the day a legacy claim said it was written."""
    reg = v.claim.get("_registration")
    if reg is not None and reg.commit:
        return f"; registered {reg.short} ({reg.date}), before its records" if not v.pending else ""
    return (
        f"; said to be written {v.claim['registered']}, before its runs (not proved from git)"
        if v.claim.get("registered") and not v.pending
        else ""
    )


def power_of(root, claim_id: str, seeds: list[int], precision: Optional[str], level: float, floor: int, cap: int):
    """The power function for one prediction of a result set, from the draws in hand: its cells read at ``seeds``
    (and ``precision``; None: every precision) instead of its fresh ones, each comparison's draw count, and the
    largest (the comparison that needs the most draws decides)."""
    from .power import power

    claims = {c["id"]: c for c in load_claims(Path(root) / CLAIMS_FILE)}
    if claim_id not in claims:
        raise UsageError(f"{root} has no claim {claim_id!r}; its predictions: {', '.join(_predictions(claims))}")
    claim = claims[claim_id]
    if claim.get("kind") != "prediction" or claim["rule"] == "point":
        raise UsageError(f"{claim_id} is not a prediction decided by a test (kind prediction, rule not point)")
    ev = Evidence(Path(root))

    def in_hand(spec: dict) -> dict:
        out = {**spec, "seeds": list(seeds)}
        if precision is None:
            out.pop("precision", None)
        else:
            out["precision"] = precision
        return out

    results = []
    for a_spec in expand(claim["a"]):
        a = ev.cell(in_hand(a_spec))
        bs = [None]
        if claim.get("b") is not None:
            bs = expand(paired_spec(claim["b"], a_spec, claim["b_inherits"]))
        for b_spec in bs:
            b = ev.cell(in_hand(b_spec)) if b_spec is not None else None
            if len(a.values) < 2 or (b is not None and len(b.values) < 2):
                raise UsageError(f"{claim_id}: fewer than 2 draws in hand for {a.name}; name --seeds that have records")
            results.append(power(claim, a, b, level, cap=cap, floor=floor))
    return max(results, key=lambda p: (p.draws, -p.power))


def _predictions(claims: dict) -> list[str]:
    return [i for i, c in claims.items() if c.get("kind") == "prediction"] or ["none"]
