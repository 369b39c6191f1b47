"""Aggregation prompts: words marked "@WORD" at depths of filler or text, then a question whose answer needs every
mark, in two difficulty tiers from one draw. ``count`` asks how many times a word is marked (tier 2: another word
marked as often); ``common`` asks which of three words is marked most (tier 2: the others marked nearly as often).
The evaluation tasks of the same names (eval/tasks/count.py, common.py) draw from the evaluation's seeds; the
training-document kinds of the same names (``train.needle_kinds: {count: W, common: W}``) draw a tier and a draw
from the training stream's, over the training row's own text half the time (filler otherwise), answered, so that
aggregation can be trained as the context suite trains retrieval."""

from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from .needles import doc_kind, tiered_document
from .ruler import MAX_WORD, Prompt, distinct, fixed_bytes, random_word
from .token_prompts import lay_out

MARK = "@{word}"  # compact, so that every count fits a tiny model's 128-token context
COUNT_ASK = "count of @{word}:"
MAX_COUNT, OTHERS = 5, 1  # the asked word's marks (1..MAX_COUNT); other words marked as often in tier 2
COMMON_ASK = "most marked:"
COMMON, RARE = 4, (1, 3)  # the common word's marks; each other word's, by tier


def count_need(tier: int) -> int:
    """Bytes of a count prompt that are not haystack (words at their longest, every count at its most)."""
    marks = MAX_COUNT * (1 + OTHERS * (tier - 1))
    return fixed_bytes([MARK.format(word="x" * MAX_WORD)] * marks, COUNT_ASK.format(word="x" * MAX_WORD) + " 9")


def count_draw(rng: np.random.Generator) -> dict:
    """A count draw: the asked word and the others, the count (each other word's as the asked one's, so frequency
    tells nothing), every mark's depth, a seed for the haystack."""
    words = distinct(rng, random_word, 1 + OTHERS)
    n = int(rng.integers(1, MAX_COUNT + 1))
    return {"words": words, "n": n, "depths": rng.random((1 + OTHERS) * n), "seed": int(rng.integers(2**31))}


def count_prompt(length: int, tier: int, d: dict, haystack=None, encode=None) -> Prompt:
    """A count prompt of a draw at ``tier``: the asked word's marks (tier 2: the others' too), the question, n."""
    marked = d["words"][: 1 if tier == 1 else 1 + OTHERS]
    texts = [
        (float(d["depths"][k * d["n"] + j]), MARK.format(word=w)) for k, w in enumerate(marked) for j in range(d["n"])
    ]
    word, answer = d["words"][0], str(d["n"])
    tokens, starts, answers = lay_out(
        length, texts, COUNT_ASK.format(word=word), answer, np.random.default_rng(d["seed"]), haystack, encode
    )
    return Prompt(tokens, "compact", starts, answers, [answer], meta={"tier": tier, "n": d["n"], "word": word})


def common_need(tier: int) -> int:
    """Bytes of a common prompt that are not haystack, at the longest words."""
    marks = COMMON + 2 * RARE[tier - 1]
    return fixed_bytes([MARK.format(word="x" * MAX_WORD)] * marks, COMMON_ASK + " @" + "x" * MAX_WORD)


def common_draw(rng: np.random.Generator, encode: Optional[Callable] = None) -> dict:
    """A common draw: three words (the first the common one; of one width in bytes, or with ``encode`` in tokens),
    the depths of every mark tier 2 places (tier 1 keeps the first of each other word's), a seed for the haystack."""
    first = random_word(rng)  # the others as long: in bytes or in tokens, one slot holds any of the three
    width = len(first) if encode is None else len(encode(" @" + first))
    ok = (lambda w: len(w) == width) if encode is None else (lambda w: len(encode(" @" + w)) == width)
    words = [first] + distinct(rng, random_word, 2, [first], ok)
    return {"words": words, "depths": rng.random(COMMON + 2 * RARE[1]), "seed": int(rng.integers(2**31))}


def common_prompt(length: int, tier: int, d: dict, haystack=None, encode=None) -> Prompt:
    """A common prompt of a draw at ``tier``: the true answer the common word, the other two its candidates."""
    words, rare, dep = d["words"], RARE[tier - 1], d["depths"]
    texts = [(float(dep[j]), MARK.format(word=words[0])) for j in range(COMMON)]
    texts += [
        (float(dep[COMMON + k * RARE[1] + j]), MARK.format(word=w))
        for k, w in enumerate(words[1:])
        for j in range(rare)
    ]
    rng = np.random.default_rng(d["seed"])
    tokens, starts, answers = lay_out(length, texts, COMMON_ASK, "@" + words[0], rng, haystack, encode, whole=True)
    meta = (
        {"tier": tier}
        if encode is None
        else {"tier": tier, "slot": {"@" + w: encode(" @" + w).tolist() for w in words}}
    )
    return Prompt(tokens, "compact", starts, answers, ["@" + words[0]], ["@" + w for w in words[1:]], meta)


# ----- training documents (train.needle_kinds: count, common) -----


@doc_kind("count", "a count prompt (either tier, 1-5 marks of the asked word), answered with the count", False)
def _count_doc(rng, background, k, lengths):
    return tiered_document(rng, background, count_need, count_draw, count_prompt)


@doc_kind("common", "a common-words prompt (either tier), answered with the most marked word", False)
def _common_doc(rng, background, k, lengths):
    return tiered_document(rng, background, common_need, common_draw, common_prompt)
