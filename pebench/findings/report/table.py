"""The table a report shows: cells by (label, length) over the draws of one training setup (``one_setup``), the
ratio to 1x, the chance level, a note for runs far short of their config's steps; the seeds behind it."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Optional

import pandas as pd

from ...eval.tasks import TASKS
from ...eval.tasks import metric as find_metric
from ...util.errors import PebenchError
from ...util.groups import row_key
from ...util.stats import mean_ci


@dataclass
class Table:
    """Cells by (label, length): mean, ci, seeds; plus the column metadata used by every format."""

    metric: str
    protocol: str
    lengths: list[int]
    contexts: dict[int, str]
    rows: list[str]
    cells: dict[
        tuple[str, int], tuple
    ]  # (label, length) -> (mean | None, ci, n_seeds, (lo, hi) of one seed's trials | None)
    ratio: dict[
        str, Optional[float]
    ]  # label -> value at the longest length / value at 1x (None where either is missing)
    context: int = 0  # the training context (the 1x length)
    split: str = "validation"
    higher_is_better: bool = False  # the metric's direction: bold and "best" follow it
    digits: int = 2
    task: str = "ppl"
    chosen_protocol: bool = True  # the protocol was asked for (False: the default one of the records present)
    chance: str = ""  # the metric's chance level in these records ('0.1'; 'varies' across them; '' unknown)
    states: dict = field(default_factory=dict)  # (label, length) -> why a cell with records has no value
    note: str = ""  # said beside the table: its runs trained far short of their config's steps ('' when not)

    def text(self, label: str, length: int) -> str:
        """A cell as the tables print it: the value (± ci over seeds, or one seed's trial interval), else why it
        has none: 'undefined' (the scheme has no value there), 'failed', 'not a number', 'invalid' (a value the
        metric cannot take), or 'not evaluated' (no record)."""
        cell = self.cells.get((label, length))
        if cell is None:
            return "not evaluated"
        return _fmt(cell, self.digits) if cell[0] is not None else self.states.get((label, length), "n/a")

    def ratio_text(self, label: str) -> str:
        r = self.ratio.get(label)
        if r is not None:
            return f"{r:.2f}"
        return "n/a (1x missing)" if self.cells.get((label, self.context), (None,))[0] is None else "n/a"

    def best(self, length: int) -> Optional[str]:
        vals = [(c[0], lab) for lab in self.rows if (c := self.cells.get((lab, length))) and c[0] is not None]
        return (
            min(vals)[1] if vals and not self.higher_is_better else max(vals, key=lambda v: v[0])[1] if vals else None
        )

    def is_best(self, label: str, length: int) -> bool:
        """Whether the cell holds the column's best value (every tied cell does)."""
        b = self.best(length)
        return b is not None and self.cells.get((label, length), (None,))[0] == self.cells[(b, length)][0]


@lru_cache(maxsize=None)
def _builtin_steps(name: str) -> Optional[int]:
    """The steps of the built-in config ``name`` (None for any other name), read once per process: a page of many
    tables asks for the same few."""
    from ...config import builtin_configs, load_config

    return load_config(name).train.steps if name in builtin_configs() else None


def under_trained(df: pd.DataFrame) -> str:
    """A note for runs trained under half their built-in config's steps (the quick look's 40): their table reads
    about the same for every scheme, which says nothing about the encodings, so the table says so; '' otherwise."""
    if not {"config", "steps"} <= set(df.columns):  # a frame built without provenance: nothing to say
        return ""
    if "parent" in df.columns:  # a fine-tune's steps are its own, on top of its parent's full training
        df = df[df["parent"].isna()]
    short = []
    for (name, steps), _ in df.groupby([df["config"].fillna(""), df["steps"].fillna(-1)]):
        if (full := _builtin_steps(name) if name else None) is not None and 0 <= steps < full / 2:
            short.append(f"{int(steps)} steps, {steps / full:.0%} of the {name} config's {full}")
    return (
        f"note: trained {'; '.join(short)}: under-trained, so these numbers say little about the encodings"
        " (`pebench compare` does not judge such runs)"
        if short
        else ""
    )


def one_setup(df: pd.DataFrame, config: Optional[str] = None) -> pd.DataFrame:
    """The records of one training setup, so that no row pools draws trained differently: ``config`` keeps that
    config's records; records of several configs (a scale suite's points) are refused in one line naming them; one
    config's runs at different step counts are keyed apart, their rows labelled ``rope [20 steps]``. Records with no
    config (outside models, trained elsewhere: a row of their own) stand beside any of them."""
    if not {"config", "steps"} <= set(df.columns):  # a frame built without provenance: one setup as far as known
        return df
    named = df["config"].notna()
    if config is not None:
        if config not in set(df.loc[named, "config"]):
            present = ", ".join(sorted(set(df.loc[named, "config"]))) or "none"
            raise PebenchError(f"no records of config {config!r}; configs present: {present}")
        df, named = df[~named | (df["config"] == config)], named[~named | (df["config"] == config)]
    if df.loc[named, "config"].nunique() > 1:
        runs = df[named].groupby("config")["run"].nunique()
        raise PebenchError(
            f"the records come from {len(runs)} configs ({', '.join(f'{c}: {n} runs' for c, n in runs.items())}) and a"
            " row must not pool them: pass --config NAME for one"
        )
    steps = df["steps"].where(df["steps"].notna(), "?").astype(str).str.removesuffix(".0")
    mixed = steps.where(df["steps"].notna()).groupby(df["label"]).transform("nunique") > 1
    if mixed.any():
        df = df.assign(label=df["label"].where(~mixed, df["label"] + " [" + steps + " steps]"))
    return df


def _records_of(
    df: pd.DataFrame,
    m,
    metric: str,
    protocol: Optional[str],
    schemes: Optional[list[str]],
    split: str,
    config: Optional[str] = None,
) -> tuple[pd.DataFrame, str]:
    """The records a table of ``metric`` reads: its task's, on ``split``, under ``protocol`` (default nonoverlap, else
    the first present), of ``schemes``, of one training setup (``one_setup``); and the protocol chosen. One line
    naming what is there when nothing is."""
    if df.empty:
        raise PebenchError("no records to report; run `pebench eval` first")
    if not (df["task"] == m.task).any():
        raise PebenchError(f"no {m.task} records for the metric {metric}; run `pebench eval --task {m.task}`")
    df = df[df["task"] == m.task]
    if not (df["split"] == split).any():
        raise PebenchError(
            f"no records on the {split} split; splits present: {', '.join(sorted(df['split'].unique()))}"
            + ("; evaluate with `pebench eval --split test`" if split == "test" else "")
        )
    df = df[df["split"] == split]
    protocols = sorted(df["protocol"].unique())
    protocol = protocol or ("nonoverlap" if "nonoverlap" in protocols else protocols[0])
    if protocol not in protocols:
        raise PebenchError(f"no {m.task} records with protocol {protocol!r}; protocols present: {', '.join(protocols)}")
    df = df[df["protocol"] == protocol]
    if schemes:
        df = df[df["scheme"].isin(schemes) | df["label"].isin(schemes)]
    if df.empty:
        raise PebenchError(
            f"no records match protocol {protocol!r}"
            + (f" and schemes {schemes}" if schemes else "")
            + f"; protocols present: {', '.join(protocols)}"
        )
    return one_setup(df, config), protocol


def _cells(df: pd.DataFrame, metric: str) -> tuple[dict, dict]:
    """(label, length) -> (mean over seeds, 95% half-width, seeds, one seed's own trials' interval or None); and,
    for a cell whose records give no value, why (``Table.states``). A value the metric cannot take (a perplexity
    below 1, a share outside [0, 1]) is never averaged in: the cell says 'invalid'."""
    m = find_metric(metric)
    cells, states = {}, {}
    for (label, L), g in df.groupby(["label", "length"]):
        ok, seen = [], set()
        for v, s, iv in zip(g[metric], g["status"], g["intervals"]):
            if s != "ok":
                seen.add("undefined" if s == "undefined" else "failed")
            elif v is None or pd.isna(v):
                seen.add("not a number" if v is not None else "not measured")
            elif not m.possible(float(v)):
                seen.add("invalid")
            else:
                ok.append((float(v), iv.get(metric)))
        if ok:
            mean, ci = mean_ci([v for v, _ in ok])
            one = tuple(ok[0][1]) if len(ok) == 1 and ok[0][1] else None  # a single seed: its trials' interval
            cells[(label, int(L))] = (mean, ci, len(ok), one)
        else:
            cells[(label, int(L))] = (None, 0.0, 0, None)
            states[(label, int(L))] = " / ".join(sorted(seen)) or "n/a"
    return cells, states


def build_table(
    df: pd.DataFrame,
    metric: str = "ppl",
    protocol: Optional[str] = None,
    schemes: Optional[list[str]] = None,
    split: str = "validation",
    config: Optional[str] = None,
) -> Table:
    m = find_metric(metric)  # registered with its task and direction (derived ones such as ppl's ratio too)
    chosen = protocol is not None
    df, protocol = _records_of(df, m, metric, protocol, schemes, split, config)
    if m.derived:  # computed from the task's records by the task (ppl's ratio to 1x)
        df = TASKS.get(m.task).derive(df, metric)
    lengths = sorted(int(x) for x in df["length"].unique())
    ctx = int(df["train_context"].mode().iloc[0])
    contexts = {L: f"{L / ctx:g}x" for L in lengths}
    rows = sorted(df["label"].unique(), key=row_key)
    cells, states = _cells(df, metric)
    ratio = {}  # always the longest length over 1x (the training context): never a silently different base
    for lab in rows:
        top, one = cells.get((lab, lengths[-1]), (None,))[0], cells.get((lab, ctx), (None,))[0]
        ratio[lab] = top / one if top is not None and one else None
    return Table(
        metric,
        protocol,
        lengths,
        contexts,
        rows,
        cells,
        ratio,
        ctx,
        split,
        m.higher_is_better,
        m.digits,
        m.task,
        chosen,
        chance_text(df, m),
        states,
        under_trained(df),
    )


def seeds_behind(used: pd.DataFrame) -> str:
    """'0, 1, 2 (3 seeds; trained in bf16 and fp32)': the seeds and training precisions of a table's records."""
    seeds = sorted(int(x) for x in used["seed"].unique())
    n = f"{len(seeds)} seeds" if len(seeds) > 1 else "one seed"
    trained = " and ".join(sorted(str(p) for p in used["precision"].unique()))
    return f"{', '.join(map(str, seeds))} ({n}; trained in {trained})"


def chance_text(df: pd.DataFrame, m) -> str:
    """The chance level of metric ``m`` over the records of a table: what they state (``chance``), else the
    metric's own where it is one number (records written before they stated it); 'varies' where they differ."""
    stated = {c[m.name] for c in df.get("chance", pd.Series([], dtype=object)) if isinstance(c, dict) and m.name in c}
    if not stated and isinstance(m.chance, (int, float)):
        stated = {float(m.chance)}
    if len(stated) > 1:
        return "varies across these records"
    return f"{stated.pop():.3g}" if stated else ""


def default_metric(df: pd.DataFrame) -> str:
    """The metric a report shows unless told: ppl where there are ppl records, else the first summary metric of the
    first task the records hold (a set of retrieval records alone reports what is there)."""
    if df.empty or "ppl" in set(df["task"]) or not any(t in TASKS for t in df["task"].unique()):
        return "ppl"
    task = TASKS.get(sorted(t for t in df["task"].unique() if t in TASKS)[0])
    return task.summary_metrics()[0]


def _fmt(cell, digits: int) -> str:
    if cell is None or cell[0] is None:
        return "n/a"
    m, ci, n, one = cell
    s = f"{m:.{digits}f}"
    if n > 1:
        s += f" ± {ci:.{digits}f} (n={n})"
    elif one is not None:
        s += f" [{one[0]:.{digits}f}, {one[1]:.{digits}f}]"
    return s
