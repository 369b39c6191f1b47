"""``common``: RULER's common-words task in its smallest form (Hsieh et al. 2024; aggregation, as Oolong asks it).
Three words are marked ("@WORD") at random depths of filler or evaluation text, one of them more often than the
others; the window ends with "most marked: @WORD" and the true word is ranked, by its log-likelihood in the slot,
against the other two (ties split; chance 1/3). Two difficulty tiers from the same draws: ``common_t1`` the common
word marked 4 times and the others once each, ``common_t2`` the others 3 times each (the same words and the common
word's marks at the same depths), so a model must count, not just notice a repeated word. A harder tier that scores
higher is a defect of the generator (``details.tier_order``). Bytes for pebench's models; an outside model's tokens
with ``eval --hf`` (the words drawn to take as many tokens as each other, so one slot holds any of them).
"""

from __future__ import annotations

import numpy as np

from ...data.needles import EVAL
from ...data.ruler import MAX_WORD, Prompt, distinct, fixed_bytes, random_word
from ...data.token_prompts import lay_out
from .base import DigitTiers, encoder, mean_interval, prompts_of, ranking_scores, register_task, tier_order

MARK, ASK = "@{word}", "most marked:"
COMMON, RARE = 4, (1, 3)  # the common word's marks; each other word's, by tier


def need(tier: int) -> int:
    """Bytes of a tier's prompt that are not haystack, at the longest words."""
    return fixed_bytes([MARK.format(word="x" * MAX_WORD)] * (COMMON + 2 * RARE[tier - 1]), ASK + " @" + "x" * MAX_WORD)


def draw(seed: int, length: int, i: int, encode=None) -> dict:
    """The i-th draw of a length: three words (the first the common one; of one width in bytes, or with ``encode``
    in tokens), the
    depths of every mark tier 2 places (tier 1 keeps the first of each other word's), a seed for the haystack."""
    rng = np.random.default_rng([seed, EVAL, 14, length, i])
    first = random_word(rng)  # the others as long: in bytes or in tokens, one slot holds any of the three
    width = len(first) if encode is None else len(encode(" @" + first))
    ok = (lambda w: len(w) == width) if encode is None else (lambda w: len(encode(" @" + w)) == width)
    words = [first] + distinct(rng, random_word, 2, [first], ok)
    return {"words": words, "depths": rng.random(COMMON + 2 * RARE[1]), "seed": int(rng.integers(2**31))}


def prompt(length: int, tier: int, d: dict, haystack=None, encode=None) -> Prompt:
    words, rare, dep = d["words"], RARE[tier - 1], d["depths"]
    texts = [(float(dep[j]), MARK.format(word=words[0])) for j in range(COMMON)]
    texts += [
        (float(dep[COMMON + k * RARE[1] + j]), MARK.format(word=w))
        for k, w in enumerate(words[1:])
        for j in range(rare)
    ]
    rng = np.random.default_rng(d["seed"])
    tokens, starts, answers = lay_out(length, texts, ASK, "@" + words[0], rng, haystack, encode, whole=True)
    meta = (
        {"tier": tier}
        if encode is None
        else {"tier": tier, "slot": {"@" + w: encode(" @" + w).tolist() for w in words}}
    )
    return Prompt(tokens, "compact", starts, answers, ["@" + words[0]], ["@" + w for w in words[1:]], meta)


class CommonTask(DigitTiers):
    name = "common"
    description = "aggregation: which of three marked words is marked most, far apart (tier 1) or close (tier 2)"
    metrics = DigitTiers.tier_metrics(
        "common", ("4 marks against 1 each", "4 marks against 3 each"), "credit of the most marked word ranked first", 3
    )
    fields = DigitTiers.tier_fields
    headline = "common_t1"
    summary = ("common_t1", "common_t2")
    order = 68
    prompt, need = staticmethod(prompt), staticmethod(need)

    def measure(self, ctx, length: int) -> dict:
        """As the digit tiers measure, the answer ranked against the other words instead of scored digit by digit."""
        o = ctx.options
        hay = ctx.split_tokens if o["haystack"] == "corpus" else None
        encode = encoder(ctx)
        draws = [draw(ctx.seed, length, i, encode) for i in range(o["trials"])]
        metrics, intervals = {}, {}
        for tier in (1, 2):
            prompts = prompts_of(lambda d, tier=tier: prompt(length, tier, d, hay, encode), draws)
            m, lo, hi = mean_interval([s[0] for s in ranking_scores(ctx, prompts)])
            metrics[f"common_t{tier}"], intervals[f"common_t{tier}"] = m, [lo, hi]
        details = {"haystack": o["haystack"], "trials": o["trials"]}
        details["tier_order"] = tier_order(metrics["common_t1"], metrics["common_t2"])
        details["tokens"] = "bytes" if encode is None else type(ctx.tokenizer).__name__
        return {"status": "ok", "reason": None, "metrics": metrics, "intervals": intervals, "details": details}


register_task(CommonTask())
