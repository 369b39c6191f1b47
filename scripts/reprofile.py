"""Rebuild a finished `pebench run`'s profile (profile.md, .csv, .json) with this code, from what the run wrote (its
runs' statuses and its records, stamped after --since), keeping the wall time, matmul peaks and precisions the run
measured (its own profile.json, to which it adds the cores' use): for a profile field added after the run, never for
a new measurement.

Usage: python scripts/reprofile.py RESULTS --since 2026-12-01T20:40:00+00:00 [--out DIR]
"""

from __future__ import annotations

import argparse
import csv
import json
from datetime import datetime
from pathlib import Path

from pebench.jobs import profile
from pebench.results import ResultsDir


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("results", type=Path)
    ap.add_argument("--since", required=True, help="when the run started (ISO 8601 with a time zone)")
    ap.add_argument("--out", type=Path, help="where to write the profile (default: RESULTS)")
    args = ap.parse_args()
    rd = ResultsDir(args.results)
    old = json.loads((rd.root / "profile.json").read_text())
    runs = [(d.name, rd.run_config(d.name)[0]) for d in sorted((rd.root / "runs").iterdir())]
    p = profile.collect(
        rd, runs, datetime.fromisoformat(args.since), old["wall_s"], old["peak_gflops"] * 1e9, old["workers"]
    )
    p.peak_bf16 = (old.get("peak_bf16_gflops") or 0.0) * 1e9
    with open(rd.root / "profile.csv") as f:  # the report's time, as the run measured it
        report = [float(r["seconds"]) for r in csv.DictReader(f) if r["kind"] == "report"]
    p.phases.append(profile.Phase("report", "tables and plots", sum(report)))
    out = ResultsDir(args.out or rd.root)
    out.root.mkdir(parents=True, exist_ok=True)
    profile.write(out, p, old["precision"])
    # profile.json: the run's own, with the new fields beside it (its peaks were rounded there: keep its floors)
    (out.root / "profile.json").write_text(json.dumps({**old, "core_use": round(p.core_use, 3)}, indent=1) + "\n")
    print(profile.summary(p))


if __name__ == "__main__":
    main()
