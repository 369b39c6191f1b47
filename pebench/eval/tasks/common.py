"""``common``: RULER's common-words task in its smallest form (Hsieh et al. 2024; aggregation, as Oolong asks it).
Three words are marked ("@WORD") at random depths of filler or evaluation text, one of them more often than the
others; the window ends with "most marked: @WORD" and the true word is ranked, by its log-likelihood in the slot,
against the other two (ties split; chance 1/3). Two difficulty tiers from the same draws: ``common_t1`` the common
word marked 4 times and the others once each, ``common_t2`` the others 3 times each (the same words and the common
word's marks at the same depths), so a model must count, not just notice a repeated word. A harder tier that scores
higher is a defect of the generator (``details.tier_order``, ``tier_p``). The prompts' form is data.aggregation's
(whose training documents of the same name train it). Bytes for pebench's models; an outside model's tokens with
``eval --hf`` (the words drawn to take as many tokens as each other, so one slot holds any of them).
"""

from __future__ import annotations

import numpy as np

from ...data.aggregation import COMMON_ASK as ASK
from ...data.aggregation import MARK, common_draw, common_prompt
from ...data.aggregation import common_need as need
from ...data.needles import EVAL
from .base import DigitTiers, encoder, mean_interval, prompts_of, ranking_scores, register_task, tier_details

__all__ = ["ASK", "MARK", "draw", "need", "prompt"]

prompt = common_prompt


def draw(seed: int, length: int, i: int, encode=None) -> dict:
    """The i-th draw of a length (data.aggregation.common_draw from the evaluation's seeds)."""
    return common_draw(np.random.default_rng([seed, EVAL, 14, length, i]), encode)


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
        metrics, intervals, credit = {}, {}, {}
        for tier in (1, 2):
            prompts = prompts_of(lambda d, tier=tier: prompt(length, tier, d, hay, encode), draws)
            credit[tier] = [s[0] for s in ranking_scores(ctx, prompts)]
            m, lo, hi = mean_interval(credit[tier])
            metrics[f"common_t{tier}"], intervals[f"common_t{tier}"] = m, [lo, hi]
        details = {"haystack": o["haystack"], "trials": o["trials"], **tier_details(credit[1], credit[2])}
        details["tokens"] = "bytes" if encode is None else type(ctx.tokenizer).__name__
        return {"status": "ok", "reason": None, "metrics": metrics, "intervals": intervals, "details": details}


register_task(CommonTask())
