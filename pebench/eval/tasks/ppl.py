"""``ppl``: perplexity of the evaluation stream under a protocol (scoring.py's windows), and ``ppl_far``, the
perplexity of the tokens only far context can predict (a model-free analogue of LongPPL, Fang et al. 2024).

A target token i is *far* when the n bytes before it (tokens i-n .. i-1) occurred before in the stream, and their
most recent earlier occurrence ends more than T tokens before i-1 (T = the training context): a model that sees
only the last T tokens cannot copy its continuation, one that reads far enough back can.
"""

from __future__ import annotations

import math

import numpy as np

from .base import Metric, Task, register_task


def far_tokens(stream: np.ndarray, n: int, distance: int) -> np.ndarray:
    """Boolean mask over stream indices: True at i when the n-gram stream[i-n:i] last occurred (ending at e < i-1)
    more than ``distance`` tokens earlier, i.e. (i-1) - e > distance. Exact (n-grams compared byte for byte)."""
    s = np.ascontiguousarray(np.asarray(stream))  # bytes, or an outside tokenizer's ids
    far = np.zeros(len(s), dtype=bool)
    if len(s) <= n:
        return far
    grams = np.lib.stride_tricks.sliding_window_view(s, n)  # grams[j] = s[j:j+n], ends at e = j+n-1
    keys = np.ascontiguousarray(grams).view(np.dtype((np.void, n * s.itemsize))).ravel()
    _, ids = np.unique(keys, return_inverse=True)
    order = np.lexsort((np.arange(len(ids)), ids))  # by n-gram, then position
    prev = np.full(len(ids), -1, dtype=np.int64)  # start of the previous occurrence of the same n-gram
    same = ids[order[1:]] == ids[order[:-1]]
    prev[order[1:][same]] = order[:-1][same]
    j = np.arange(len(ids))
    hit = (prev >= 0) & (j - prev > distance)
    targets = j + n  # the token after the n-gram starting at j
    ok = targets < len(s)
    far[targets[ok & hit]] = True
    return far


# A record keeps each full window's mean loss (``details.window_losses``) when it has at most this many: a few long
# windows of one model (an outside model at 2x-4x its context) are the units a claim pairs across scalings
# (``unit: window``); the thousands of short windows of a tiny model are summarized by the position buckets.
WINDOW_LOSSES_MAX = 64


def _vocab(options, vocab):
    return vocab  # a uniform guess over V tokens: perplexity V


class PplTask(Task):
    name = "ppl"
    description = "perplexity over the evaluation stream; ppl_far over the tokens only far context predicts"
    metrics = (
        Metric("ppl", "ppl", False, "perplexity: exp(mean cross-entropy per scored token)", chance=_vocab, floor=1.0),
        Metric(
            "ppl_far",
            "ppl",
            False,
            "perplexity over the far tokens (preceding n bytes last seen > T tokens earlier)",
            chance=_vocab,
            floor=1.0,
        ),
        Metric(
            "bpb",
            "ppl",
            False,
            "bits per byte: summed loss over the UTF-8 bytes the scored tokens cover, / ln 2 "
            "(= loss / ln 2 for the byte tokenizer); compares across tokenizers",
            3,
            chance=lambda o, V: 8.0 if V == 256 else None,  # a byte each token: log2 256; else tokens per byte vary
            floor=0.0,
        ),
        Metric(
            "loss",
            "ppl",
            False,
            "mean cross-entropy per scored token (nats)",
            3,
            chance=lambda o, V: math.log(V),
            floor=0.0,
        ),
    )
    derived = (Metric("ratio", "ppl", False, "ppl / ppl at 1x of the same run", 3, derived=True),)
    fields = {
        "tokens_scored": "number of scored tokens",
        "windows": "number of windows evaluated",
        "position_buckets": "per-position loss: [{lo, hi, tokens, loss}] over log-spaced context lengths",
        "far_tokens": "scored tokens marked far (ppl_far is over these)",
        "far_n": "n of the far-token marking (tokens of preceding context matched; bytes for byte models)",
        "far_distance": "T of the far-token marking (the training context)",
        "window_losses": "each full window's mean loss, in stream order (null past WINDOW_LOSSES_MAX windows)",
    }
    options = {"far_n": 16}
    headline = "ppl"
    order = 0
    any_tokenizer = True
    summary = ("ppl", "ppl_far", "bpb")  # bpb: the column a subword model and a byte model share

    def check(self, options, lengths, context, n_tokens, protocol):
        from ...util.errors import UsageError
        from ..scoring import windows

        if not isinstance(options["far_n"], int) or options["far_n"] < 1:
            raise UsageError(f"ppl.far_n must be an integer >= 1, got {options['far_n']!r}")
        for L in lengths:  # every length fits the stream under the protocol
            windows(n_tokens, L, protocol, max(lengths))

    def prepare(self, ctx) -> None:
        ctx.state["far"] = far_tokens(ctx.stream, ctx.options["far_n"], ctx.cfg.model.context)

    def protocol(self, options, protocol):
        params = protocol.params()
        return protocol.name, params if options["far_n"] == 16 else {**params, "far_n": options["far_n"]}

    def measure(self, ctx, length: int) -> dict:
        from ..scoring import score_stream

        out = score_stream(
            ctx.model,
            ctx.stream,
            length,
            ctx.protocol,
            ctx.cfg.eval.batch_tokens,
            ctx.dev,
            ctx.max_length,
            ctx.progress,
            ctx.title,
            far=ctx.state["far"],
            nbytes=ctx.token_bytes,
            precision=ctx.precision,
            journal=ctx.journal,
        )
        loss, far = out["loss"], out.pop("far")
        # bits per byte: the scored tokens' summed loss over the UTF-8 bytes they cover (lm-evaluation-harness's
        # unit); for pebench's byte tokenizer every token is one byte, so it is loss / ln 2
        per_byte = loss * out["tokens_scored"] / out.pop("bytes_scored") if ctx.token_bytes is not None else loss
        metrics = {
            "ppl": math.exp(loss),
            "ppl_far": math.exp(far["loss"]) if far["tokens"] else None,
            "bpb": per_byte / math.log(2),
            "loss": loss,
        }
        details = {
            **out,
            "far_tokens": far["tokens"],
            "far_n": ctx.options["far_n"],
            "far_distance": ctx.cfg.model.context,
        }
        details.pop("loss")
        if len(details["window_losses"]) > WINDOW_LOSSES_MAX:  # many short windows: the position buckets say enough
            details["window_losses"] = None
        return {"status": "ok", "reason": None, "metrics": metrics, "intervals": {}, "details": details}

    def derive(self, df, name: str):
        """``ratio``: ppl / ppl at 1x of the same run."""
        import pandas as pd

        one = df[(df["length"] == df["train_context"]) & (df["status"] == "ok")].set_index("run")["ppl"]
        return df.assign(
            ratio=[
                p / one[r] if r in one.index and p is not None and not pd.isna(p) else None
                for r, p in zip(df["run"], df["ppl"])
            ]
        )


register_task(PplTask())
