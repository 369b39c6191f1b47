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
from ...data.ruler import MAX_WORD, Prompt, assemble, distinct, fill_source, fixed_bytes, random_word
from ...data.token_prompts import token_assemble
from ...util.errors import UsageError
from .base import (
    Metric,
    Task,
    answer_scores,
    check_haystack,
    check_int,
    encoder,
    mean_interval,
    prompts_of,
    register_task,
    tier_order,
)

MARK = "@{word}"  # compact, so that every count fits a tiny model's 128-token context
ASK = "count of @{word}:"
MAX_COUNT, OTHERS = 5, 1
DIGITS = np.frombuffer(b"0123456789", dtype=np.uint8)


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
    rng, word, answer = np.random.default_rng(d["seed"]), d["words"][0], str(d["n"])
    if encode is None:
        tokens, starts = assemble(
            length, texts, ASK.format(word=word) + " " + answer, fill_source(haystack, length, rng)
        )
        answers = [(length - len(answer), length)]
    else:
        tail = [(" " + ASK.format(word=word), False), (" " + answer, True)]
        ins = [(dep, [(" " + t, False)]) for dep, t in texts]
        tokens, starts, answers = token_assemble(encode, length, ins, tail, rng, haystack)
    return Prompt(tokens, "compact", starts, answers, [answer], meta={"tier": tier, "n": d["n"], "word": word})


class CountTask(Task):
    name = "count"
    reads_stream = False  # its haystack: filler, or the whole split (haystack=corpus)
    description = "aggregation: how often a word is marked across the whole context (1-5), alone and among another"
    metrics = tuple(
        Metric(
            f"count_t{t}",
            "count",
            True,
            f"count tier {t}: fraction of prompts whose count digit is exact ({what}; chance 1/10)",
            threshold=0.5,
            proportion=True,
            chance=0.1,
        )
        for t, what in ((1, "only the asked word marked"), (2, "another word marked as often"))
    )
    fields = {
        "haystack": "filler or corpus",
        "trials": "prompts per tier (the same draws in both tiers)",
        "by_count": "tier 1 and tier 2 accuracy by the true count (1-5), with the prompts of each",
        "tier_order": "falls (tier 2 at most tier 1) or defect (the harder tier scored higher)",
        "tokens": "bytes, or the outside tokenizer's class (eval --hf: the prompts in its tokens)",
    }
    options = {"trials": 30, "haystack": "filler"}
    headline = "count_t1"
    any_tokenizer = True
    summary = ("count_t1", "count_t2")
    order = 66

    def check(self, options, lengths, context, n_tokens, protocol):
        check_haystack(options, "count", lengths, n_tokens)
        check_int(options, "count", "trials")
        if short := [L for L in lengths if need(2) >= L]:
            raise UsageError(f"count needs windows of more than {need(2)} tokens (its tier 2); got lengths {short}")

    def protocol(self, options, protocol):
        return options["haystack"], {"trials": options["trials"]}

    def measure(self, ctx, length: int) -> dict:
        o = ctx.options
        hay = ctx.split_tokens if o["haystack"] == "corpus" else None
        encode = encoder(ctx)
        draws = [draw(ctx.seed, length, i) for i in range(o["trials"])]
        metrics, intervals, exact = {}, {}, {}
        for tier in (1, 2):
            prompts = prompts_of(lambda d, tier=tier: prompt(length, tier, d, hay, encode), draws)
            exact[tier] = [e[0] for e in answer_scores(ctx, prompts, DIGITS if encode is None else None)[0]]
            m, lo, hi = mean_interval(exact[tier])
            metrics[f"count_t{tier}"], intervals[f"count_t{tier}"] = m, [lo, hi]
        by_count = [
            {
                "count": n,
                "prompts": len(idx),
                "t1": float(np.mean([exact[1][i] for i in idx])),
                "t2": float(np.mean([exact[2][i] for i in idx])),
            }
            for n in range(1, MAX_COUNT + 1)
            if (idx := [i for i, d in enumerate(draws) if d["n"] == n])
        ]
        return {
            "status": "ok",
            "reason": None,
            "metrics": metrics,
            "intervals": intervals,
            "details": {
                "haystack": o["haystack"],
                "trials": o["trials"],
                "by_count": by_count,
                "tier_order": tier_order(metrics["count_t1"], metrics["count_t2"]),
                "tokens": "bytes" if encode is None else type(ctx.tokenizer).__name__,
            },
        }


register_task(CountTask())
