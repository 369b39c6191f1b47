"""One scale point's learning-rate grid into ``results/scale/tune.md``. The grids that
`pebench tune --point P` wrote into one or more results folders (one grid split over several invocations: by
learning-rate set, or over parallel lanes) are merged into one table, a row per scheme and a column per rate (1x
validation perplexity, the best in bold), beside the rate the suite trains the point at (``lr_by_scheme`` of
``configs/tiny.yaml``). The point's section is replaced where it is there, else appended; the other points'
sections and the page's opening paragraph are kept as they are.

Usage: python scripts/scale_tune.py --point steps4000 --how "`pebench tune --point steps4000`" DIR... [--out FILE]"""

import argparse
import re
from pathlib import Path

from pebench.config import load_config
from pebench.findings.claims import markdown_tables, table_value
from pebench.jobs.plan import at_point
from pebench.jobs.tune import pick_best
from pebench.util.fsutil import atomic_write_text
from pebench.util.groups import SCHEME_ORDER

ap = argparse.ArgumentParser()
ap.add_argument("grids", nargs="+", type=Path, help="results folders a `pebench tune --point` wrote (DIR/tune/tune.md)")
ap.add_argument("--point", required=True, help="the scale point the grids are at (steps4000, d256, ...)")
ap.add_argument("--how", required=True, help="how the grid ran (markdown), shown in its heading")
ap.add_argument("--out", type=Path, default=Path("results/scale/tune.md"))
args = ap.parse_args()

base = load_config("tiny")
name = at_point(base, args.point, False).name
cells: dict[str, dict[float, str]] = {}
for grid in args.grids:
    if not (grid / "tune" / "tune.md").is_file():
        raise SystemExit(f"error: {grid}/tune/tune.md not found: give results folders that `pebench tune` wrote")
    for header, rows in markdown_tables((grid / "tune" / "tune.md").read_text()):
        for row in rows:
            scheme = row[0]
            for col, cell in zip(header, row):
                if not col.startswith("lr ") or cell == "not run":
                    continue
                lr = float(col[3:])
                if cells.setdefault(scheme, {}).setdefault(lr, cell) != cell:
                    raise SystemExit(
                        f"error: {scheme} at lr {lr:g} differs between the grids: {cells[scheme][lr]}, {cell}"
                    )


lrs = sorted({lr for by_lr in cells.values() for lr in by_lr})
lines = [
    f"**{name}** ({args.how})",
    "",
    "| scheme | " + " | ".join(f"lr {lr:g}" for lr in lrs) + " | best | rate in tiny.yaml |",
    "|---|" + "---|" * (len(lrs) + 2),
]
# the best cell as `pebench tune` picks it (a diverged run never wins; a tie goes to the smaller rate)
# (perplexity orders the cells as their loss does)
bests = pick_best({(s, lr, ()): table_value(s, c).mean for s, by_lr in cells.items() for lr, c in by_lr.items()})
for scheme in sorted(cells, key=SCHEME_ORDER.index):
    by_lr, best = cells[scheme], bests.get(scheme, (None,))[0]  # None: every run of the scheme diverged
    shown = [f"**{by_lr[lr]}**" if lr == best else by_lr.get(lr, "") for lr in lrs]
    rate = base.train.lr_by_scheme[scheme]
    lines.append(
        f"| {scheme} | "
        + " | ".join(shown)
        + f" | {'-' if best is None else f'{best:g}'} | {rate:g}{' (differs)' if rate != best else ''} |"
    )
section = "\n".join(lines) + "\n"

text = args.out.read_text()
parts = re.split(r"(?m)^(?=\*\*tiny[^*]*\*\* \()", text)  # the opening paragraph, then one part per point
kept = [p for p in parts if not p.startswith(f"**{name}** (")]
if kept[-1] and not kept[-1].endswith("\n\n"):
    kept[-1] = kept[-1].rstrip("\n") + "\n\n"
atomic_write_text(args.out, "".join(kept) + section)
print(section)
