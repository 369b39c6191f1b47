"""pebench's own models evaluated in fp32 and in bf16 autocast, side by side: the table that decides whether bf16 is
a fair evaluation precision (``--eval-precision``; auto takes bf16 where the CPU multiplies it natively).

Every run of RESULTS (a results folder with trained runs: the README's main job's, say) is evaluated twice with
``pebench eval`` and the same settings (perplexity at 1-16x, every run's own RoPE scalings), once per precision, each
into its own temporary folder, one after the other; the table gives, per label, the largest relative perplexity
difference over the lengths, then every cell's, against the tolerance, and each precision's wall time.

Usage: python scripts/eval_precision.py RESULTS [--out results/speed/eval-precision.md] [--tolerance 0.005]"""

import argparse
import datetime
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pebench.model.device import cpu_name, native_bf16_cpu
from pebench.results import ResultsDir
from pebench.util.fsutil import atomic_write_text

PRECISIONS = ("fp32", "bf16")


def evaluate(runs: Path, precision: str, work: Path) -> tuple[dict, float]:
    """The perplexity records of every run under ``runs`` evaluated in ``precision`` (folder ``work``), and the
    evaluation's wall seconds."""
    (work / "runs").mkdir(parents=True)
    for run in sorted(p for p in runs.iterdir() if (p / "checkpoint.pt").is_file()):
        (work / "runs" / run.name).symlink_to(run.resolve())
    t = time.perf_counter()
    cmd = [sys.executable, "-m", "pebench", "eval", "--results", str(work), "--eval-precision", precision]
    done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    if done.returncode:
        raise SystemExit(f"error: pebench eval --eval-precision {precision} failed: {done.stderr.strip()[-500:]}")
    wall = time.perf_counter() - t
    recs = [r for r in ResultsDir(work).iter_records() if r["task"] == "ppl" and r["status"] == "ok"]
    return {(r["run"], r["label"], r["length"]): r for r in recs}, wall


def table(cells: dict[str, dict], walls: dict[str, float], tolerance: float) -> list[str]:
    """The markdown rows: per label its largest |bf16 / fp32 - 1| and where, then every cell's, then the times."""
    a, b = cells["fp32"], cells["bf16"]
    keys = sorted(set(a) & set(b), key=lambda k: (k[1], k[2]))
    if not keys or set(a) != set(b):
        raise SystemExit("error: the two evaluations did not measure the same cells")
    worst: dict[str, tuple[float, int]] = {}
    for k in keys:
        rel = b[k]["metrics"]["ppl"] / a[k]["metrics"]["ppl"] - 1
        worst[k[1]] = max(worst.get(k[1], (0.0, 0)), (abs(rel), k[2]))
    rows = [f"| {label} | {100 * w:.3f} | {L:,} |" for label, (w, L) in sorted(worst.items())]
    top = max(worst.values())
    rows.append(f"| every cell | {100 * top[0]:.3f} | {top[1]:,} |")
    return [
        "| label | largest difference, % | at length |",
        "|---|---|---|",
        *rows,
        "",
        "| precision | evaluation wall, s |",
        "|---|---|",
        *[f"| {p} | {walls[p]:.1f} |" for p in PRECISIONS],
        "",
        f"{len(keys)} cells; bf16 took {walls['bf16'] / walls['fp32']:.2f}x fp32's time. Largest relative perplexity "
        f"difference {100 * top[0]:.3f}% against the tolerance {100 * tolerance:g}%: "
        + ("within it." if top[0] <= tolerance else "NOT within it."),
    ]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("results", type=Path)
    ap.add_argument("--out", type=Path, default=Path("results/speed/eval-precision.md"))
    ap.add_argument("--tolerance", type=float, default=0.005, help="the largest relative perplexity difference kept")
    a = ap.parse_args()
    if not (a.results / "runs").is_dir():
        raise SystemExit(f"error: {a.results} has no runs/ folder; give a results folder with trained runs")
    cells, walls = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for p in PRECISIONS:
            cells[p], walls[p] = evaluate(a.results / "runs", p, Path(tmp) / p)
    any_rec = next(iter(cells["fp32"].values()))
    prov = any_rec["provenance"]
    lines = [
        "# pebench's models evaluated in fp32 and in bf16 autocast",
        "",
        f"`python scripts/eval_precision.py {a.results}` ({datetime.date.today().isoformat()}, {cpu_name()}, native "
        f"bf16: {'yes' if native_bf16_cpu() else 'no'}, {prov.get('threads')} threads, torch "
        f"{prov.get('torch_version')}): every run evaluated by `pebench eval --eval-precision fp32`, then "
        "`bf16`, the same perplexity cells (1-16x, the runs' RoPE scalings); the relative difference is "
        "bf16 / fp32 - 1 of one cell's perplexity.",
        "",
        *table(cells, walls, a.tolerance),
    ]
    atomic_write_text(a.out, "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
