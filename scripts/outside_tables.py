"""Tables of an outside model's evaluation from the records under WORK folders (scripts/real.sh, scripts/gemma.sh):

- ``profile``: every perplexity cell's seconds per full window and tokens per second (every position a window runs,
  scored or not, over the cell's time; a short last window counts its own positions) and the peak resident memory
  of the process that measured it (``provenance.peak_rss_mb``: the model, the cell and everything before it in that
  process), by length and scaling;
- ``stream``: the same windows read streamed (through the KV cache, ``--stream``) and in one pass (``--stream 0``):
  each cell's perplexity both ways, their relative difference, the largest difference of one window's mean loss,
  time and peak memory each way. The tolerance, fixed before the first real-model comparison was run: streamed
  perplexity within 0.1% of one pass (relative) in the dtype the model is evaluated in (bf16 rounds each pass's
  matmuls in its own order); dynamic NTK is left out of the comparison, where the two forms differ by design.

Usage: python scripts/outside_tables.py profile WORK [WORK...] --out FILE --model NAME [--note TEXT]
           [--untimed LABEL@LENGTH ...]
       python scripts/outside_tables.py stream STREAMED ONE_PASS --out FILE --model NAME"""

import argparse
import datetime
from pathlib import Path

from pebench.results import ResultsDir, protocol_key
from pebench.util.fsutil import atomic_write_text

TOLERANCE = 0.001  # streamed against one pass: relative perplexity, fixed before the comparison ran


def ppl_records(*folders: Path) -> list[dict]:
    out = [r for f in folders for r in ResultsDir(f).iter_records() if r["task"] == "ppl" and r["status"] == "ok"]
    if not out:
        raise SystemExit(f"error: no perplexity records under {', '.join(map(str, folders))}")
    return out


def _mib(r: dict) -> str:
    v = r["provenance"].get("peak_rss_mb")
    return "n/a" if v is None else f"{v:,.0f}"


def _header(r: dict, what: str) -> str:
    p = r["provenance"]
    return (
        f"`python scripts/outside_tables.py {what}` ({datetime.date.today().isoformat()}; {p.get('dtype')}, "
        f"{p.get('device')}, {p.get('threads')} threads, torch {p.get('torch_version')}, transformers "
        f"{(p.get('libraries') or {}).get('transformers', 'unrecorded')})"
    )


def positions(r: dict) -> int:
    """Every position the cell's windows ran: each window runs one more than it scores (its first token is only read).
    A stream's last window can be short (``--max-tokens`` 393,214 at 65,536 tokens: six full windows and one of four
    tokens), so the number of windows alone would overcount."""
    return r["details"]["tokens_scored"] + r["details"]["windows"]


def windows(r: dict) -> str:
    """The windows a cell ran: full ones, and the short last one where there is one."""
    full, win = len(r["details"]["window_losses"]), r["details"]["windows"]
    return str(full) if win == full else f"{full} + 1 of {positions(r) - full * r['length']:,} tokens"


def rate(r: dict, untimed: frozenset = frozenset()) -> tuple[str, str]:
    """Seconds per full window and tokens per second at the cell's measured rate (positions run over its wall time),
    n/a for both where its time is not the whole measurement's (``timed``)."""
    if not timed(r, untimed):
        return "n/a", "n/a"
    per_s = positions(r) / r["provenance"]["wall_s"]
    return f"{r['length'] / per_s:.1f}", f"{per_s:,.0f}"


def timed(r: dict, untimed: frozenset = frozenset()) -> bool:
    """Whether the record's ``wall_s`` is the whole measurement's: not where it was resumed from a journal that did
    not keep its time (``provenance.resumed.seconds_before`` None), nor where the user names it (``untimed``:
    'LABEL@LENGTH', a cell known to be resumed before records said so)."""
    resumed = r["provenance"].get("resumed")
    return f"{r['label']}@{r['length']}" not in untimed and not (resumed and resumed["seconds_before"] is None)


