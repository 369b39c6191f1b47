"""``count``: aggregation over the whole context (Oolong's counts, Bertsch et al. 2025, arXiv 2511.02817; RULER's
word-frequency tasks in their simplest form). Short marks "mark: WORD." stand at random depths of filler or
evaluation text, the asked word ``n`` times (``n`` uniform in 1..9); the window ends with "How many times is WORD
marked? WORD is marked N times" and the digit N is scored, teacher-forced, among the ten digits (ties split; chance
1/10). Two difficulty tiers from the same draws (word, count, depths): ``count_t1`` only the asked word is marked,
``count_t2`` two other words are marked as often in between, so locating the marks is no longer enough and each must
be told apart. A harder tier that scores higher is a defect of the generator (``details.tier_order``). Bytes for
pebench's models; an outside model's tokens with ``eval --hf`` (the digit's tokens among its whole vocabulary).
"""

from __future__ import annotations

import numpy as np

from ...data.needles import EVAL
from ...data.ruler import MAX_WORD, Prompt, distinct, fixed_bytes, random_word
from ...data.token_prompts import lay_out
from .base import DigitTiers, register_task

MARK = "@{word}"  # compact, so that every count fits a tiny model's 128-token context
ASK = "count of @{word}:"
MAX_COUNT, OTHERS = 5, 1


def need(tier: int) -> int:
    """Bytes of a tier's longest prompt that are not haystack (words at their longest, every count at its most)."""
    marks = MAX_COUNT * (1 + OTHERS * (tier - 1))
    return fixed_bytes([MARK.format(word="x" * MAX_WORD)] * marks, ASK.format(word="x" * MAX_WORD) + " 9")


def draw(seed: int, length: int, i: int) -> dict:
    """The i-th draw of a length: the asked word, the others, the counts (each other word's as the asked one's, so
    frequency tells nothing), every mark's depth, and a seed for the haystack."""
    rng = np.random.default_rng([seed, EVAL, 12, length, i])
    words = distinct(rng, random_word, 1 + OTHERS)
    n = int(rng.integers(1, MAX_COUNT + 1))
    return {"words": words, "n": n, "depths": rng.random((1 + OTHERS) * n), "seed": int(rng.integers(2**31))}


def prompt(length: int, tier: int, d: dict, haystack=None, encode=None) -> Prompt:
    """One prompt of a draw at ``tier``: the asked word's marks (tier 2: the others' too), the question, the count."""
    marked = d["words"][: 1 if tier == 1 else 1 + OTHERS]
    texts = [
        (float(d["depths"][k * d["n"] + j]), MARK.format(word=w)) for k, w in enumerate(marked) for j in range(d["n"])
    ]
    word, answer = d["words"][0], str(d["n"])
    tokens, starts, answers = lay_out(
        length, texts, ASK.format(word=word), answer, np.random.default_rng(d["seed"]), haystack, encode
    )
    return Prompt(tokens, "compact", starts, answers, [answer], meta={"tier": tier, "n": d["n"], "word": word})


class CountTask(DigitTiers):
    name = "count"
    description = "aggregation: how often a word is marked across the whole context (1-5), alone and among another"
    metrics = DigitTiers.tier_metrics(
        "count", ("only the asked word marked", "another word marked as often"), "fraction of counts exactly right"
    )
    fields = {**DigitTiers.tier_fields, "by_count": "tier 1 and tier 2 accuracy by the true count, with its prompts"}
    headline = "count_t1"
    summary = ("count_t1", "count_t2")
    order = 66

    draw, prompt, need = staticmethod(draw), staticmethod(prompt), staticmethod(need)

    def more(self, draws, exact):
        by_count = []
        for n in range(1, MAX_COUNT + 1):
            if idx := [i for i, d in enumerate(draws) if d["n"] == n]:
                t1, t2 = (float(np.mean([exact[t][i] for i in idx])) for t in (1, 2))
                by_count.append({"count": n, "prompts": len(idx), "t1": t1, "t2": t2})
        return {"by_count": by_count}


register_task(CountTask())
