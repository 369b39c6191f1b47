"""Learning curves: every run's validation perplexity against its training tokens (``train.eval_every``), read
from the runs' training logs (``ResultsDir.learning_curves``), as a CSV and a plot beside the main report."""

from __future__ import annotations

from pathlib import Path

from ..results import ResultsDir
from ..util.fsutil import atomic_path, save_plot
from ..util.groups import row_key
from ..util.stats import mean_ci
from ..util.style import style_for


def write_curves(results: ResultsDir) -> list[Path]:
    """curves.csv and plot_curves.png in the results folder, where any run logged a learning curve (else nothing)."""
    cf = curves_frame(results)
    if cf.empty:
        return []
    with atomic_path(results.root / "curves.csv") as tmp:
        cf.to_csv(tmp, index=False)
    return [results.root / "curves.csv", plot_curves(cf, results.root / "plot_curves.png")]


def curves_frame(results):
    """Learning curves, one row per (run, step, length): ppl against training tokens."""
    import pandas as pd

    rows = [
        {
            "run": c["run"],
            "scheme": c["scheme"],
            "seed": c["seed"],
            "step": c["step"],
            "tokens": c["tokens"],
            "length": int(L),
            "ppl": p,
        }
        for c in results.learning_curves()
        for L, p in c["curve"].items()
    ]
    return pd.DataFrame(rows, columns=["run", "scheme", "seed", "step", "tokens", "length", "ppl"])


def plot_curves(cf, path: Path) -> Path:
    """ppl against training tokens per scheme, at 1x (left) and the longest length (right), mean and 95% band
    over seeds; one legend for both panels."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import ScalarFormatter

    lengths = sorted(cf["length"].unique())
    panels = [lengths[0], lengths[-1]] if len(lengths) > 1 else lengths
    schemes = sorted(cf["scheme"].unique(), key=row_key)
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4.2), squeeze=False)
    for ax, L in zip(axes[0], panels):
        sel = cf[(cf["length"] == L) & cf["ppl"].notna()]
        for scheme in schemes:
            g = sel[sel["scheme"] == scheme].groupby("tokens")["ppl"].apply(list)
            stats = [mean_ci(v) for v in g]
            st = style_for(scheme)
            ax.plot(g.index, [m for m, _ in stats], label=scheme, **{**st.kwargs(), "marker": "."})
            if any(c > 0 for _, c in stats):
                ax.fill_between(
                    g.index,
                    [m - c for m, c in stats],
                    [m + c for m, c in stats],
                    color=st.color,
                    alpha=0.15,
                    linewidth=0,
                )
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(ScalarFormatter())
        ax.yaxis.set_minor_formatter(ScalarFormatter())
        ax.set_xlabel("training tokens")
        ax.set_ylabel("ppl")
        ax.set_title(f"learning curve at length {L}")
    handles, labels = axes[0][0].get_legend_handles_labels()  # the 1x panel has every scheme
    axes[0][-1].legend(handles, labels, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return save_plot(fig, path)
