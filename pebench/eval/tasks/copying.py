"""``copy``: in-context copying at a distance. A random string (default 24 bytes of letters and digits) is written
twice over evaluation text in a window of L tokens, the second copy ending the window and starting exactly d
tokens after the first (so every byte of it has its source d tokens back). Scored teacher-forced on the second copy
after its first 2 bytes (the model cannot know which string begins before then): per-byte accuracy (argmax over
all 256 bytes; chance about 1/62) and loss. Distances: powers of two from 16 (at least the string length) up to
the farthest that fits, L - k - 2.
"""

from __future__ import annotations

import math

import numpy as np

from ...data.needles import EVAL, copy_window, random_string
from ...util.errors import UsageError
from .base import Metric, Task, encoder, mean_interval, register_task

SKIP = 2  # bytes of the second copy not scored


def distances(length: int, k: int) -> list[int]:
    """The distance grid inside a window of ``length``: 16, 32, ... (each >= k) and the farthest, length - k - 2."""
    top = length - k - 2
    ds, d = [], 16
    while d < top:
        if d >= k:
            ds.append(d)
        d *= 2
    return ds + [top] if top >= k else ds


def prompts(stream: np.ndarray, length: int, distance: int, k: int, trials: int, seed: int, encode=None):
    """``trials`` windows of evaluation text with the copies at ``distance``; text offsets and strings from the
    evaluation stream seeded by (seed, length, distance). ``encode`` (an outside tokenizer, text -> ids): the string
    is tokenized and cut to at most k tokens, the second copy still ending the window."""
    rng = np.random.default_rng([seed, EVAL, 1, length, distance])
    out = []
    for _ in range(trials):
        start = int(rng.integers(0, len(stream) - length + 1))
        s = random_string(rng, k)
        if encode is not None:
            s = encode(bytes(s).decode("ascii"))[:k]
        first = length - len(s) - distance
        out.append(copy_window(np.asarray(stream[start : start + length]), s, first, distance))
    return out


def copy_range(cells: list[dict], threshold: float = 0.5) -> int:
    """The longest distance whose accuracy is at least ``threshold`` (0 if none)."""
    return max([c["distance"] for c in cells if c["accuracy"] >= threshold], default=0)


class CopyTask(Task):
    name = "copy"
    description = "in-context copying: a random string repeated d tokens later, accuracy on the second copy"
    metrics = (
        Metric(
            "copy_acc",
            "copy",
            True,
            "copy: per-byte accuracy on the second copy, mean over the distances",
            threshold=0.5,
            proportion=True,
            chance=lambda o, V: 1.0 / V,
        ),
        Metric("copy_range", "copy", True, "copy: longest distance with accuracy >= 0.5 (0: none)", 0),
        Metric(
            "copy_loss", "copy", False, "copy: mean loss on the second copy (nats)", 3, chance=lambda o, V: math.log(V)
        ),
    )
    fields = {
        "tokens": "bytes (pebench's models) or the outside model's tokenizer (--hf: the string is tokenized, cut to "
        "at most k tokens, and its tokens are what is copied and scored)",
        "string_length": "bytes of the random string (k)",
        "trials": "windows per distance",
        "cells": "per distance: {distance, trials, accuracy, accuracy_ci, loss}",
    }
    options = {"trials": 20, "string_length": 24}
    headline = "copy_acc"
    order = 20
    any_tokenizer = True

    def check(self, options, lengths, context, n_tokens, protocol):
        k = options["string_length"]
        if not isinstance(k, int) or k < SKIP + 1:
            raise UsageError(f"copy.string_length must be an integer >= {SKIP + 1}, got {k!r}")
        if not isinstance(options["trials"], int) or options["trials"] < 1:
            raise UsageError(f"copy.trials must be an integer >= 1, got {options['trials']!r}")
        short = [L for L in lengths if not distances(L, k)]
        if short:
            raise UsageError(f"copy with {k}-byte strings needs lengths of at least {2 * k + 2}; got {short}")

    def protocol(self, options, protocol):
        return "text", {"trials": options["trials"], "string_length": options["string_length"]}

    def measure(self, ctx, length: int) -> dict:
        from ..scoring import score_positions, score_spans

        k, t = ctx.options["string_length"], ctx.options["trials"]
        if len(ctx.stream) < length:
            return self.undefined(f"the evaluation stream ({len(ctx.stream)} tokens) is shorter than {length}")
        ds = distances(length, k)
        encode = encoder(ctx)
        windows = [w for d in ds for w in prompts(ctx.stream, length, d, k, t, ctx.seed, encode)]
        if encode is None:
            correct, loss = score_spans(ctx, np.stack([w.tokens for w in windows]), length - k + SKIP, length)
        else:  # each string's own token count; the same skip of its first tokens
            correct, logprob = score_positions(
                ctx,
                np.stack([w.tokens for w in windows]),
                [np.arange(length - len(w.string) + min(SKIP, len(w.string) - 1), length) for w in windows],
            )
            loss = [-lp for lp in logprob]
        per = [float(np.mean(c)) for c in correct]
        cells = []
        for i, d in enumerate(ds):
            m, lo, hi = mean_interval(per[i * t : (i + 1) * t])
            cells.append(
                {
                    "distance": d,
                    "trials": t,
                    "accuracy": m,
                    "accuracy_ci": [lo, hi],
                    "loss": float(np.mean(np.concatenate(list(loss[i * t : (i + 1) * t])))),
                }
            )
        acc, lo, hi = mean_interval(per)
        return {
            "status": "ok",
            "reason": None,
            "metrics": {
                "copy_acc": acc,
                "copy_range": copy_range(cells),
                "copy_loss": float(np.mean(np.concatenate(list(loss)))),
            },
            "intervals": {"copy_acc": [lo, hi]},
            "details": {
                "tokens": "bytes" if encode is None else type(ctx.tokenizer).__name__,
                "string_length": k,
                "trials": t,
                "cells": cells,
            },
        }

    def outputs(self, df, root, suffix: str = "") -> list:
        """copy_by_distance.md: accuracy by distance (columns) for each row label and length."""
        from ...util.fsutil import atomic_write_text

        sel = df[(df["task"] == "copy") & (df["status"] == "ok")]
        if sel.empty:
            return []
        acc: dict = {}
        for lab, L, det in zip(sel["label"], sel["length"], sel["details"]):
            for c in det["cells"]:
                acc.setdefault((lab, int(L)), {}).setdefault(c["distance"], []).append(c["accuracy"])
        ds = sorted({d for v in acc.values() for d in v})
        lines = [
            "Copy accuracy by distance (per-byte, mean over seeds); rows: label at window length.",
            "",
            "| label | length | " + " | ".join(str(d) for d in ds) + " | copy range |",
            "|---|---|" + "---|" * (len(ds) + 1),
        ]
        for (lab, L), by in sorted(acc.items()):
            means = {d: sum(v) / len(v) for d, v in by.items()}
            rng = max([d for d, m in means.items() if m >= 0.5], default=0)
            lines.append(
                f"| {lab} | {L} | " + " | ".join(f"{means[d]:.2f}" if d in means else "" for d in ds) + f" | {rng} |"
            )
        path = root / f"copy_by_distance{suffix}.md"
        atomic_write_text(path, "\n".join(lines) + "\n")
        return [path]


register_task(CopyTask())
