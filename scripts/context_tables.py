"""The context-use tables (docs/findings/context.md) from the context suite's records (pebench run --suite context):
perplexity with ppl_far by length, and retrieval (copy accuracy with its 95% interval, copy range, passkey
per-digit / exact) by length. Usage: python scripts/context_tables.py [RESULTS_DIR] (default results/context)"""

import math
import sys

from pebench.findings.report import records_frame
from pebench.results import ResultsDir
from pebench.util.groups import row_key


def cell(g, task: str, metric: str, L: int, interval: bool = False) -> str:
    x = g[(g["task"] == task) & (g["length"] == L)]
    if x.empty or x["status"].iloc[0] != "ok" or math.isnan(x[metric].iloc[0]):
        return "n/a"
    v = float(x[metric].iloc[0])
    if not interval:
        return f"{v:.2f}" if metric != "copy_range" else f"{v:.0f}"
    lo, hi = x["intervals"].iloc[0][metric]
    return f"{v:.2f} [{lo:.2f}, {hi:.2f}]"


def main(root: str) -> None:
    df = records_frame(ResultsDir(root))
    lengths = sorted(df["length"].unique())
    order = sorted(df["label"].unique(), key=row_key)  # the one row order of every table
    mult = [f"{L // lengths[0]}x" for L in lengths]
    print("| scheme | " + " | ".join(f"ppl / ppl_far {m}" for m in mult) + " |")
    print("|---|" + "---|" * len(lengths))
    for label in order:
        g = df[df["label"] == label]
        print(
            f"| {label} | "
            + " | ".join(f"{cell(g, 'ppl', 'ppl', L)} / {cell(g, 'ppl', 'ppl_far', L)}" for L in lengths)
            + " |"
        )
    print()
    print(
        "| scheme | " + " | ".join(f"copy acc {m}" for m in mult) + " | copy range 1x / 2x / 16x | "
        "passkey digit / exact 1x | passkey digit / exact 2x |"
    )
    print("|---|" + "---|" * (len(lengths) + 3))
    for label in order:
        g = df[df["label"] == label]
        rng = " / ".join(cell(g, "copy", "copy_range", L) for L in (lengths[0], lengths[1], lengths[-1]))
        pk = [
            f"{cell(g, 'passkey', 'passkey_digit', L)} / {cell(g, 'passkey', 'passkey_exact', L, True)}"
            for L in lengths[:2]
        ]
        print(
            f"| {label} | "
            + " | ".join(cell(g, "copy", "copy_acc", L, True) for L in lengths)
            + f" | {rng} | "
            + " | ".join(pk)
            + " |"
        )


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "results/context")
