"""The cells a claim compares: from a set's records (by draw, or by evaluation window), from a committed markdown
table, or from a committed JSON file; what makes a draw untrained; the values behind each cell."""

from __future__ import annotations

import csv
import io
import itertools
import math
import re
from pathlib import Path
from typing import Optional

from ...results import NOT_RECORDED
from ...util.errors import UsageError
from ...util.parsing import canonical_label
from ..rules import Cell
from .spec import parse_length


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
            from ...results import ResultsDir
            from ..report import records_frame

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
        from ...eval.tasks import metric as find_metric

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
        from ..trends import rank_agreement

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
    from ...util.stats import wilson

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
    from ...util.stats import mean_ci

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
