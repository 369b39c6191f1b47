"""Generated sections of the README and the findings pages: every table and every checked claim between markers
is written from committed records (or a committed table file), never typed.

    <!-- pebench:table set=results/reference split=test -->
    ...generated...
    <!-- pebench:end -->

Kinds: ``table`` (set, split, metric, protocol, pe, labels, seeds, precision, config: a report table), ``context``
(set, split, metrics: the context-use table, of those metrics only), ``seeds`` (set, metrics, length, split, labels:
one length seed by seed),
``claims`` (set, tag or ids, kind: every claim, those tagged, or those named, with its state and its numbers;
``kind=prediction`` or ``kind=observation`` keeps that kind alone), ``scoreboard`` (sets: each set's predictions
registered, confirmed, failed and pending, and its observations), ``transfer`` (from, to, pairs: each finding of one
set beside the prediction that carried it to another, with both verdicts), ``replication`` (from, to, tag, names, map,
statable, summary: a set's predictions beside their restatements in other sets, each verdict and where each is
confirmed), ``verdicts``
(set, tag: its predictions grouped by state, one line each), ``engines`` (set: the predictions the engine of their
registration decides otherwise, both verdicts and why), ``include`` (file:
a committed table written by pebench), ``profile`` (set: the phases of the run's time, from its profile.md),
``budgets`` (sets: one row per result set from its profile.json); ``cli`` (the command reference) and ``estimate``
(config or suite: its cost on paper), registered by ``pebench.cli.reference``, which the findings do not import.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from ..util.errors import UsageError
from ..util.fsutil import atomic_write_text
from ..util.registry import Registry

SECTION = re.compile(r"(<!-- pebench:(\w+)((?: [\w-]+=[^ ]+)*) -->\n)(.*?)(<!-- pebench:end -->)", re.S)
GENERATORS: Registry = Registry("doc section")
DOC_FILES = ("README.md", "docs/*.md", "docs/*/*.md", "results/*/README.md")


def _args(text: str) -> dict:
    return dict(part.split("=", 1) for part in text.split())


@dataclass
class _Set:
    """A result set as read once per regeneration and shared by every section that cites it: its records (read by
    the first section that needs them) and its claims' verdicts (many pages cite one set's claims)."""

    path: Path
    frame: Any = None
    verdicts: Optional[list] = None


_SETS: dict = {}  # resolved path -> _Set, emptied before and after each regeneration


def _set(root: Path, set_: str) -> _Set:
    key = (root / set_).resolve()
    return _SETS.setdefault(key, _Set(key))


def _frame(root: Path, set_: str):
    from ..results import ResultsDir
    from .report import records_frame

    rs = _set(root, set_)
    if rs.frame is None:
        rs.frame = records_frame(ResultsDir(rs.path))
    return rs.frame


def _of_seeds(df, args: dict):
    """A section's records of the seeds it names (``seeds=0,1,2``: the draws it describes, where a set also holds
    later draws), else every seed's."""
    return df[df["seed"].isin([int(x) for x in args["seeds"].split(",")])] if "seeds" in args else df


@GENERATORS.register("table")
def _table(root: Path, args: dict) -> str:
    from ..util.parsing import parse_list
    from . import report as rp

    df = _of_seeds(_frame(root, args["set"]), args)
    if "precision" in args:  # the draws trained in one precision
        df = df[df["precision"] == args["precision"]]
    if "config" in args:  # one point of a scale suite (its runs' config)
        df = df[df["config"] == args["config"]]
    if "labels" in args:  # exact row labels, '_' for a space: rope+yarn_ft512
        df = df[df["label"].isin([x.replace("_", " ") for x in args["labels"].split(",")])]
    t = rp.build_table(
        df,
        args.get("metric", "ppl"),
        args.get("protocol"),
        parse_list(args.get("pe"), "pe"),
        args.get("split", "validation"),
    )
    used = df[df["label"].isin(t.rows)]
    if used["run"].str.startswith("hf-").all():  # outside models: no seed or training precision of pebench's
        dtypes = " and ".join(sorted({str(d) for d in used["dtype"]}))
        return f"Outside models (trained elsewhere), evaluated in {dtypes}.\n" + rp.to_markdown(t)
    return f"Seeds behind these cells: {rp.seeds_behind(used)}.\n" + rp.to_markdown(t)


@GENERATORS.register("context")
def _context(root: Path, args: dict) -> str:
    from . import report as rp

    metrics = args["metrics"].split(",") if args.get("metrics") else None  # a comma list; default: every one
    return rp.context_markdown(_frame(root, args["set"]), metrics, split=args.get("split", "validation"))


