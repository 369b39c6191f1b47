"""Make the trained checkpoint the difficulty-tier check reads (tests/tasks/test_tier_check.py) from a finished run:
its config, its status, its training log (the commit and tree it trained from) and its weights alone, in bf16 (no
optimizer or random state), under tests/fixtures/tiers/RUN/. The committed fixture was made by

    pebench train --pe rope --config context --overlay scripts/tier_fixture.yaml --seed 61 --results R
    python scripts/tier_fixture.py R rope-context-tier_fixture-s61

Usage: python scripts/tier_fixture.py RESULTS RUN [--out DIR]
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import torch

from pebench.model.checkpoint import load_checkpoint
from pebench.results import CHECKPOINT, ResultsDir
from pebench.util.fsutil import atomic_save

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "tiers"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results")
    ap.add_argument("run")
    ap.add_argument("--out", default=str(OUT))
    a = ap.parse_args()
    results = ResultsDir(Path(a.results))
    if results.state(a.run) != "finished":
        print(f"error: run {a.run!r} in {a.results} is not finished", file=sys.stderr)
        return 2
    src, dest = results.run_dir(a.run), Path(a.out) / a.run
    ckpt = load_checkpoint(src / CHECKPOINT)
    model = {k: v.to(torch.bfloat16) if v.is_floating_point() else v for k, v in ckpt["model"].items()}
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("config.yaml", "status.json", "training.jsonl"):  # the training log: the commit it trained at
        shutil.copyfile(src / name, dest / name)
    keep = {"model": model, "config": ckpt["config"], "step": ckpt["step"]}
    atomic_save(dest / CHECKPOINT, lambda tmp: torch.save(keep, tmp))
    print(f"wrote {dest} ({(dest / CHECKPOINT).stat().st_size:,} bytes of weights)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
