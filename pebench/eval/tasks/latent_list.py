"""``list``: state tracking (Michelangelo's Latent List, Vodrahalli et al. 2024, arXiv 2409.12640) in its smallest
form. Operations on one list stand in order at sorted random depths of filler or evaluation text, compact: "+WORD"
appends a word, "-WORD" removes that word, "pop" removes the last; the window ends with "list length: N" and the digit
N is scored, teacher-forced, among the ten digits (ties split; chance 1/10). Two difficulty tiers from the same draws,
with the same answer: ``list_t2`` appends and 1-3 removals among them (each of a word then in the list, or a pop of
a non-empty list), ``list_t1`` only the appends of the words that remain (1-5), at the depths they have in tier 2.
So the answer is the state after every operation, not a count of one kind of mark, and a model's prior over the
digits scores alike in both tiers (drawn otherwise, with tier 2's lengths smaller, each of 25 trained tiny models
scores its harder tier higher: a defect of the generator, which ``details.tier_order`` reports). Bytes for pebench's
models; an outside model's tokens with ``eval --hf``.
"""

from __future__ import annotations

import numpy as np

from ...data.needles import EVAL
from ...data.ruler import MAX_WORD, Prompt, distinct, fixed_bytes, random_word
from ...data.token_prompts import lay_out
from .base import DigitTiers, register_task

ASK = "list length:"
MAX_KEPT, MAX_REMOVALS = 5, 3  # the answer: 1-5 words kept; tier 2 appends that many plus 1-3 it removes


def need(tier: int) -> int:
    """Bytes of a tier's longest prompt that are not haystack."""
    extra = MAX_REMOVALS if tier == 2 else 0
    ops = ["+" + "x" * MAX_WORD] * (MAX_KEPT + extra) + ["-" + "x" * MAX_WORD] * extra
    return fixed_bytes(ops, ASK + " 9")


def draw(seed: int, length: int, i: int) -> dict:
    """The i-th draw of a length: tier 2's operations in order (the kept count's appends plus as many as it removes,
    removals placed among them, each of something then in the list), their depths, and a seed for the haystack."""
    rng = np.random.default_rng([seed, EVAL, 13, length, i])
    kept, removals = int(rng.integers(1, MAX_KEPT + 1)), int(rng.integers(1, MAX_REMOVALS + 1))
    words = distinct(rng, random_word, kept + removals)
    ops, held = [], []
    for w in words:  # after each append, maybe a removal while any are left to place and the list is not empty
        ops.append("+" + w)
        held.append(w)
        if removals and rng.random() < 0.5:
            ops.append(_removal(rng, held))
            removals -= 1
    while removals:
        ops.append(_removal(rng, held))
        removals -= 1
    return {"words": words, "ops": ops, "depths": np.sort(rng.random(len(ops))), "seed": int(rng.integers(2**31))}


def _removal(rng: np.random.Generator, held: list[str]) -> str:
    """A removal of a word held (``-WORD``) or of the last one (``pop``), taken off ``held``."""
    if rng.random() < 0.5:
        held.pop()
        return "pop"
    return "-" + held.pop(int(rng.integers(len(held))))


def length_after(ops: list[str]) -> int:
    """The list's length after the operations, by replaying them."""
    held: list[str] = []
    for op in ops:
        if op == "pop":
            held.pop()
        elif op.startswith("-"):
            held.remove(op[1:])
        else:
            held.append(op[1:])
    return len(held)


def kept_appends(ops: list[str]) -> list[int]:
    """Indices of the appends whose word is still in the list after every operation."""
    held: list[tuple[int, str]] = []
    for i, op in enumerate(ops):
        if op == "pop":
            held.pop()
        elif op.startswith("-"):
            held.remove(next(h for h in held if h[1] == op[1:]))
        else:
            held.append((i, op[1:]))
    return sorted(i for i, _ in held)


def prompt(length: int, tier: int, d: dict, haystack=None, encode=None) -> Prompt:
    """One prompt of a draw at ``tier`` (tier 1: the kept words' appends alone, at their tier-2 depths)."""
    keep = range(len(d["ops"])) if tier == 2 else kept_appends(d["ops"])
    ops = [d["ops"][i] for i in keep]
    texts, answer = [(float(d["depths"][i]), d["ops"][i]) for i in keep], str(length_after(ops))
    tokens, starts, answers = lay_out(length, texts, ASK, answer, np.random.default_rng(d["seed"]), haystack, encode)
    return Prompt(tokens, "compact", starts, answers, [answer], meta={"tier": tier, "ops": ops})


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