@GENERATORS.register("seeds")
def _seeds(root: Path, args: dict) -> str:
    from . import report as rp
    from .claims import parse_length

    df = _of_seeds(_frame(root, args["set"]), args)
    if "labels" in args:
        df = df[df["label"].isin(args["labels"].split(","))]
    ctx = int(df["train_context"].mode().iloc[0]) if not df.empty else 0
    return rp.by_seed_markdown(
        df, args["metrics"].split(","), parse_length(args.get("length", "1x"), ctx), args.get("split", "validation")
    )


def _verdicts(root: Path, set_: str) -> list:
    from .claims import check_set

    rs = _set(root, set_)
    if rs.verdicts is None:
        rs.verdicts = check_set(rs.path, _frame(root, set_))
    return rs.verdicts


@GENERATORS.register("scoreboard")
def _scoreboard(root: Path, args: dict) -> str:
    from .claims import scoreboard

    return "".join(f"- **Scoreboard** `{s}`: {scoreboard(_verdicts(root, s))}.\n" for s in args["sets"].split(","))


@GENERATORS.register("claims")
def _claims(root: Path, args: dict) -> str:
    from .claims import render_verdicts

    verdicts = _verdicts(root, args["set"])
    if "kind" in args:
        verdicts = [v for v in verdicts if v.kind == args["kind"]]
    if "tag" in args:  # the claims of one page of a set
        verdicts = [v for v in verdicts if args["tag"] in (v.claim.get("tags") or [])]
    if "ids" in args:  # named claims, in the order named (a page that cites a few of a set's claims)
        by_id = {v.id: v for v in verdicts}
        if missing := [i for i in args["ids"].split(",") if i not in by_id]:
            raise UsageError(f"{args['set']} has no claim {missing[0]!r}")
        verdicts = [by_id[i] for i in args["ids"].split(",")]
    return render_verdicts(verdicts, markdown=True)


@GENERATORS.register("transfer")
def _transfer(root: Path, args: dict) -> str:
    """Each finding of one set (``from``) beside the prediction that carried it to another (``to``): ``pairs`` is a
    comma list of FROM_ID:TO_ID; a row per pair with both texts and both verdicts (state, adjusted p)."""
    got = {side: {v.id: v for v in _verdicts(root, args[side])} for side in ("from", "to")}
    rows = [
        f"| finding in `{args['from']}` | its verdict | the same about `{args['to']}` | its verdict |",
        "|---|---|---|---|",
    ]
    for pair in args["pairs"].split(","):
        a, b = pair.split(":")
        if a not in got["from"] or b not in got["to"]:
            raise UsageError(f"transfer: no claim {a!r} in {args['from']} or {b!r} in {args['to']}")
        cells = [_verdict_cell(got["from"][a]), _verdict_cell(got["to"][b])]
        rows.append(f"| {got['from'][a].claim['text']} | {cells[0]} | {got['to'][b].claim['text']} | {cells[1]} |")
    return "\n".join(rows) + "\n\n" + RATIO_LEGEND + "\n"


