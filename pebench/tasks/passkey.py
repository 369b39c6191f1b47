"""``passkey``: the passkey retrieval test (Mohtashami & Jaggi 2023, as used by Position Interpolation and YaRN).

Each window is exactly L tokens: [task sentence] haystack with the needle "The pass key is NNNNN. Remember it.
NNNNN is the pass key." at a depth, then "What is the pass key? The pass key is NNNNN". The five key digits are
scored teacher-forced: per digit, whether the model ranks the right digit first among the ten (ties split, so
chance is exactly 10%), and exact match of all five. Where the standard template leaves less than half the window
to the haystack (the task sentence alone is ~150 bytes), the compact form (needle and question only) is used; the
record says which.
Keys come from the evaluation stream (seed, length, depth, trial), never from training's.
"""

from __future__ import annotations

import numpy as np

from ..data.needles import EVAL, fixed_bytes, passkey_form, passkey_window, random_key, token_passkey
from ..errors import UsageError
from .base import Metric, Task, encoder, mean_interval, parse_floats, register_task, wilson

HAYSTACKS = ("filler", "corpus")
DIGITS = np.frombuffer(b"0123456789", dtype=np.uint8)


def prompts(length: int, depth_index: int, depth: float, trials: int, seed: int, haystack=None, encode=None):
    """The ``trials`` windows of one (length, depth) cell; keys and haystack offsets from the evaluation stream
    seeded by (seed, length, depth index). ``haystack``: None for the filler, else a token array to cut from;
    ``encode``: an outside tokenizer (text -> ids; data.needles.token_passkey), None for bytes."""
    rng = np.random.default_rng([seed, EVAL, length, depth_index])
    room = length if encode is not None else length - fixed_bytes(passkey_form(length))
    out = []
    for _ in range(trials):
        key = random_key(rng)
        hay = None
        if haystack is not None:
            start = int(rng.integers(0, len(haystack) - room + 1))
            hay = np.asarray(haystack[start : start + room])
        out.append(
            passkey_window(length, depth, key, hay)
            if encode is None
            else token_passkey(encode, length, depth, key, hay)
        )
    return out


def score(correct: np.ndarray) -> dict:
    """Per-digit accuracy and exact match (with Wilson intervals) of per-prompt arrays of per-digit (or per answer
    token) credits (1 right, 0 wrong, 1/k tied with k - 1 others at the top; a key's exact credit is the product)."""
    n = len(correct)
    exact = float(sum(np.prod(c) for c in correct))
    digit, lo, hi = mean_interval([float(np.mean(c)) for c in correct])  # digits of one key are not independent
    return {"exact": exact / n, "exact_ci": list(wilson(exact, n)), "digit": digit, "digit_ci": [lo, hi], "trials": n}


