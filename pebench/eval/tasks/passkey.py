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

from ...data.needles import EVAL, fixed_bytes, passkey_form, passkey_window, random_key, token_passkey
from ...util.errors import UsageError
from .base import HAYSTACKS, Metric, Task, check_choice, encoder, mean_interval, parse_floats, register_task, wilson

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
    reads_stream = False  # its haystack: filler, or the whole split (haystack=corpus)
    description = "passkey retrieval: 5-digit key in a haystack, teacher-forced, by length and depth"
    metrics = (
        Metric(
            "passkey_exact",
            "passkey",
            True,
            "passkey: fraction of prompts with all 5 key digits right",
            threshold=0.5,
            proportion=True,
            chance=1e-5,  # five digits among ten each (bytes); an outside tokenizer's: none record states it
        ),
        Metric(
            "passkey_digit",
            "passkey",
            True,
            "passkey: per-digit accuracy (right digit ranked first of ten; chance 0.1), pebench's byte models",
            proportion=True,
            chance=0.1,
        ),
        Metric(
            "passkey_token",
            "passkey",
            True,
            "passkey: per answer token accuracy (ranked first of the outside tokenizer's V; chance 1/V), --hf",
            proportion=True,
            chance=lambda o, V: 1.0 / V,
        ),
    )
    fields = {
        "tokens": "bytes (pebench's models: a digit a token) or the outside model's tokenizer (--hf: the pieces are "
        "tokenized on their own, and passkey_token is the accuracy per answer token among the vocabulary)",
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
        check_choice(options, "passkey", "haystack", HAYSTACKS)
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
        per = "passkey_digit" if encode is None else "passkey_token"  # two chance levels, two names
        total = score(correct)
        return {
            "status": "ok",
            "reason": None,
            "metrics": {"passkey_exact": total["exact"], per: total["digit"]},
            "intervals": {"passkey_exact": total["exact_ci"], per: total["digit_ci"]},
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

    def check_record(self, rec: dict) -> None:
        """Exact match and one per-position metric: per digit (bytes) or per answer token (an outside tokenizer)."""
        if set(rec["metrics"]) not in ({"passkey_exact", "passkey_digit"}, {"passkey_exact", "passkey_token"}):
            raise ValueError(f"passkey record metrics {sorted(rec['metrics'])} are not the task's")
        super().check_record({**rec, "metrics": {m.name: None for m in self.metrics}})

    def chances(self, options: dict, vocab: int, names=None) -> dict[str, float]:
        out = super().chances(options, vocab, names)
        if names is not None and "passkey_token" in names:
            out.pop("passkey_exact", None)  # the answer's token count varies by key: no one value
        return out

    def undefined(self, reason: str) -> dict:
        rec = super().undefined(reason)
        rec["metrics"].pop("passkey_token")  # an undefined byte-model record holds the byte metrics
        return rec


register_task(PasskeyTask())