@GENERATORS.register("replication")
def _replication(root: Path, args: dict) -> str:
    """The predictions of one set (``from``, ``tag``) beside those of other sets that restate them (``to``: a comma
    list; a prediction there names the one it restates as ``restates: FROM:ID``, or ``map`` names it: a comma list of
    FROM_ID:SET_INDEX:TO_ID, SET_INDEX counting the ``to`` sets from 1), with each verdict and where the finding is
    confirmed (``names``: a column title per set, in order). A set whose claims name none of a finding's restatement
    (``statable``: the indices of the sets where an unrestated finding reads "not statable", not "not restated")
    says so; ``summary`` adds a line counting the findings of ``from`` confirmed on each of those sets."""
    sets = [args["from"], *args["to"].split(",")]
    names = args.get("names", ",".join(sets)).split(",")
    if len(names) != len(sets):
        raise UsageError(f"replication: {len(sets)} sets but {len(names)} names")
    first = [v for v in _verdicts(root, sets[0]) if args.get("tag") in (None, *v.claim.get("tags", []))]
    restated = [
        {str(v.claim.get("restates", "")).split(":", 1)[-1]: v for v in _verdicts(root, s) if v.kind == "prediction"}
        for s in sets[1:]
    ]
    for entry in filter(None, args.get("map", "").split(",")):
        fid, k, tid = entry.split(":")
        by_id = {v.id: v for v in _verdicts(root, sets[int(k)])}
        if tid not in by_id:
            raise UsageError(f"replication: no claim {tid!r} in {sets[int(k)]}")
        restated[int(k) - 1][fid] = by_id[tid]
    missing = [
        "not statable" if str(k) in args.get("statable", "").split(",") else "not restated" for k in range(1, len(sets))
    ]
    rows = ["| prediction | " + " | ".join(names) + " | confirmed on |", "|---" * (len(sets) + 2) + "|"]
    for v in (v for v in first if v.kind == "prediction"):
        got = [v, *(r.get(v.id) for r in restated)]
        where = [n for n, x in zip(names, got) if x is not None and x.state == "confirmed"]
        waiting = [n for n, x in zip(names, got) if x is not None and x.state == "pending"]
        held = ("both" if len(got) == 2 else "all") if len(where) == len(got) else ", ".join(where) or "none"
        held += f" ({', '.join(waiting)} pending)" if waiting else ""
        cells = [_verdict_cell(x) if x is not None else missing[i - 1] for i, x in enumerate(got)]
        rows.append(f"| {v.claim['text']} <sub>`{v.id}`</sub> | " + " | ".join(cells) + f" | {held} |")
    out = "\n".join(rows) + "\n\n"
    if "summary" in args:
        out += _transfer_summary(first, restated, names, [int(k) for k in args["summary"].split(",")]).rstrip() + " "
    return out + RATIO_LEGEND + "\n"


def _transfer_summary(first: list, restated: list, names: list, among: list[int]) -> str:
    """One line: of the confirmed findings of the first set, how many can be stated about the sets ``among``
    (indices into ``names``), and of those how many are confirmed on every one of them, on some, on none (named),
    and how many wait for records there (a restatement pending, none confirmed yet)."""
    found = [v for v in first if v.kind == "prediction" and v.state == "confirmed"]
    states = {
        v.id: [getattr(restated[k - 1].get(v.id), "state", None) for k in among]
        for v in found
        if any(restated[k - 1].get(v.id) is not None for k in among)
    }
    every = [i for i, st in states.items() if all(x == "confirmed" for x in st)]
    waiting = [i for i, st in states.items() if "confirmed" not in st and "pending" in st]
    none = [i for i, st in states.items() if "confirmed" not in st and "pending" not in st]
    some = len(states) - len(every) - len(waiting) - len(none)
    return (
        f"Of the {len(found)} findings of {names[0]}, {len(states)} can be stated about "
        f"{' and '.join(names[k] for k in among)}: {len(every)} of {len(states)} confirmed on every one of them, "
        f"{some} on some, {len(none)} on none"
        + (f" ({', '.join(f'`{i}`' for i in none)})" if none else "")
        + (f", {len(waiting)} waiting for records" if waiting else "")
        + ".\n"
    )


@GENERATORS.register("verdicts")
def _verdict_lists(root: Path, args: dict) -> str:
    """A set's predictions (``tag`` keeps one page's) grouped by state, one line per state: what a page's summary of
    its verdicts says, generated, so it can never disagree with ``check``."""
    preds = [
        v
        for v in _verdicts(root, args["set"])
        if v.kind == "prediction" and args.get("tag") in (None, *(v.claim.get("tags") or []))
    ]
    lines = []
    for state in ("confirmed", "failed", "pending"):
        got = [v for v in preds if v.state == state]
        if got:
            items = "; ".join(f"{v.claim['text'].rstrip('.')} <sub>`{v.id}`</sub>" for v in got)
            lines.append(f"- **{state}** ({len(got)} of {len(preds)}): {items}\n")
    return "".join(lines) or "- no predictions\n"


RATIO_LEGEND = (
    "Ratio: a compared cell's mean over the mean of the cell it is compared with, lowest to highest over the "
    "claim's comparisons; n: the draws behind the smaller of each pair (a real model's are windows)."
)


def _verdict_cell(v) -> str:
    """A verdict in a table cell: its state, its adjusted p-value and, once decided, the numbers behind it."""
    decided = v.state in ("confirmed", "failed")
    p = f", p = {v.p_adj:.2g}" if v.p_adj is not None and decided else ""
    return f"**{v.state}**{p}" + (ratios(v) if decided else "")


