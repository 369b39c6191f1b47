"""``count``: aggregation over the whole context (Oolong's counts, Bertsch et al. 2025, arXiv 2511.02817; RULER's
word-frequency tasks in their simplest form). Marks "@WORD" stand at random depths of filler or evaluation text, the
asked word ``n`` times (``n`` uniform in 1..5); the window ends with "count of @WORD: N" and the digit N is scored,
teacher-forced, among the ten digits (ties split; chance 1/10). Two difficulty tiers from the same draws (words,
count, depths): ``count_t1`` only the asked word is marked, ``count_t2`` another word is marked as often in between,
so locating the marks is no longer enough and each must be told apart. A harder tier that scores higher is a defect
of the generator (``details.tier_order``, ``tier_p``). The prompts' form is data.aggregation's (whose training
documents of the same name train it). Bytes for pebench's models; an outside model's tokens with ``eval --hf`` (the
digit's tokens among its whole vocabulary).
"""

from __future__ import annotations

import numpy as np

from ...data.aggregation import COUNT_ASK as ASK
from ...data.aggregation import MARK, MAX_COUNT, count_draw, count_prompt
from ...data.aggregation import count_need as need
from ...data.needles import EVAL
from .base import DigitTiers, register_task

__all__ = ["ASK", "MARK", "draw", "need", "prompt"]

prompt = count_prompt


def draw(seed: int, length: int, i: int) -> dict:
    """The i-th draw of a length (data.aggregation.count_draw from the evaluation's seeds)."""
    return count_draw(np.random.default_rng([seed, EVAL, 12, length, i]))


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
