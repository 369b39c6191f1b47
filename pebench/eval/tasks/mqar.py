"""``mqar``: multi-query associative recall (Zoology, Arora et al. 2023) on byte windows, or for an outside model in
its own tokens (``data.token_prompts``; its values' tokens scored among its whole vocabulary). A block of ``pairs``
key-value pairs ("abc=123 def=456 ...") opens the window; ``queries`` of its keys, each with its value, follow at
evenly spread depths over filler or evaluation text, the last ending the window. Only the queried values are scored,
teacher-forced, per digit among the ten (ties split): ``mqar_acc`` the fraction of values exactly right (chance
10^-3), ``mqar_loss`` the mean loss per value byte. Pairs, queries and length are options, so a model trained at one
setting is tested at others (training documents: ``train.needle_kinds: {mqar: W}``).
"""

from __future__ import annotations

import numpy as np

from ...data.needles import EVAL
from ...data.ruler import MQAR_VALUE, mqar_need, mqar_prompt
from ...data.token_prompts import mqar_token_prompt
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
)

DIGITS = np.frombuffer(b"0123456789", dtype=np.uint8)


class MqarTask(Task):
    name = "mqar"
    reads_stream = False  # its haystack: filler, or the whole split (haystack=corpus)
    description = "multi-query associative recall: key=value pairs, then queries of the keys at spread-out gaps"
    metrics = (
        Metric(
            "mqar_acc",
            "mqar",
            True,
            f"mqar: fraction of queried values exactly right (chance 10^-{MQAR_VALUE})",
            threshold=0.5,
            proportion=True,
            chance=10.0**-MQAR_VALUE,
        ),
        Metric("mqar_loss", "mqar", False, "mqar: mean loss per value byte of the queries (nats)", 3),
    )
    fields = {
        "haystack": "filler or corpus (the text between the queries)",
        "trials": "prompts per length",
        "options": "pairs, queries",
        "by_query": "accuracy by query order (the first query is the nearest to the pairs block) with 95% intervals",
        "tokens": "bytes, or the outside tokenizer's class (eval --hf: the prompts in its tokens)",
    }
    options = {"trials": 20, "pairs": 4, "queries": 4, "haystack": "filler"}
    headline = "mqar_acc"
    any_tokenizer = True  # an outside model's prompts are its tokens (data.token_prompts.mqar_token_prompt)
    order = 50

    def check(self, options, lengths, context, n_tokens, protocol):
        check_haystack(options, "mqar", lengths, n_tokens)
        check_int(options, "mqar", "trials")
        pairs, queries = check_int(options, "mqar", "pairs"), check_int(options, "mqar", "queries")
        if queries > pairs:
            raise UsageError(
                f"mqar.queries ({queries}) must be at most mqar.pairs ({pairs}): each query asks a different key"
            )
        short = [L for L in lengths if mqar_need(pairs, queries) > L]
        if short:
            fit = max([p for p in range(1, pairs + 1) if mqar_need(p, min(p, queries)) <= min(lengths)], default=0)
            raise UsageError(
                f"mqar with {pairs} pairs and {queries} queries needs windows of at least "
                f"{mqar_need(pairs, queries)} tokens; got lengths {short}"
                + (f" (at {min(lengths)} tokens at most {fit} pairs fit)" if fit else "")
            )

    def protocol(self, options, protocol):
        return options["haystack"], {k: options[k] for k in ("trials", "pairs", "queries")}

    def measure(self, ctx, length: int) -> dict:
        o = ctx.options
        rng = np.random.default_rng([ctx.seed, EVAL, 5, length])
        hay = ctx.split_tokens if o["haystack"] == "corpus" else None
        encode = encoder(ctx)  # an outside model's tokenizer: the values' tokens among its whole vocabulary
        prompts = prompts_of(
            lambda _: (
                mqar_prompt(rng, length, o["pairs"], o["queries"], hay)
                if encode is None
                else mqar_token_prompt(encode, rng, length, o["pairs"], o["queries"], hay)
            ),
            range(o["trials"]),
        )
        exact, loss = answer_scores(ctx, prompts, DIGITS if encode is None else None)
        m, lo, hi = mean_interval([sum(e) / len(e) for e in exact])
        by_query = []
        for j in range(o["queries"]):
            qm, qlo, qhi = mean_interval([e[j] for e in exact])
            by_query.append({"query": j, "accuracy": qm, "accuracy_ci": [qlo, qhi]})
        return {
            "status": "ok",
            "reason": None,
            "metrics": {"mqar_acc": m, "mqar_loss": float(np.mean(loss))},
            "intervals": {"mqar_acc": [lo, hi]},
            "details": {
                "haystack": o["haystack"],
                "tokens": "bytes" if encode is None else type(ctx.tokenizer).__name__,
                "trials": o["trials"],
                "options": {"pairs": o["pairs"], "queries": o["queries"]},
                "by_query": by_query,
            },
        }


register_task(MqarTask())
