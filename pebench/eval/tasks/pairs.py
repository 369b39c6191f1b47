"""``pairs``: minimal pairs (NoCha, Karpinska et al. 2024, arXiv 2406.16264) under teacher forcing, on the passkey.
A short passkey prompt (the needle "The pass key is V." at a depth of filler or evaluation text, then "What is the
pass key? It is" and the answer slot): the true key V is ranked, by its log-likelihood in the slot, against two
minimal variants of it, V with one digit changed at two different places. Credit 1 when V is above both (ties
split), so chance is 1/3, and a format or position bias that favours any 5-digit number cancels. Two difficulty
tiers from the same draws (keys, variants, depths): ``pairs_t1`` the needle alone, ``pairs_t2`` the two variants also
stand in the context as decoys with other names ("The door code is V1."), so a model that copies a nearby number is
at chance and one that binds the key to its name is not. A harder tier that scores higher is a defect of the
generator: ``details.tier_order`` says whether the scores fall (``falls``) or not (``defect``). Tier 2 fits a tiny
model's 128-token context. Bytes for pebench's models; an outside model's tokens with ``eval --hf`` (the variants
drawn until they take as many tokens as the key, so one slot holds any of them).
"""

from __future__ import annotations

import numpy as np

from ...data.needles import EVAL, KEY_DIGITS, random_key
from ...data.ruler import Prompt, assemble, fill_source, fixed_bytes
from ...data.token_prompts import token_assemble
from ...util.errors import UsageError
from .base import (
    DigitTiers,
    Metric,
    Task,
    check_haystack,
    check_int,
    encoder,
    parse_floats,
    prompts_of,
    ranking_scores,
    register_task,
    summarize_by_depth,
    tier_details,
)

NEEDLE, QUESTION = "The pass key is {key}.", "What is the pass key? It is"  # short: tier 2 fits 128 bytes
DECOYS = ("The door code is {key}.", "The lock code is {key}.")
TIERS = (1, 2)


def variants(rng: np.random.Generator, key: str, encode=None) -> list[str]:
    """Two minimal variants of ``key``: one digit changed (to another digit) at each of two different places;
    with ``encode``, drawn until each takes as many tokens as the key."""
    width = None if encode is None else len(encode(" " + key))
    for _ in range(64):
        places = rng.choice(len(key), size=2, replace=False)
        out = []
        for p in places:
            digit = str((int(key[p]) + int(rng.integers(1, 10))) % 10)
            out.append(key[:p] + digit + key[p + 1 :])
        if width is None or all(len(encode(" " + v)) == width for v in out):
            return out
    raise ValueError("pairs: this tokenizer gave the key's variants other token counts in 64 draws")


def need(tier: int) -> int:
    """Bytes of a tier's prompt that are not haystack."""
    inserts = [NEEDLE.format(key="0" * KEY_DIGITS)] + [d.format(key="0" * KEY_DIGITS) for d in DECOYS[: 2 * (tier - 1)]]
    return fixed_bytes(inserts, QUESTION + " " + "0" * KEY_DIGITS)


def prompt(length: int, tier: int, depth: float, draw: dict, haystack=None, encode=None) -> Prompt:
    """One prompt of a draw (its key, variants, decoy depths and haystack start) at ``tier``."""
    key, wrong, rng = draw["key"], draw["variants"], np.random.default_rng(draw["seed"])
    texts = [(depth, NEEDLE.format(key=key))]
    if tier == 2:
        texts += [(float(d), t.format(key=w)) for d, t, w in zip(draw["decoy_depths"], DECOYS, wrong)]
    if encode is None:
        tokens, starts = assemble(length, texts, QUESTION + " " + key, fill_source(haystack, length, rng))
        answers = [(length - KEY_DIGITS, length)]
        meta = {}
    else:
        tail = [(" " + QUESTION, False), (" " + key, True)]
        ins = [(d, [(" " + t, False)]) for d, t in texts]
        tokens, starts, answers = token_assemble(encode, length, ins, tail, rng, haystack, whole=True)
        meta = {"slot": {x: encode(" " + x).tolist() for x in [key, *wrong]}}
    return Prompt(tokens, "compact", starts, answers, [key], list(wrong), {"tier": tier, **meta})


class PairsTask(Task):
    name = "pairs"
    reads_stream = False  # its haystack: filler, or the whole split (haystack=corpus)
    description = "minimal pairs: the passkey ranked against two one-digit variants, alone and with them as decoys"
    metrics = tuple(
        Metric(
            f"pairs_t{t}",
            "pairs",
            True,
            f"pairs tier {t}: credit of the true passkey ranked above both one-digit variants ({what}; chance 1/3)",
            threshold=0.5,
            proportion=True,
            chance=1.0 / 3.0,
        )
        for t, what in ((1, "the needle alone"), (2, "the variants also in the context as decoys"))
    )
    fields = {
        **DigitTiers.tier_fields,
        "trials": "prompts per tier and depth (the same draws in both tiers)",
        "cells": "per tier and depth: {variant, depth, trials, score, score_ci}",
    }
    options = {"trials": 20, "depths": "0,0.5,1", "haystack": "filler"}
    headline = "pairs_t1"
    any_tokenizer = True
    summary = ("pairs_t1", "pairs_t2")
    order = 65

    def check(self, options, lengths, context, n_tokens, protocol):
        check_haystack(options, "pairs", lengths, n_tokens)
        check_int(options, "pairs", "trials")
        parse_floats(options["depths"], "pairs.depths (fractions of the haystack, 0 to 1)", 0.0, 1.0)
        if short := [L for L in lengths if need(2) >= L]:
            raise UsageError(f"pairs needs windows of more than {need(2)} tokens (its tier 2); got lengths {short}")

    def protocol(self, options, protocol):
        return options["haystack"], {"trials": options["trials"]}

    def measure(self, ctx, length: int) -> dict:
        o = ctx.options
        depths = parse_floats(o["depths"], "pairs.depths", 0.0, 1.0)
        hay = ctx.split_tokens if o["haystack"] == "corpus" else None
        encode = encoder(ctx)
        draws = [self.draw(ctx.seed, length, i, encode) for i in range(len(depths) * o["trials"])]
        metrics, intervals, cells, credit = {}, {}, [], {}
        for tier in TIERS:
            prompts = prompts_of(
                lambda i, tier=tier: prompt(length, tier, depths[i // o["trials"]], draws[i], hay, encode),
                range(len(draws)),
            )
            name = f"pairs_t{tier}"
            scores = ranking_scores(ctx, prompts)
            credit[tier] = [s[0] for s in scores]
            metrics[name], intervals[name], by_depth = summarize_by_depth(scores, True, f"t{tier}", depths, o["trials"])
            cells += by_depth
        return {
            "status": "ok",
            "reason": None,
            "metrics": metrics,
            "intervals": intervals,
            "details": {
                "haystack": o["haystack"],
                "trials": o["trials"],
                "cells": cells,
                **tier_details(credit[1], credit[2]),
                "tokens": "bytes" if encode is None else type(ctx.tokenizer).__name__,
            },
        }

    @staticmethod
    def draw(seed: int, length: int, i: int, encode=None) -> dict:
        """The i-th draw of a length: its key, the key's two variants, the decoys' depths, a seed for the haystack."""
        rng = np.random.default_rng([seed, EVAL, 11, length, i])
        key = random_key(rng)
        wrong = variants(rng, key, encode)
        return {"key": key, "variants": wrong, "decoy_depths": rng.random(2), "seed": int(rng.integers(2**31))}


register_task(PairsTask())
