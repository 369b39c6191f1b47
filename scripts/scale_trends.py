"""The scale set's trend plots and fits (issue #40): for each axis, perplexity at 1x and at 16x and the 16x/1x ratio
against the axis, one line per scheme with its band over draws (log-scale axes; the colours of every other plot);
and for each scheme the log-log fit of its 16x/1x ratio against training compute over every point, with the slope's
interval and the fit extrapolated to the GPU configs (labelled as an extrapolation), once at least three points
are measured. Writes the PNGs (the axes with two points or more) and `trends.md` into the set.

Usage: python scripts/scale_trends.py results/scale"""

import sys
from pathlib import Path

from pebench import estimate as es
from pebench.config import load_config
from pebench.findings import trends as tr
from pebench.findings.report import records_frame
from pebench.jobs.suites import SCALE_POINTS
from pebench.results import ResultsDir

ROOT = Path(sys.argv[1])
SCHEMES = ["none", "sinusoidal", "learned", "shaw", "t5", "rope", "alibi", "rope+yarn"]
base = load_config("tiny")
df = records_frame(ResultsDir(ROOT))
df = df[(df["task"] == "ppl") & (df["split"] == "test") & (df["protocol"] == "nonoverlap")]
configs = {p.apply(base).name: p for p in SCALE_POINTS}
flops = {
    name: es.estimate(p.apply(base), "bf16", [p.apply(base).model.context]).train_flops for name, p in configs.items()
}
x_of = {
    "budget": lambda c: c.train.steps * c.train.batch_size * c.model.context,
    "width": lambda c: es.count_params(c)[0],
    "context": lambda c: c.model.context,
}
xlabel = {"budget": "training tokens", "width": "parameters", "context": "training context"}
for axis in ("budget", "width", "context"):
    pts = [p for p in SCALE_POINTS if p.axis in ("", axis)]
    pairs = sorted(((p.apply(base).name, x_of[axis](p.apply(base))) for p in pts), key=lambda t: t[1])
    pairs = [(c, x) for c, x in pairs if (df["config"] == c).any()]  # the points measured so far
    if len(pairs) < 2:
        print(f"{axis}: {len(pairs)} point(s) measured, no trend plot")
        continue
    for multiple, ratio in ((1, None), (16, None), (16, 1)):
        name = f"trend_{axis}_{multiple}x" + ("_over_1x" if ratio else "") + ".png"
        tr.plot_axis(df, pairs, SCHEMES, multiple, ROOT / name, xlabel[axis], ratio_to=ratio)
lines = [
    "| scheme | slope of log(16x/1x) on log(training FLOPs) | points x draws | at gpt2-small (extrapolated) |",
    "|---|---|---|---|",
]
target = es.estimate(load_config("gpt2-small"), "bf16", [1024]).train_flops
for s in SCHEMES:
    xs, ys = [], []
    for name in configs:
        for v in tr.ratio_by_draw(df, name, s).values():
            xs.append(flops[name]), ys.append(v)
    if len(set(xs)) < 3:  # a line through two points says nothing about the shape of a trend
        lines.append(f"| {s} | fewer than 3 points measured | {len(xs)} | |")
        continue
    f = tr.fit_loglog(xs, ys)
    y, lo, hi = f.predict(target)
    lines.append(f"| {s} | {f.b:+.3f} ± {f.b_half:.3f} | {f.n} | {y:.2f} [{lo:.2f}, {hi:.2f}] |")
(ROOT / "trends.md").write_text("\n".join(lines) + "\n")
print((ROOT / "trends.md").read_text())