def ratios(v) -> str:
    """The numbers behind a decided verdict: each compared cell's mean over the mean of the cell it is compared
    with (ratio), lowest to highest over the claim's comparisons, and the draws behind the smaller of each pair
    (n; a real model's are windows); empty for a claim that compares no pairs."""
    if not v.claim.get("b") or len(v.cells) % 2:
        return ""
    pairs = [(a, b) for a, b in zip(v.cells[0::2], v.cells[1::2]) if a.mean is not None and b.mean]
    if not pairs:
        return ""
    r = sorted(a.mean / b.mean for a, b in pairs)
    n = sorted({min(a.n, b.n) for a, b in pairs})
    span = f"{r[0]:.3g}" if len(r) == 1 else f"{r[0]:.3g} to {r[-1]:.3g}"
    draws = f"{n[0]}" if len(n) == 1 else f"{n[0]}-{n[-1]}"
    return f"; ratio {span} over {len(r)} comparison{'s' if len(r) > 1 else ''}, n = {draws}"


@GENERATORS.register("engines")
def _engines(root: Path, args: dict) -> str:
    """The set's predictions that the claims engine of their registration decides otherwise than today's, with both
    verdicts and why (its engine-changes.yaml, which ``check`` proves row by row)."""
    from .engines import render

    return render(root / args["set"])


@GENERATORS.register("include")
def _include(root: Path, args: dict) -> str:
    text = (root / args["file"]).read_text()
    if text.startswith("# "):  # the page has its own title
        text = text.split("\n", 1)[1].lstrip("\n")
    return text if text.endswith("\n") else text + "\n"


@GENERATORS.register("profile")
def _profile(root: Path, args: dict) -> str:
    return (root / args["set"] / "profile.md").read_text()


@GENERATORS.register("budgets")
def _budgets(root: Path, args: dict) -> str:
    """One row per result set (``sets``, comma-separated) from its profile.json: when and where it was measured,
    how busy its schedule kept the cores, its wall time, the training floor at the fp32 matmul peak measured in the
    same run, and the bf16 floor where the runs trained in bf16."""
    import json

    rows = [
        "| result set | measured | machine (cores) | precision | workers | cores busy | wall | training / "
        "evaluation (worker s) | fp32 peak | fp32 floor | wall / fp32 floor | bf16 peak | wall / bf16 floor |",
        "|" + "---|" * 13,
    ]
    for set_ in args["sets"].split(","):
        f = json.loads((root / set_ / "profile.json").read_text())
        ratio = f"{f['ratio']:.2f}x" if f.get("ratio") else "n/a"  # no training in the run: no floor
        bf = (
            f"{f['peak_bf16_gflops']:,.0f} GFLOP/s | {f['wall_s'] / f['floor_bf16_s']:.2f}x"
            if f.get("floor_bf16_s")
            else " | "
        )
        busy = "" if f.get("core_use") is None else f"{f['core_use']:.0%}"  # not in profiles before it was added
        rows.append(
            f"| `{set_}` | {f['measured']} | {f['cpu']} ({f['cores']}) | {', '.join(f['precision'])} | "
            f"{f['workers']} | {busy} | {f['wall_s']:,.0f} s | {f['train_s']:,.0f} s / {f['eval_s']:,.0f} s | "
            f"{f['peak_gflops']:,.0f} GFLOP/s | {f['floor_s']:,.0f} s | **{ratio}** | {bf} |"
        )
    return "\n".join(rows) + "\n"


def render(text: str, root: Path, where: str = "") -> str:
    """The text with every generated section rewritten."""

    def fill(m: re.Match) -> str:
        kind, args = m.group(2), _args(m.group(3))
        gen: Callable = GENERATORS.get(kind)
        try:
            body = gen(Path(root), args)
        except (KeyError, FileNotFoundError) as e:
            raise UsageError(f"{where}: section {kind} {m.group(3).strip()}: missing {e}") from e
        return m.group(1) + "\n" + body + "\n" + m.group(5)

    return SECTION.sub(fill, text)


def doc_files(root: Path) -> list[Path]:
    return sorted({p for pat in DOC_FILES for p in Path(root).glob(pat)})


def regenerate(root: Path, check: bool = False) -> list[Path]:
    """Rewrite every generated section of the docs under ``root``; returns the files that changed (with
    ``check``, the files that would change, nothing written)."""
    files = doc_files(root)
    if not files:
        raise UsageError(f"{root} holds no README.md nor docs/*.md: give --root the repository's root folder")
    changed = []
    _SETS.clear()  # the records and claims as they are now
    try:
        for path in files:
            old = path.read_text()
            new = render(old, root, str(path.relative_to(root)))
            if new != old:
                changed.append(path)
                if not check:
                    atomic_write_text(path, new)
    finally:
        _SETS.clear()  # nothing read here outlives this regeneration
    return changed