def profile(folders: list[Path], out: Path, model: str, note: str = "", untimed: frozenset = frozenset()) -> str:
    """Seconds per window, tokens per second and peak memory of every perplexity cell the folders hold; a cell whose
    time is not the whole measurement's (``timed``) shows n/a and is said so below the table."""
    recs = sorted(ppl_records(*folders), key=lambda r: (r["length"], r["split"], r["variant"]))
    rows, partial = [], 0
    for r in recs:
        stream = r["provenance"].get("stream", "one pass")
        partial += not timed(r, untimed)
        rows.append(
            f"| {r['length']:,} | {r['label']} | {r['split']} {protocol_key(r)} | {windows(r)} | "
            f"{stream or 'one pass'} | {' | '.join(rate(r, untimed))} | {_mib(r)} |"
        )
    lines = [
        f"# The evaluation's time and memory: {model}",
        "",
        _header(recs[0], "profile")
        + ": a window's tokens per second count every position it runs; peak memory is the measuring process's, "
        "the model included." + (f" {note}" if note else ""),
        "",
        "| length | model | split, protocol | windows | streamed per pass | s per full window | tokens/s | peak MiB |",
        "|---|---|---|---|---|---|---|---|",
        *rows,
    ]
    if partial:
        lines += [
            "",
            f"n/a: {partial} cell(s) resumed from a journal that did not keep its time (the record's time "
            "is of its last process only); their peak memory is that process's.",
        ]
    return _write(out, lines)


def stream(streamed: Path, one_pass: Path, out: Path, model: str, note: str = "") -> str:
    """Each cell measured both ways, side by side, against ``TOLERANCE``, with each way's tokens per second."""
    key = lambda r: (r["label"], r["length"], r["split"], protocol_key(r))  # noqa: E731
    a, b = {key(r): r for r in ppl_records(streamed)}, {key(r): r for r in ppl_records(one_pass)}
    rows, worst, n_dynamic = [], 0.0, 0
    both = sorted(set(a) & set(b), key=lambda k: (k[1], k[0]))
    passes = " or ".join(f"{x:,}" for x in sorted({a[k]["provenance"].get("stream") or 0 for k in both}))
    for k in both:
        s, o = a[k], b[k]
        rel = s["metrics"]["ppl"] / o["metrics"]["ppl"] - 1
        dynamic = (s.get("pe_state") or {}).get("variant") == "dynamic"
        n_dynamic += dynamic
        worst = worst if dynamic else max(worst, abs(rel))
        win = max(abs(x - y) for x, y in zip(s["details"]["window_losses"], o["details"]["window_losses"]))
        (per_s, tps_s), (per_o, tps_o) = rate(s), rate(o)
        rows.append(
            f"| {k[1]:,} | {k[0]} | {windows(s)} | {o['metrics']['ppl']:.4f} | "
            f"{s['metrics']['ppl']:.4f} | "
            f"{100 * rel:+.4f}%{' (dynamic: differs by design)' if dynamic else ''} | {win:.5f} | {per_o} | "
            f"{per_s} | {tps_o} | {tps_s} | {_mib(o)} | {_mib(s)} |"
        )
    if not rows:
        raise SystemExit(f"error: no cell measured both ways under {streamed} and {one_pass}")
    lines = [
        f"# Streamed against one pass: {model}",
        "",
        _header(a[both[0]], "stream") + f": the same windows, read through the KV cache {passes} tokens per pass "
        "and in one pass; 'window' is the "
        "largest difference of one window's mean loss (nats); tokens per second count every position a window runs."
        + (f" {note}" if note else ""),
        "",
        "| length | model | windows | ppl one pass | ppl streamed | streamed - one pass | window | "
        "s/full window one pass | s/full window streamed | tokens/s one pass | tokens/s streamed | peak MiB one pass | "
        "peak MiB streamed |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        f"Largest relative perplexity difference {100 * worst:.4f}% against the tolerance {100 * TOLERANCE:g}% fixed "
        "before the comparison: "
        + ("within it." if worst <= TOLERANCE else "NOT within it.")
        + (f" Left out of it: {n_dynamic} dynamic NTK row(s), whose two forms differ by design." if n_dynamic else ""),
    ]
    return _write(out, lines)


def _write(out: Path, lines: list[str]) -> str:
    text = "\n".join(lines) + "\n"
    atomic_write_text(out, text)
    print(text, end="")
    return text


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="what", required=True)
    p = sub.add_parser("profile")
    p.add_argument("work", type=Path, nargs="+")
    s = sub.add_parser("stream")
    s.add_argument("streamed", type=Path)
    s.add_argument("one_pass", type=Path)
    for x in (p, s):
        x.add_argument("--out", type=Path, required=True)
        x.add_argument("--model", required=True)
    p.add_argument("--untimed", action="append", default=[], help="LABEL@LENGTH: a cell resumed before records said so")
    for x in (p, s):
        x.add_argument("--note", default="", help="a sentence on how the time was measured (other work on the cores)")
    a = ap.parse_args()
    if a.what == "profile":
        profile(a.work, a.out, a.model, a.note, frozenset(a.untimed))
    else:
        stream(a.streamed, a.one_pass, a.out, a.model, a.note)


if __name__ == "__main__":
    main()
