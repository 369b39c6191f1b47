"""State-tracking prompts (Michelangelo's Latent List, Vodrahalli et al. 2024, arXiv 2409.12640, in its smallest
form): operations on one list in order at sorted depths of filler or text, compact ("+WORD" appends, "-WORD" removes
that word, "pop" removes the last; "?WORD" asks about a word and "peek" looks at the last, changing nothing), then
"list length: N", in two tiers from one draw with the same answer and as many operations at the same depths: tier 2
appends and removes; tier 1 keeps the appends of the words that remain and turns every other operation into one
that changes nothing (an append or removal of WORD into "?WORD", a pop into "peek"), so counting the appends answers
it. The evaluation task ``list`` (eval/tasks/latent_list.py) draws from the evaluation's seeds; the
training-document kind of the same name (``train.needle_kinds: {list: W}``) draws a tier and a draw from the training
stream's, over the training row's own text half the time (filler otherwise), answered."""

from __future__ import annotations

import numpy as np

from .needles import doc_kind, tiered_document
from .ruler import MAX_WORD, Prompt, distinct, fixed_bytes, random_word
from .token_prompts import lay_out

ASK = "list length:"
MAX_KEPT, MAX_REMOVALS = 5, 3  # the answer: 1-5 words kept; tier 2 appends that many plus 1-3 it removes


def list_need(tier: int) -> int:
    """Bytes of a tier's longest prompt that are not haystack (the tiers' operations are as many and as long)."""
    ops = ["+" + "x" * MAX_WORD] * (MAX_KEPT + MAX_REMOVALS) + ["-" + "x" * MAX_WORD] * MAX_REMOVALS
    return fixed_bytes(ops, ASK + " 9")


def list_draw(rng: np.random.Generator) -> dict:
    """A draw: tier 2's operations in order (the kept count's appends plus as many as it removes, removals placed
    among them, each of something then in the list), their depths, and a seed for the haystack."""
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
    """The list's length after the operations, by replaying them (a query or a peek changes nothing)."""
    held: list[str] = []
    for op in ops:
        if op == "pop":
            held.pop()
        elif op.startswith("-"):
            held.remove(op[1:])
        elif op.startswith("+"):
            held.append(op[1:])
    return len(held)


def unchanging(op: str) -> str:
    """The operation that looks like ``op`` and changes nothing: "?WORD" for an append or removal of WORD, "peek" for
    a pop."""
    return "peek" if op == "pop" else "?" + op[1:]


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


def list_prompt(length: int, tier: int, d: dict, haystack=None, encode=None) -> Prompt:
    """One prompt of a draw at ``tier`` (tier 1: the kept words' appends, every other operation unchanging)."""
    kept = set(kept_appends(d["ops"]))
    ops = [op if tier == 2 or i in kept else unchanging(op) for i, op in enumerate(d["ops"])]
    texts, answer = [(float(dep), op) for dep, op in zip(d["depths"], ops)], str(length_after(ops))
    tokens, starts, answers = lay_out(length, texts, ASK, answer, np.random.default_rng(d["seed"]), haystack, encode)
    return Prompt(tokens, "compact", starts, answers, [answer], meta={"tier": tier, "ops": ops})


@doc_kind("list", "a list-operations prompt (either tier, 1-5 words kept), answered with the list's length", False)
def _list_doc(rng, background, k, lengths):
    return tiered_document(rng, background, list_need, list_draw, list_prompt)
