"""The tiered tasks' table (docs/findings/methods2026.md): for each scheme (a row per label and config), each task's
two tiers (pairs, count, list, common, decoy: ``NAME_t1`` and ``NAME_t2``) at one length, the mean over the draws
with their number, and per task how many of the rows score the harder tier higher (``tier_order`` defect) and how
many of those do so beyond both intervals. Usage: python scripts/tier_table.py [SET] [--out FILE]
(default results/methods2026; without --out, printed)."""

import argparse
from collections import defaultdict
from pathlib import Path

from pebench.findings.report import records_frame
from pebench.results import ResultsDir
from pebench.util.groups import row_key

TASKS = ("pairs", "count", "list", "common", "decoy")
CHANCE = {"pairs": "1/3", "count": "1/10", "list": "1/10", "common": "1/3", "decoy": "1/3"}


def rows_of(df, length: int) -> dict:
    """(label, config) -> task -> [(t1, t2, tier_order, t1 interval, t2 interval)] over the draws at ``length``."""
    out: dict = defaultdict(lambda: defaultdict(list))
    for _, r in df[(df["task"].isin(TASKS)) & (df["length"] == length) & (df["status"] == "ok")].iterrows():
        t = r["task"]
        iv = r["intervals"] or {}
        out[(r["label"], r["config"])][t].append(
            (r[f"{t}_t1"], r[f"{t}_t2"], r["details"].get("tier_order"), iv.get(f"{t}_t1"), iv.get(f"{t}_t2"))
        )
    return out


def table(df, length: int, context: int) -> list[str]:
    rows = rows_of(df, length)
    head = " | ".join(f"{t} t1 / t2 (chance {CHANCE[t]})" for t in TASKS)
    lines = [f"At {length:,} tokens ({length // context}x):", "", f"| scheme | draws | {head} |"]
    lines.append("|---|---|" + "---|" * len(TASKS))
    defects: dict = defaultdict(lambda: [0, 0, 0])
    for key in sorted(rows, key=lambda k: (row_key(k[0]), k[1])):
        cells, n = [], 0
        for t in TASKS:
            xs = rows[key].get(t, [])
            n = max(n, len(xs))
            if not xs:
                cells.append("n/a")
                continue
            cells.append(f"{sum(x[0] for x in xs) / len(xs):.2f} / {sum(x[1] for x in xs) / len(xs):.2f}")
            for x in xs:
                d = defects[t]
                d[0] += 1
                d[1] += x[2] == "defect"
                d[2] += bool(x[2] == "defect" and x[3] and x[4] and x[4][0] > x[3][1])
        lines.append(f"| {key[0]} ({key[1]}) | {n} | " + " | ".join(cells) + " |")
    lines += ["", "Harder tier above the easier one (cells of one draw each): "]
    lines[-1] += "; ".join(f"{t} {d[1]} of {d[0]} ({d[2]} beyond both intervals)" for t, d in defects.items()) + "."
    return lines


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("set", nargs="?", default="results/methods2026")
    ap.add_argument("--out")
    a = ap.parse_args()
    df = records_frame(ResultsDir(a.set))
    tasks = df[df["task"].isin(TASKS)]
    context = int(tasks["train_context"].min()) if "train_context" in tasks else 128
    lines = [f"`python scripts/tier_table.py {a.set}`: each tier's mean credit over the draws a row has, per task.", ""]
    for L in sorted(tasks["length"].unique()):
        lines += table(df, int(L), context) + [""]
    text = "\n".join(lines)
    if a.out:
        from pebench.util.fsutil import atomic_write_text

        atomic_write_text(Path(a.out), text)
    else:
        print(text)


if __name__ == "__main__":
    main()
