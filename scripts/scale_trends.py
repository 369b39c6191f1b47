"""The scale set's trend plots and fits: for each axis, perplexity at 1x and at 16x and the 16x/1x ratio
against the axis, one line per scheme with its band over draws (log-scale axes; the colours of every other plot);
and, for each axis, each scheme's 16x/1x ratio at each point with the lack-of-fit test of a log-log line through
the points (the point as the unit: ``pebench.findings.trends.fit_table``), the slope and its extrapolation to the
GPU configs stated only on at least four points whose line the test keeps (the width at fixed steps,
`width-steps`, beside the width at fixed tokens per parameter); and the width again with width 256's
draws of the schemes its grid moves to another rate taken from their rerun there (config `tiny-d256-tuned`), once
that has every one of them. Writes the PNGs (the axes with two points or more) and `trends.md` into the set.

Usage: python scripts/scale_trends.py results/scale"""

import sys
from pathlib import Path

import yaml

from pebench.config import load_config
from pebench.findings import trends as tr
from pebench.findings.report import records_frame
from pebench.jobs.suites import SCALE_POINTS
from pebench.perf import estimate as es
from pebench.results import ResultsDir

ROOT = Path(sys.argv[1])
SCHEMES = ["none", "sinusoidal", "learned", "shaw", "t5", "rope", "alibi", "rope+yarn"]
base = load_config("tiny")
df = records_frame(ResultsDir(ROOT))
df = df[(df["task"] == "ppl") & (df["split"] == "test") & (df["protocol"] == "nonoverlap")]
# every point trained in bf16 autocast; the default point's fp32 draws would move a second thing along each axis
df = df[df["precision"] == "bf16"]


# the schemes width 256's grid moves to another rate: those its overlay sets a rate for (the overlay names the rerun)
RATE_CHANGED = tuple(yaml.safe_load((ROOT / "d256-tuned.yaml").read_text())["train"]["lr_by_scheme"])


EVERY_POINT = {"rope", "alibi", "shaw"}  # the schemes every point runs (the fourth and fixed-steps points run these)


def measured(config: str, frame=df) -> bool:
    """A point is measured once the schemes every point runs are in (a point run for one scheme alone is not); a
    scheme not run at a measured point shows "-" there in the fit tables and is fitted without it."""
    return EVERY_POINT <= set(frame.loc[frame["config"] == config, "scheme"])


def params(c) -> float:
    return es.count_params(c)[0]


x_of = {  # each axis's variable on its plots
    "budget": lambda c: c.train.steps * c.train.batch_size * c.model.context,
    "width": params,
    "width-steps": params,
    "context": lambda c: c.model.context,
}
FIT_X = {**x_of, "budget": lambda c: c.train.steps * c.train.batch_size * c.model.context / params(c)}  # the fits'
AXES = tuple(x_of)
FIT_LABEL = {"budget": "training tokens per parameter", "width": "parameters", "width-steps": "parameters"}
FIT_LABEL["context"] = "training context"
AXIS_NOTE = {"width-steps": " (500 steps at every width)"}
xlabel = {**FIT_LABEL, "budget": "training tokens"}
for axis in AXES:
    pts = [p for p in SCALE_POINTS if p.axis in ("", axis)]
    pairs = sorted(((p.apply(base).name, x_of[axis](p.apply(base))) for p in pts), key=lambda t: t[1])
    pairs = [(c, x) for c, x in pairs if measured(c)]  # the points measured so far
    if len(pairs) < 2:
        print(f"{axis}: {len(pairs)} point(s) measured, no trend plot")
        continue
    configs = {c for c, _ in pairs}  # the schemes run at two of the axis's points or more (a lone dot is no trend)
    shown = [s_ for s_ in SCHEMES if df.loc[(df["label"] == s_) & df["config"].isin(configs), "config"].nunique() > 1]
    for multiple, ratio in ((1, None), (16, None), (16, 1)):
        name = f"trend_{axis}_{multiple}x" + ("_over_1x" if ratio else "") + ".png"
        tr.plot_axis(df, pairs, shown, multiple, ROOT / name, xlabel[axis], ratio_to=ratio)
TARGETS = ("small", "gpt2-small")  # the configs a GPU user starts from (docs/findings/scale.md)
targets = {t: load_config(t) for t in TARGETS}
lines = [
    "Each scheme's 16x/1x perplexity ratio at each point of an axis (the geometric mean over the point's draws), "
    "and the lack-of-fit p of a straight line in log(16x/1x) on log(the axis's variable) through the points (the "
    "point as the unit; the draws within a point are its pure error). A slope is stated, with its 95% interval on "
    "points - 2 degrees of freedom, only on at least four points whose line the test does not reject; only then "
    "are the last columns filled, **an extrapolation** to the GPU configs' value of that variable along one axis "
    "with the others held at the default point. Where no slope is stated the table shows the points' shape, an "
    "observation.",
    "",
]


def fit_section(frame, axis: str, head: str, col: str) -> list[str]:
    """One axis's fit table: each scheme's slope over the points measured in ``frame`` and its extrapolations."""
    pts = {p.apply(base).name: p.apply(base) for p in SCALE_POINTS if p.axis in ("", axis)}
    xs_of = {name: FIT_X[axis](c) for name, c in pts.items() if measured(name, frame)}
    out = [
        head
        + "; points measured: "
        + ", ".join(f"{n} ({x:,.4g})" for n, x in sorted(xs_of.items(), key=lambda t: t[1]))
        + ")",
        "",
    ]
    targets_x = {t: FIT_X[axis](c) for t, c in targets.items()}
    out += tr.fit_table(frame, xs_of, SCHEMES, targets_x, col)
    return out + [""]


for axis in AXES:
    col = f"slope of log(16x/1x) on log({FIT_LABEL[axis]})"
    lines += fit_section(df, axis, f"**{axis}** (x: {FIT_LABEL[axis]}{AXIS_NOTE.get(axis, '')}", col)
own = tr.with_rerun(df, "tiny-d256", "tiny-d256-tuned", RATE_CHANGED)
lines += (
    fit_section(
        own,
        "width",
        "**width, 256 at its grid's rates** (x: parameters; width 256's draws of the schemes its grid moves to 3e-3 "
        "from the rerun `tiny-d256-tuned`, the rest as above",
        "slope of log(16x/1x) on log(parameters), width 256 at its grid's rates",
    )
    if own is not None
    else ["**width, 256 at its grid's rates**: its rerun has not every scheme yet; no fit.", ""]
)
(ROOT / "trends.md").write_text("\n".join(lines))
print((ROOT / "trends.md").read_text())
