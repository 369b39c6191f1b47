"""``list``: state tracking (Michelangelo's Latent List, Vodrahalli et al. 2024, arXiv 2409.12640) in its smallest
form. Operations on one list stand in order at sorted random depths of filler or evaluation text, compact: "+WORD"
appends a word, "-WORD" removes that word, "pop" removes the last, "?WORD" and "peek" change nothing; the window ends
with "list length: N" and the digit N is scored, teacher-forced, among the ten digits (ties split; chance 1/10). Two
difficulty tiers from the same draws, with the same answer and as many operations at the same depths: ``list_t2``
appends and 1-3 removals among them (each of a word then in the list, or a pop of a non-empty list), ``list_t1`` the
appends of the words that remain (1-5) with every other operation turned into one that changes nothing. So the
answer is the state after every operation, not a count of one kind of mark, and neither a prior over the digits nor
the number of operations tells the tiers apart (version 1 drew tier 2's lengths smaller: each of 25 trained tiny
models scored its harder tier higher; version 2 left tier 1 the kept appends alone, fewer operations than tier 2, and
a model trained on these prompts scored its harder tier higher by the sign test: ``details.tier_order``,
``tier_p``). The prompts' form is data.state_tracking's (whose training documents of the same name train it). Bytes
for pebench's models; an outside model's tokens with ``eval --hf``.
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
        "list",
        ("the kept words' appends, the rest changing nothing", "appends and removals"),
        "fraction of lengths exactly right",
    )
    fields = DigitTiers.tier_fields
    headline = "list_t2"
    summary = ("list_t1", "list_t2")
    order = 67
    version = 3  # tier 1 as many operations as tier 2, those not kept changing nothing: both answer the same length

    draw, prompt, need = staticmethod(draw), staticmethod(prompt), staticmethod(need)


register_task(LatentListTask())