class PasskeyTask(Task):
    name = "passkey"
    description = "passkey retrieval: 5-digit key in a haystack, teacher-forced, by length and depth"
    metrics = (
        Metric(
            "passkey_exact",
            "passkey",
            True,
            "passkey: fraction of prompts with all 5 key digits right",
            threshold=0.5,
            proportion=True,
        ),
        Metric(
            "passkey_digit",
            "passkey",
            True,
            "passkey: per-digit accuracy (right digit ranked first of ten; chance 0.1)",
            proportion=True,
        ),
    )
    fields = {
        "tokens": "bytes (pebench's models: a digit a token) or the outside model's tokenizer (--hf: the pieces are "
        "tokenized on their own, and passkey_digit is the accuracy per answer token)",
        "form": "passkey template: standard (task sentence, filler, needle, question) or compact (no task sentence)",
        "haystack": "filler (the standard sentence repeated) or corpus (evaluation-split text)",
        "trials": "prompts per depth",
        "cells": "per depth: {depth, trials, exact, exact_ci, digit, digit_ci}",
    }
    options = {"trials": 20, "depths": "0,0.25,0.5,0.75,1", "haystack": "filler"}
    headline = "passkey_exact"
    order = 10
    any_tokenizer = True

    def check(self, options, lengths, context, n_tokens, protocol):
        if options["haystack"] not in HAYSTACKS:
            raise UsageError(f"passkey.haystack must be one of {', '.join(HAYSTACKS)}, got {options['haystack']!r}")
        if not isinstance(options["trials"], int) or options["trials"] < 1:
            raise UsageError(f"passkey.trials must be an integer >= 1, got {options['trials']!r}")
        parse_floats(options["depths"], "passkey.depths", 0.0, 1.0)
        short = [L for L in lengths if passkey_form(L) is None]
        if short:
            raise UsageError(f"passkey needs lengths of at least {fixed_bytes('compact') + 1} tokens; got {short}")

    def protocol(self, options, protocol):
        return options["haystack"], {"trials": options["trials"]}

    def measure(self, ctx, length: int) -> dict:
        from ..scoring import score_positions

        depths = parse_floats(ctx.options["depths"], "passkey.depths", 0.0, 1.0)
        hay = ctx.split_tokens if ctx.options["haystack"] == "corpus" else None
        t, encode = ctx.options["trials"], encoder(ctx)
        windows = [w for i, d in enumerate(depths) for w in prompts(length, i, d, t, ctx.seed, hay, encode)]
        # the key's digits among the ten for bytes; an outside tokenizer's answer tokens among its whole vocabulary
        correct, _ = score_positions(
            ctx,
            np.stack([w.tokens for w in windows]),
            [np.arange(length - w.answer, length) for w in windows],
            DIGITS if encode is None else None,
        )
        cells = [{"depth": d, **score(correct[i * t : (i + 1) * t])} for i, d in enumerate(depths)]
        total = score(correct)
        return {
            "status": "ok",
            "reason": None,
            "metrics": {"passkey_exact": total["exact"], "passkey_digit": total["digit"]},
            "intervals": {"passkey_exact": total["exact_ci"], "passkey_digit": total["digit_ci"]},
            "details": {
                "tokens": "bytes" if ctx.tokenizer is None else type(ctx.tokenizer).__name__,
                "form": windows[0].form,
                "haystack": ctx.options["haystack"],
                "trials": t,
                "cells": [
                    {k: c[k] for k in ("depth", "trials", "exact", "exact_ci", "digit", "digit_ci")} for c in cells
                ],
            },
        }

    def outputs(self, df, root, suffix: str = "") -> list:
        """A heatmap per row label: exact match by depth (rows) and length (columns), the needle-in-a-haystack
        picture; seeds pooled (counts summed)."""
        return heatmaps(df, root, suffix)


def heatmaps(df, root, suffix: str = "") -> list:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..fsutil import save_png

    sel = df[(df["task"] == "passkey") & (df["status"] == "ok")]
    paths = []
    for (label, prot), g in sel.groupby(["label", "protocol"]):
        hits: dict = {}
        for L, det in zip(g["length"], g["details"]):
            for c in det["cells"]:
                h = hits.setdefault((c["depth"], int(L)), [0.0, 0])
                h[0] += c["exact"] * c["trials"]
                h[1] += c["trials"]
        depths = sorted({d for d, _ in hits})
        lengths = sorted({L for _, L in hits})
        grid = np.full((len(depths), len(lengths)), np.nan)
        for (d, L), (k, n) in hits.items():
            grid[depths.index(d), lengths.index(L)] = k / n
        fig, ax = plt.subplots(figsize=(1.1 * len(lengths) + 2.2, 0.55 * len(depths) + 1.6))
        im = ax.imshow(grid, vmin=0, vmax=1, cmap="RdYlGn", aspect="auto")
        for i in range(len(depths)):
            for j in range(len(lengths)):
                if not np.isnan(grid[i, j]):
                    ax.text(j, i, f"{grid[i, j]:.2f}", ha="center", va="center", fontsize=7)
        ax.set_xticks(range(len(lengths)), [str(L) for L in lengths])
        ax.set_yticks(range(len(depths)), [f"{d:.0%}" for d in depths])
        ax.set_xlabel("length (tokens)")
        ax.set_ylabel("needle depth")
        ax.set_title(f"passkey exact match: {label} ({prot})", fontsize=9)
        fig.colorbar(im, ax=ax, fraction=0.05)
        name = f"passkey_{label}_{prot}{suffix}".replace(" ", "_").replace("+", "-")
        paths.append(save_png(fig, root / f"heatmap_{name}.png"))
    return paths


register_task(PasskeyTask())
