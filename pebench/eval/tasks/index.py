"""``index``: positions in a list (after "Lost in the Haystack"-style probes of order; arXiv 2605.07127 finds models far
worse at looking backward than forward). A list of ``items`` distinct random words ("items: dake mulo ...") sits at a
depth of filler or evaluation text; the window ends with one question and its answer:

- ``after``: "2 after mulo: sepa", the word ``k`` places after an anchor;
- ``before``: "2 before sepa: dake", the word ``k`` places before one;
- ``position``: "place of sepa: 7", a word's place in the list (from 1).

Answers are scored teacher-forced, per byte among the choices of their kind (letters for a word, digits for a place;
ties split, so a uniform model scores chance), each metric the fraction of prompts whose answer is exactly right. For
an outside model (``eval --hf``) the same prompts are in its tokens, the answer's tokens scored among its whole
vocabulary. The prompts come from the evaluation stream (seed, length, variant, depth), never training's.
"""

from __future__ import annotations

import numpy as np

from ...data.needles import EVAL
from ...data.ruler import MAX_WORD, Prompt, assemble, distinct, fill_source, fixed_bytes, random_word
from ...data.token_prompts import token_assemble
from ...util.errors import UsageError
from .base import (
    Metric,
    Task,
    answer_scores,
    check_haystack,
    check_int,
    encoder,
    parse_floats,
    prompts_of,
    register_task,
    summarize_by_depth,
)

VARIANTS = ("after", "before", "position")
LETTERS = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz", dtype=np.uint8)
DIGITS = np.frombuffer(b"0123456789", dtype=np.uint8)


def question(variant: str, k: int, anchor: str) -> str:
    return f"place of {anchor}:" if variant == "position" else f"{k} {variant} {anchor}:"


def need(items: int, k: int) -> int:
    """Bytes of a prompt that are not haystack, at the longest words and the longest question."""
    listing = "items: " + " ".join(["x" * MAX_WORD] * items) + "."
    tails = [
        question(v, k, "x" * MAX_WORD) + " " + ("x" * MAX_WORD if v != "position" else str(items)) for v in VARIANTS
    ]
    return fixed_bytes([listing], max(tails, key=len))


def index_prompt(
    rng: np.random.Generator,
    variant: str,
    length: int,
    depth: float,
    items: int,
    k: int,
    haystack=None,
    encode=None,
):
    """One prompt: the list at ``depth`` of the haystack, the question and its answer ending the window (bytes; with
    ``encode``, an outside tokenizer's text -> ids, in its tokens: the listing, the question and the answer encoded
    apart, the answer after a space as a word of running text)."""
    words = distinct(rng, random_word, items)
    lo, hi = (k, items) if variant == "before" else (0, items - k) if variant == "after" else (0, items)
    a = int(rng.integers(lo, hi))
    target = str(a + 1) if variant == "position" else words[a + k] if variant == "after" else words[a - k]
    listing = "items: " + " ".join(words) + "."
    meta = {"variant": variant, "anchor": a, "words": words}
    if encode is not None:
        tail = [(" " + question(variant, k, words[a]), False), (" " + target, True)]
        tokens, starts, answers = token_assemble(
            encode, length, [(depth, [(" " + listing, False)])], tail, rng, haystack
        )
        return Prompt(tokens, "compact", starts, answers, [target], meta=meta)
    tail = question(variant, k, words[a]) + " " + target
    tokens, starts = assemble(length, [(depth, listing)], tail, fill_source(haystack, length, rng))
    return Prompt(tokens, "compact", starts, [(length - len(target), length)], [target], meta=meta)


class IndexTask(Task):
    name = "index"
    reads_stream = False  # its haystack: filler, or the whole split (haystack=corpus)
    description = "positions in a list: the word k places after or before an anchor, and a word's place"
    metrics = tuple(
        Metric(f"index_{v}", "index", True, d, threshold=0.5, proportion=True)
        for v, d in (
            ("after", "index after: fraction of prompts whose word k places after the anchor is exact"),
            ("before", "index before: fraction of prompts whose word k places before the anchor is exact"),
            ("position", "index position: fraction of prompts whose place of a word (from 1) is exact"),
        )
    )
    fields = {
        "haystack": "filler or corpus (the text around the list)",
        "trials": "prompts per variant and depth",
        "options": "items, k",
        "cells": "per variant and depth: {variant, depth, trials, score, score_ci}",
        "tokens": "bytes, or the outside tokenizer's class (eval --hf: the prompts in its tokens)",
    }
    options = {"trials": 20, "items": 12, "k": 2, "depths": "0,0.5,1", "haystack": "filler"}
    headline = "index_after"
    any_tokenizer = True  # an outside model's prompts are its tokens (index_prompt with encode)
    order = 60

    def check(self, options, lengths, context, n_tokens, protocol):
        check_haystack(options, "index", lengths, n_tokens)
        for key in ("trials", "items", "k"):
            check_int(options, "index", key)
        if not 1 <= options["k"] < options["items"]:
            raise UsageError(
                f"index.k must be at least 1 and below index.items ({options['items']}), got {options['k']}"
            )
        parse_floats(options["depths"], "index.depths (fractions of the haystack, 0 to 1)", 0.0, 1.0)
        if short := [L for L in lengths if need(options["items"], options["k"]) > L]:
            raise UsageError(
                f"index with items={options['items']} needs windows of at least "
                f"{need(options['items'], options['k'])} tokens; got lengths {short}"
            )

    def protocol(self, options, protocol):
        return options["haystack"], {key: options[key] for key in ("trials", "items", "k")}

    def measure(self, ctx, length: int) -> dict:
        o = ctx.options
        depths = parse_floats(o["depths"], "index.depths", 0.0, 1.0)
        hay = ctx.split_tokens if o["haystack"] == "corpus" else None
        metrics, intervals, cells = {}, {}, []
        encode = encoder(ctx)  # an outside model's tokenizer: the answer's tokens among its whole vocabulary
        for vi, v in enumerate(VARIANTS):
            prompts = []
            for di, d in enumerate(depths):
                rng = np.random.default_rng([ctx.seed, EVAL, 7, length, vi, di])
                prompts += prompts_of(
                    lambda _, rng=rng, v=v, d=d: index_prompt(rng, v, length, d, o["items"], o["k"], hay, encode),
                    range(o["trials"]),
                )
            choices = None if encode is not None else DIGITS if v == "position" else LETTERS
            exact = answer_scores(ctx, prompts, choices)[0]  # one answer a prompt
            metrics[f"index_{v}"], intervals[f"index_{v}"], by_depth = summarize_by_depth(
                exact, True, v, depths, o["trials"]
            )
            cells += by_depth
        return {
            "status": "ok",
            "reason": None,
            "metrics": metrics,
            "intervals": intervals,
            "details": {
                "haystack": o["haystack"],
                "tokens": "bytes" if encode is None else type(ctx.tokenizer).__name__,
                "trials": o["trials"],
                "options": {"items": o["items"], "k": o["k"]},
                "cells": cells,
            },
        }


register_task(IndexTask())
