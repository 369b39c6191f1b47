"""``niah``: RULER's needle-in-a-haystack variants (Hsieh et al. 2024) on byte windows, or for an outside model
(``eval --hf``) the same prompts in its own tokens.

Needles "One of the special magic numbers for {key} is: {value}." (compact form "{key}: {value}.") with short random
words as keys and 5-7 digit values, over the filler or evaluation text, then RULER's question and answer prefix and
the answer. Variants (one record holds them all, a metric each):
- ``single``: one needle, asked; ``multikey``: ``keys`` needles, one asked (the rest are distractors);
- ``multiquery``: ``keys`` needles, ``queries`` of them asked, each value scored;
- ``multivalue``: one key with ``values`` needles; each true value is ranked by log-likelihood in the answer slot
  against ``distractors`` random values of as many digits (order-free recall; chance 1/(1 + distractors)).
Teacher-forced values are scored per digit among the ten digits (ties split, so chance is exactly 10^-digits for a
value); in an outside model's tokens, per token among its whole vocabulary (exact match of every token). The asked
needle (multivalue: the first value; multiquery: the first asked key) sits at each depth, the others at random
depths. Prompts from the evaluation stream (seed, length, variant, depth), never training's.
"""

from __future__ import annotations

import numpy as np

from ...data.needles import EVAL
from ...data.ruler import NIAH_VARIANTS, niah_form, niah_need, niah_prompt
from ...util.errors import UsageError
from ...util.parsing import parse_list
from .base import (
    Metric,
    Task,
    answer_scores,
    check_choice,
    check_haystack,
    check_int,
    encoder,
    parse_floats,
    prompts_of,
    ranking_scores,
    register_task,
    summarize_by_depth,
)

DIGITS = np.frombuffer(b"0123456789", dtype=np.uint8)
FORMS = ("auto", "standard", "compact")


def variants(options: dict) -> list[str]:
    out = parse_list(options["variants"], "niah.variants")
    bad = [v for v in out if v not in NIAH_VARIANTS]
    if bad or not out:
        raise UsageError(f"niah.variants: {', '.join(bad) or 'none given'}; variants are {', '.join(NIAH_VARIANTS)}")
    return out


def cell_prompts(
    variant: str, length: int, depth_index: int, depth: float, o: dict, seed: int, haystack=None, encode=None
):
    """The prompts of one cell, from the evaluation stream (seed, length, variant, depth): bytes, or with ``encode``
    (an outside tokenizer) the same content in its tokens."""
    rng = np.random.default_rng([seed, EVAL, 3, length, NIAH_VARIANTS.index(variant), depth_index])
    args = (variant, length, depth, o["form"], o["keys"], o["values"], o["queries"], o["distractors"], haystack)
    return prompts_of(lambda _: niah_prompt(rng, *args, encode=encode), range(o["trials"]))


class NiahTask(Task):
    name = "niah"
    reads_stream = False  # its haystack: filler, or the whole split (haystack=corpus)
    description = "RULER needle in a haystack: single, multikey, multivalue, multiquery; by length and depth"
    metrics = tuple(
        Metric(
            f"niah_{v}",
            "niah",
            True,
            d,
            threshold=0.5,
            proportion=True,  # values of 5-7 digits: exact match has no one chance level (10^-5 at most)
            chance=(lambda o, V: 1.0 / (1 + o["distractors"])) if v == "multivalue" else None,
        )
        for v, d in (
            ("single", "niah single: fraction of prompts whose value is exact (chance 10^-digits)"),
            ("multikey", "niah multikey: exact value of the asked key among `keys` needles (chance 10^-digits)"),
            (
                "multivalue",
                "niah multivalue: recall of the key's values, each ranked against `distractors` random "
                "values (chance 1/(1 + distractors))",
            ),
            ("multiquery", "niah multiquery: fraction of the asked keys' values that are exact (chance 10^-digits)"),
        )
    )
    fields = {
        "form": "prompt form: standard (RULER's sentences) or compact (the same content in a few bytes)",
        "haystack": "filler (a sentence repeated) or corpus (evaluation-split text)",
        "trials": "prompts per variant and depth",
        "options": "keys, values, queries, distractors",
        "cells": "per variant and depth: {variant, depth, trials, score, score_ci}",
        "tokens": "bytes, or the outside tokenizer's class (eval --hf: the prompts in its tokens)",
    }
    options = {
        "variants": ",".join(NIAH_VARIANTS),
        "trials": 20,
        "depths": "0,0.5,1",
        "haystack": "filler",
        "form": "auto",
        "keys": 4,
        "values": 4,
        "queries": 2,
        "distractors": 3,
    }
    headline = "niah_single"
    any_tokenizer = True  # an outside model's prompts are its tokens (data.ruler.niah_prompt with encode)
    summary = tuple(f"niah_{v}" for v in NIAH_VARIANTS)
    order = 30

    def check(self, options, lengths, context, n_tokens, protocol):
        check_haystack(options, "niah", lengths, n_tokens)
        check_choice(options, "niah", "form", FORMS)
        for k in ("trials", "keys", "values", "queries", "distractors"):
            check_int(options, "niah", k)
        if options["queries"] > options["keys"]:
            raise UsageError(
                f"niah.queries ({options['queries']}) must be at most niah.keys ({options['keys']}): "
                "only needles present can be asked"
            )
        parse_floats(options["depths"], "niah.depths (fractions of the haystack, 0 to 1)", 0.0, 1.0)
        o = options
        for v in variants(options):
            short = [L for L in lengths if niah_form(v, o["form"], L, o["keys"], o["values"], o["queries"]) is None]
            if short:
                need = niah_need(
                    v, "compact" if o["form"] == "auto" else o["form"], o["keys"], o["values"], o["queries"]
                )
                raise UsageError(
                    f"niah {v} with keys={o['keys']}, values={o['values']}, queries={o['queries']} "
                    f"needs windows of at least {need} tokens; got lengths {short}"
                )

    def protocol(self, options, protocol):
        return f"{options['haystack']}-{options['form']}", {
            k: options[k] for k in ("trials", "keys", "values", "queries", "distractors")
        }

    def measure(self, ctx, length: int) -> dict:
        o = ctx.options
        depths = parse_floats(o["depths"], "niah.depths", 0.0, 1.0)
        hay = ctx.split_tokens if o["haystack"] == "corpus" else None
        encode = encoder(ctx)  # an outside model's tokenizer: the values' tokens among its whole vocabulary
        metrics = {m.name: None for m in self.metrics}
        intervals, cells, forms = {}, [], set()
        for v in variants(o):
            prompts = [p for i, d in enumerate(depths) for p in cell_prompts(v, length, i, d, o, ctx.seed, hay, encode)]
            forms |= {p.form for p in prompts}
            if v == "multivalue":
                scores = ranking_scores(ctx, prompts)
            else:
                scores = answer_scores(ctx, prompts, DIGITS if encode is None else None)[0]
            one = v in ("single", "multikey")
            metrics[f"niah_{v}"], intervals[f"niah_{v}"], by_depth = summarize_by_depth(
                scores, one, v, depths, o["trials"]
            )
            cells += by_depth
        return {
            "status": "ok",
            "reason": None,
            "metrics": metrics,
            "intervals": intervals,
            "details": {
                "form": "/".join(sorted(forms)),
                "tokens": "bytes" if encode is None else type(ctx.tokenizer).__name__,
                "haystack": o["haystack"],
                "trials": o["trials"],
                "options": {k: o[k] for k in ("keys", "values", "queries", "distractors")},
                "cells": cells,
            },
        }


register_task(NiahTask())
