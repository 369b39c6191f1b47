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

A cell from records: ``label``, ``length`` (tokens or ``Nx``), ``metric``, ``split``, ``protocol``, ``seeds``,
``precision``, ``config`` (the runs' config name: one point of a scale suite, ``tiny-d64``, whose ``Nx`` is of its
own training context). A rank agreement between two points: ``tau`` (``{labels: [...], configs: [A, B], length:
16x}``), Kendall's tau of the schemes' values at the two points, one value per draw.
A cell from a committed markdown table: ``file``, ``row``, ``col`` (header text), optional ``table`` (index) and
``where`` ({column: value} for rows keyed by more than their first column). A number from a committed JSON file
(such as the ``profile.json`` a run writes): ``file`` (ending ``.json``) and ``key`` (a dotted path into it).
"""

from __future__ import annotations

import csv
import io
import itertools
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..errors import UsageError
from ..results import CLAIMS_FILE
from .rules import Cell, decide, expand

RELATIONS = ("lower", "higher", "flat", "overlap", "above", "below", "undefined")
RULES = ("intervals", "paired", "one-seed", "ratio", "point", "seeds")
_CELL_KEYS = {
    "label",
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
}


@dataclass
class Verdict:
    claim: dict[str, Any]
    held: bool
    cells: list[Cell]
    why: str
    pending: bool = False  # registered before its runs (``awaits``), and some of its cells have no records yet

    @property
    def id(self) -> str:
        return self.claim["id"]


# ---- loading -------------------------------------------------------------------------------------------------


def load_claims(path: Path) -> list[dict]:
    """The claims of one file, defaults merged in and every field checked (a bad file is one clear line)."""
    try:
        data = yaml.safe_load(Path(path).read_text()) or {}
    except (OSError, yaml.YAMLError) as e:
        raise UsageError(f"cannot read claims file {path}: {e}") from e
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

    @property
    def df(self):
        if self._df is None:
            from ..results import ResultsDir
            from .report import records_frame

            self._df = records_frame(ResultsDir(self.root))
        return self._df

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

        df, metric = self.df, spec.get("metric", "ppl")
        if df.empty:
            raise UsageError(f"{self.root}: no records (packed or loose) for the claims that name no file")
        m = find_metric(metric)
        df = df[df["task"] == m.task]
        if spec.get("config") is not None:  # one point of a scale suite: its runs' config (its own context)
            df = df[df["config"] == spec["config"]]
        ctx = int(df["train_context"].mode().iloc[0]) if not df.empty else 0
        sel = df[
            (df["label"] == spec["label"])
            & (df["length"] == parse_length(spec["length"], ctx))
            & (df["split"] == spec.get("split", "validation"))
            & (df["protocol"] == spec.get("protocol", "nonoverlap"))
        ]
        if spec.get("seeds") is not None:
            sel = sel[sel["seed"].isin(spec["seeds"] if isinstance(spec["seeds"], list) else [spec["seeds"]])]
        if spec.get("precision") is not None:
            sel = sel[sel["precision"] == spec["precision"]]
        undefined = int((sel["status"] == "undefined").sum())
        values, trials, copies = _draws(sel[sel["status"] == "ok"], metric, m.proportion)
        cell = Cell.from_values(_cell_name(spec, metric), values, next(iter(trials.values()), None))
        cell.undefined, cell.trials, cell.copy_of, cell.metric = undefined, trials, copies, metric
        return cell

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
        """One number of a committed JSON file, at the dotted path ``key``."""
        import json

        path, key = self.root / spec["file"], spec.get("key")
        if not key:
            raise UsageError(f"{path}: a cell from a JSON file needs a key (a dotted path to a number)")
        try:
            value = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise UsageError(f"cannot read {path}: {e}") from e
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


def _draws(sel, metric: str, proportion: bool) -> tuple[dict, dict, set]:
    """Per draw (seed, precision): the mean of its records' values (a rerun of one draw is not another sample),
    the interval over its prompts (for a proportion, at least Wilson's on its prompts: never zero-wide), and the
    labels any record was copied from."""
    from ..stats import wilson

    values, trials, copies = {}, {}, set()
    for (seed, precision), g in sel.groupby(["seed", "precision"]):
        vals = [float(v) for v in g[metric] if v is not None and not pd_isna(v)]
        if not vals:
            continue
        key = (int(seed), str(precision))
        values[key] = sum(vals) / len(vals)
        ivs = [tuple(iv[metric]) for iv in g["intervals"] if iv.get(metric)]
        if proportion:
            n = max(prompts_of(d) for d in g["details"])
            lo, hi = wilson(round(values[key] * n), n) if n else (0.0, 1.0)
            ivs = [(min(lo, *(i[0] for i in ivs)), max(hi, *(i[1] for i in ivs)))] if ivs else [(lo, hi)]
        if ivs:
            trials[key] = ivs[0]
        copies |= {c for c in g["measured_as"] if isinstance(c, str)}
    return values, trials, copies


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
        return Cell.from_values(name, {s: num.values[s] / den.values[s] for s in num.values if s in den.values})
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
    return Verdict(claim, held, cells, "\n".join(why))


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
    """Every claim of one result set, decided (from ``df``, its records frame, where already read)."""
    from .audit import audit

    path = Path(root) / CLAIMS_FILE
    ev = Evidence(root, df)
    claims = load_claims(path)
    return audit(claims, ev, [check_claim(ev, c) for c in claims])


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


def render_verdicts(verdicts: list[Verdict], markdown: bool = False) -> str:
    """Each claim with held/failed (or pending: registered, its runs not in yet) and its numbers (markdown bullets
    for the docs)."""
    out = []
    for v in verdicts:
        mark = "pending" if v.pending else "held" if v.held else "FAILED"
        if markdown and v.pending:
            out.append(
                f"- **{mark}** ({v.claim['rule']}) {v.claim['text']} <sub>`{v.id}`: {v.why[len('pending: ') :]}</sub>"
            )
        elif markdown:
            nums = "; ".join(line.split(": ", 1)[1] for line in v.why.splitlines())
            out.append(
                f"- **{mark}** ({v.claim['rule']}) {v.claim['text']} <sub>`{v.id}`: {nums}{_registered(v)}</sub>"
            )
        else:
            out.append(f"[{mark}] {v.id}: {v.claim['text']}\n    " + (v.why + _registered(v)).replace("\n", "\n    "))
    return "\n".join(out) + "\n"


def _registered(v: Verdict) -> str:
    """A decided claim that was written before its runs says so (its date)."""
    return (
        f"; registered {v.claim['registered']}, before its runs" if v.claim.get("registered") and not v.pending else ""
    )
