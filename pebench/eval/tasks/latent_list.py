"""``list``: state tracking (Michelangelo's Latent List, Vodrahalli et al. 2024, arXiv 2409.12640) in its smallest
form. Operations on one list stand in order at sorted random depths of filler or evaluation text, compact: "+WORD"
appends a word, "-WORD" removes that word, "pop" removes the last; the window ends with "list length: N" and the digit
N is scored, teacher-forced, among the ten digits (ties split; chance 1/10). Two difficulty tiers from the same draws,
with the same answer: ``list_t2`` appends and 1-3 removals among them (each of a word then in the list, or a pop of
a non-empty list), ``list_t1`` only the appends of the words that remain (1-5), at the depths they have in tier 2.
So the answer is the state after every operation, not a count of one kind of mark, and a model's prior over the
digits scores alike in both tiers (drawn otherwise, with tier 2's lengths smaller, each of 25 trained tiny models
scores its harder tier higher: a defect of the generator, which ``details.tier_order`` and ``tier_p`` report). The
prompts' form is data.state_tracking's (whose training documents of the same name train it). Bytes for pebench's
models; an outside model's tokens with ``eval --hf``.
"""

from __future__ import annotations

import numpy as np

from ...data.needles import EVAL
from ...data.state_tracking import ASK, MAX_KEPT, MAX_REMOVALS, kept_appends, length_after, list_draw
from ...data.state_tracking import list_need as need
from ...data.state_tracking import list_prompt as prompt
from .base import DigitTiers, register_task

__all__ = ["ASK", "MAX_KEPT", "MAX_REMOVALS", "draw", "kept_appends", "length_after", "need", "prompt"]


def draw(seed: int, length: int, i: int) -> dict:
    """The i-th draw of a length (data.state_tracking.list_draw from the evaluation's seeds)."""
    return list_draw(np.random.default_rng([seed, EVAL, 13, length, i]))


class LatentListTask(DigitTiers):
    name = "list"
    description = "state tracking: a list's length after appends (tier 1) and removals among them (tier 2)"
    metrics = DigitTiers.tier_metrics(
        "list", ("the kept words' appends only", "appends and removals"), "fraction of lengths exactly right"
    )
    fields = DigitTiers.tier_fields
    headline = "list_t2"
    summary = ("list_t1", "list_t2")
    order = 67
    version = 2  # tier 1 the kept words' appends: both tiers answer the same length

    draw, prompt, need = staticmethod(draw), staticmethod(prompt), staticmethod(need)


register_task(LatentListTask())
