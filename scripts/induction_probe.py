"""Has a run formed an induction head? Accuracy on the repeats of `pairs` windows (random strings of letters and
digits, each followed by its repeat; the data of the induction warm-up) from a run's checkpoint: about 0.1 on the
plateau (recent letters guessed), 0.8-0.97 once the induction head has formed (a warm-up's phase change).

Usage: python scripts/induction_probe.py RUN_DIR [RUN_DIR ...] [--lengths 4,16] [--windows 64]"""

import argparse
from pathlib import Path

import numpy as np
import torch

from pebench.data.needles import pairs_window
from pebench.model.checkpoint import build_model, load_checkpoint
from pebench.results import ResultsDir


def repeat_accuracy(model, context: int, lengths: tuple, windows: int, seed: int = 999) -> float:
    """Argmax accuracy on the bytes of each repeat after its first (the first needs the string's start known)."""
    rng = np.random.default_rng(seed)
    rows, masks = [], []
    for _ in range(windows):
        repeats = []
        rows.append(pairs_window(rng, context + 1, lengths, repeats))
        m = np.zeros(context + 1, dtype=bool)
        for start, end in repeats:
            m[start + 1 : end] = True
        masks.append(m)
    x = torch.tensor(np.stack(rows), dtype=torch.long)
    mask = torch.from_numpy(np.stack(masks))[:, 1:]
    with torch.no_grad():
        hit = model(x[:, :-1]).argmax(-1) == x[:, 1:]
    return hit[mask].float().mean().item()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--lengths", default="4,16")
    ap.add_argument("--windows", type=int, default=64)
    a = ap.parse_args()
    lengths = tuple(int(v) for v in a.lengths.split(","))
    for path in a.runs:
        run = Path(path)
        rd, name = ResultsDir(str(run.parent.parent)), run.name  # RESULTS/runs/NAME
        cfg, _ = rd.run_config(name)
        model = build_model(cfg).eval()
        ckpt = load_checkpoint(rd.run_dir(name) / "checkpoint.pt")  # unfinished runs too: a warm-up mid-way
        model.load_state_dict(ckpt["model"])
        acc = repeat_accuracy(model, cfg.model.context, lengths, a.windows)
        print(f"{name}\tstep {ckpt['step']}\trepeat accuracy {acc:.3f}")


if __name__ == "__main__":
    main()
