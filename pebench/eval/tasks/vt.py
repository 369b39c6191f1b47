"""``vt``: RULER's variable tracking (bytes, or for an outside model the same prompts in its own tokens:
``data.token_prompts``). ``chains`` chains of assignments ("VAR ABCDE = 12345.", "VAR FGHIJ = VAR
ABCDE.", ... ``hops`` copies each; compact form "ABCDE = 12345.") spread over the window in order, the chains
interleaved, over filler or evaluation text; then RULER's question for the first chain's value and its answer prefix.
Every name of that chain holds the value: each is put in the answer slot and ranked by log-likelihood against the
other chains' names (order-free recall; chance 1/(1 + the other chains' names)). ``vt_direct`` is the recall of the
name assigned the value itself, the rest need one or more hops; ``details.hops`` has the recall by hop.
"""

from __future__ import annotations

import numpy as np

from ...data.needles import EVAL
from ...data.ruler import fixed_bytes, vt_form, vt_layout, vt_prompt
from ...data.token_prompts import vt_token_prompt
from ...util.errors import UsageError
from .base import (
    Metric,
    Task,
    check_choice,
    check_haystack,
    check_int,
    encoder,
    mean_interval,
    prompts_of,
    ranking_scores,
    register_task,
)

FORMS = ("auto", "standard", "compact")


class VariableTrackingTask(Task):
    name = "vt"
    reads_stream = False  # its haystack: filler, or the whole split (haystack=corpus)
    description = "variable tracking: which names hold a value through chains of assignments (ranked recall)"
    metrics = (
        Metric(
            "vt_recall",
            "vt",
            True,
            "vt: recall of the names holding the asked value, each ranked against the "
            "other chains' names (chance 1/(1 + (chains - 1) (hops + 1)))",
            threshold=0.5,
            proportion=True,
            chance=lambda o, V: 1.0 / (1 + (o["chains"] - 1) * (o["hops"] + 1)),
        ),
        Metric(
            "vt_direct",
            "vt",
            True,
            "vt: the same for the name assigned the value directly (no hop)",
            proportion=True,
            chance=lambda o, V: 1.0 / (1 + (o["chains"] - 1) * (o["hops"] + 1)),
        ),
    )
    fields = {
        "form": "prompt form: standard (RULER's sentences) or compact",
        "haystack": "filler or corpus",
        "trials": "prompts per length",
        "options": "chains, hops",
        "hops": "recall by hop (0: the name assigned the value itself) with 95% intervals",
        "tokens": "bytes, or the outside tokenizer's class (eval --hf: the prompts in its tokens)",
    }
    options = {"trials": 20, "chains": 2, "hops": 2, "haystack": "filler", "form": "auto"}
    headline = "vt_recall"
    any_tokenizer = True  # an outside model's prompts are its tokens (data.token_prompts.vt_token_prompt)
    order = 40

    def check(self, options, lengths, context, n_tokens, protocol):
        check_haystack(options, "vt", lengths, n_tokens)
        check_choice(options, "vt", "form", FORMS)
        check_int(options, "vt", "trials")
        check_int(options, "vt", "chains", 2)  # the other chains' names are what the true ones are ranked against
        check_int(options, "vt", "hops")
        short = [L for L in lengths if vt_form(options["form"], L, options["chains"], options["hops"]) is None]
        if short:
            need = fixed_bytes(
                *vt_layout(
                    "compact" if options["form"] == "auto" else options["form"], options["chains"], options["hops"]
                )
            )
            raise UsageError(
                f"vt with {options['chains']} chains of {options['hops']} hops needs windows of at least "
                f"{need} tokens; got lengths {short}"
            )

    def protocol(self, options, protocol):
        return f"{options['haystack']}-{options['form']}", {k: options[k] for k in ("trials", "chains", "hops")}

    def measure(self, ctx, length: int) -> dict:
        o = ctx.options
        rng = np.random.default_rng([ctx.seed, EVAL, 4, length])
        hay = ctx.split_tokens if o["haystack"] == "corpus" else None
        encode = encoder(ctx)  # an outside model's tokenizer: its names of one width, ranked in its tokens
        prompts = prompts_of(
            lambda _: (
                vt_prompt(rng, length, o["form"], o["chains"], o["hops"], hay)
                if encode is None
                else vt_token_prompt(encode, rng, length, o["form"], o["chains"], o["hops"], hay)
            ),
            range(o["trials"]),
        )
        scores = ranking_scores(ctx, prompts)
        m, lo, hi = mean_interval([sum(s) / len(s) for s in scores])
        by_hop = []
        for h in range(o["hops"] + 1):
            hm, hlo, hhi = mean_interval([s[h] for s in scores])
            by_hop.append({"hop": h, "recall": hm, "recall_ci": [hlo, hhi]})
        return {
            "status": "ok",
            "reason": None,
            "metrics": {"vt_recall": m, "vt_direct": by_hop[0]["recall"]},
            "intervals": {"vt_recall": [lo, hi], "vt_direct": by_hop[0]["recall_ci"]},
            "details": {
                "form": prompts[0].form,
                "tokens": "bytes" if encode is None else type(ctx.tokenizer).__name__,
                "haystack": o["haystack"],
                "trials": o["trials"],
                "options": {"chains": o["chains"], "hops": o["hops"]},
                "hops": by_hop,
            },
        }


register_task(VariableTrackingTask())
