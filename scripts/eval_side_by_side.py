"""Two evaluations of the same trained runs, side by side: where the time went in each (``profile.csv``, seconds per
row label and length) and whether they measured the same (each record's metrics, paired by run, task, variant,
protocol and length). For a change to evaluation's speed: run the same ``pebench run`` on copies of one results
folder's trained runs with the code before and after, then

    python scripts/eval_side_by_side.py BEFORE AFTER > side_by_side.md
"""

from __future__ import annotations

import csv
import math
import sys
from collections import defaultdict
from pathlib import Path

from pebench.results import ResultsDir


def eval_seconds(folder: Path) -> dict:
    """(label, length) -> seconds of evaluation, from the run's profile.csv."""
    out = {}
    with open(folder / "profile.csv") as f:
        for row in csv.DictReader(f):
            if row["kind"] == "eval":
                label, length = row["name"].rsplit(" L=", 1)
                out[label, int(length)] = float(row["seconds"])
    return out


def time_table(before: dict, after: dict) -> list[str]:
    """Seconds by length (every label summed) and by label (every length summed), before and after."""
    lines = ["| evaluation | before, s | after, s | speed-up |", "|---|---|---|---|"]

    def row(name, keys):
        b, a = sum(before.get(k, 0.0) for k in keys), sum(after.get(k, 0.0) for k in keys)
        lines.append(f"| {name} | {b:,.1f} | {a:,.1f} | {b / a:.2f}x |" if a else f"| {name} | {b:,.1f} | {a:,.1f} | |")

    keys = sorted(set(before) | set(after))
    for L in sorted({L for _, L in keys}):
        row(f"L = {L:,}, every label", [k for k in keys if k[1] == L])
    for label in sorted({lab for lab, _ in keys}):
        row(f"{label}, every length", [k for k in keys if k[0] == label])
    row("**all**", keys)
    return lines


def metrics_by_key(folder: Path) -> dict:
    return {
        (r["run"], r["task"], r["variant"], r["protocol"], r["length"]): r.get("metrics") or {}
        for r in ResultsDir(folder).iter_records()
        if r.get("status") == "ok"
    }


def same_science(before: dict, after: dict) -> list[str]:
    """Per metric: records paired, how many give the identical value, the largest difference and relative one."""
    stats = defaultdict(lambda: [0, 0, 0.0, 0.0])
    for key in sorted(set(before) & set(after)):
        for name, b in before[key].items():
            a = after[key].get(name)
            if not isinstance(b, (int, float)) or not isinstance(a, (int, float)) or math.isnan(b):
                continue
            s = stats[name]
            s[0] += 1
            s[1] += a == b
            s[2] = max(s[2], abs(a - b))
            s[3] = max(s[3], abs(a - b) / abs(b) if b else 0.0)
    lines = [
        f"Records paired: {len(set(before) & set(after)):,} (before {len(before):,}, after {len(after):,}).",
        "",
        "| metric | values paired | identical | largest difference | largest relative difference |",
        "|---|---|---|---|---|",
    ]
    for name, (n, same, diff, rel) in sorted(stats.items()):
        lines.append(f"| {name} | {n:,} | {same:,} | {diff:.3g} | {rel:.3g} |")
    return lines


def main(before: str, after: str) -> None:
    b, a = Path(before), Path(after)
    print(
        f"Evaluation side by side: before `{b.name}`, after `{a.name}` (their `profile.csv`: the seconds of "
        "each evaluation item, as its worker ran it)\n"
    )
    print("\n".join(time_table(eval_seconds(b), eval_seconds(a))))
    print("\nThe same measurements? Each record's metrics, before against after:\n")
    print("\n".join(same_science(metrics_by_key(b), metrics_by_key(a))))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python scripts/eval_side_by_side.py BEFORE AFTER")
    main(*sys.argv[1:])
