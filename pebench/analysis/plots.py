"""Analysis pictures: attention mass by distance per head, position-table spectra, logit terms by distance,
RoPE's decay bound, relative-vector norms. Each function writes one PNG atomically."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..util.style import CONTEXT_LINE, save_figure, style_for


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_attention(a: dict, path: Path) -> None:
    """One panel per layer: each head's attention mass by distance (log2 bins), dashed at 1x, solid at the
    longest defined length; the training context marked."""
    plt = _plt()
    T = a["context"]
    defined = [L for L in a["lengths"] if a["stats"].get(str(L)) is not None]
    short, long_ = a["stats"][str(min(defined))], a["stats"][str(max(defined))]
    n_layers = len(long_["bins"])
    fig, axes = plt.subplots(1, n_layers, figsize=(3.2 * n_layers, 3.0), sharey=True, squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for layer, ax in enumerate(axes[0]):
        for h, mass in enumerate(long_["bins"][layer]):
            c = colors[h % len(colors)]
            edges = np.maximum(long_["bin_edges"], 0.5)  # distance 0 drawn at 0.5 on the log axis
            ax.plot(edges, mass, color=c, label=f"head {h}")
            s_edges = np.maximum(short["bin_edges"], 0.5)
            ax.plot(s_edges, short["bins"][layer][h], color=c, linestyle="--", alpha=0.7)
        ax.axvline(T, **CONTEXT_LINE)
        ax.set_xscale("log", base=2)
        ax.set_title(f"layer {layer}")
        ax.set_xlabel("distance (log2 bin start)")
    axes[0][0].set_ylabel("attention mass")
    fig.suptitle(f"{a['label']} ({a['run']}): dashed {min(defined)} tokens, solid {max(defined)}", y=1.06)
    save_figure(fig, axes[0][-1], path)


def plot_tables(tables: dict, reference: dict, path: Path) -> None:
    """Mean power spectrum of each position table (and the sinusoidal reference), and its first components."""
    plt = _plt()
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10, 3.6))
    for run, t in {**tables, "sinusoidal table (reference)": reference}.items():
        st = style_for(t.get("label", "sinusoidal"))
        sp = t["spectrum"]
        ax.plot(
            sp["freqs"][1:],
            sp["power"][1:],
            label=run,
            color=st.color,
            linestyle=st.linestyle if run in tables else ":",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("frequency (cycles per position)")
    ax.set_ylabel("share of power (mean over dimensions)")
    ax.legend(fontsize=7, frameon=False)
    for run, t in tables.items():
        for i, curve in enumerate(t["components"]["curves"][:2]):
            ax2.plot(
                curve,
                label=f"{run} PC{i + 1} ({t['components']['explained'][i]:.0%})",
                color=style_for(t.get("label", run)).color,
                linestyle=["-", "--"][i],
            )
    ax2.set_xlabel("position")
    ax2.set_ylabel("component value")
    save_figure(fig, ax2, path)


def plot_biases(biases: dict, k: float, path: Path) -> None:
    """Each head's distance-only logit term against distance, relative to distance 0, with the -k line."""
    plt = _plt()
    fig, axes = plt.subplots(1, len(biases), figsize=(4.2 * len(biases), 3.4), squeeze=False)
    for ax, (run, b) in zip(axes[0], biases.items()):
        arr = np.asarray(b["bias"])
        d = np.arange(arr.shape[1])
        for h, row in enumerate(arr):
            ax.plot(np.maximum(d, 0.5), row - row[0], label=f"head {h}")
        ax.axhline(-k, color="grey", linestyle=":", linewidth=1)
        ax.axvline(b["context"], **CONTEXT_LINE)
        ax.set_xscale("log", base=2)
        ax.set_title(run)
        ax.set_xlabel("distance")
    axes[0][0].set_ylabel("logit term - term at distance 0")
    save_figure(fig, axes[0][-1], path)


def plot_rope_bound(curves: dict, context: int, factor: float, path: Path) -> None:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for v, c in curves.items():
        st = style_for("rope" if v == "default" else f"rope+{v}")
        ax.plot(
            np.maximum(np.arange(len(c)), 0.5),
            c,
            label=v if v != "default" else "rope (unscaled)",
            color=st.color,
            linestyle=st.linestyle,
        )
    ax.axvline(context, **CONTEXT_LINE)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("relative distance")
    ax.set_ylabel("relative upper bound")
    ax.set_title(f"RoPE long-term decay bound, scalings at factor {factor:g}")
    save_figure(fig, ax, path)


def plot_relative_norms(norms: dict, path: Path) -> None:
    plt = _plt()
    fig, axes = plt.subplots(1, len(norms), figsize=(4.2 * len(norms), 3.4), squeeze=False)
    for ax, (run, n) in zip(axes[0], norms.items()):
        for layer, (kk, vv) in enumerate(zip(n["key"], n["value"])):
            ax.plot(kk, label=f"key, layer {layer}")
            ax.plot(vv, linestyle="--", label=f"value, layer {layer}")
        ax.set_title(run)
        ax.set_xlabel("clipped distance")
    axes[0][0].set_ylabel("vector norm")
    save_figure(fig, axes[0][-1], path)
