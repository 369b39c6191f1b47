"""``decoy``: a needle with two decoys at RoPE-wavelength distances (VideoRoPE, Wei et al. 2025, arXiv 2502.05173:
distractors placed where a rotation repeats; a single needle in repetitive filler is a sanity check, not a test).
The needle "{name}: {value}." and two decoys "{other}: {value'}." stand in filler or evaluation text, one decoy a
RoPE wavelength before the needle and one another wavelength after it (start to start, exactly): lambda_i =
2 pi base^(2i / head_dim), the two slowest that fit the window, so the component of that wavelength rotates a decoy
exactly as the needle and cannot tell them apart. The question "{name}:" ends the window; the true value is ranked,
by its log-likelihood in the answer slot, against the decoys' values (credit 1 when above both, ties split; chance
1/3). Two tiers from the same draws (values, positions, haystack): ``decoy_t1`` the decoys' names other words,
``decoy_t2`` their names the needle's with one letter changed (confusable). A harder tier that scores higher is a
defect of the generator (``details.tier_order``). ``head_dim`` and ``base`` name the rotation the distances are
laid out for (default: pebench's tiny models, 32 and 10,000; an outside model's own for ``eval --hf``). Bytes for
pebench's models; an outside model's tokens with ``eval --hf`` (distances in its tokens; the decoys' values drawn
until they take as many tokens as the true one).
"""

from __future__ import annotations

import math

import numpy as np

from ...data.needles import EVAL
from ...data.ruler import Prompt, distinct, random_number, random_word
from ...data.token_prompts import lay_out
from ...util.errors import UsageError
from .base import (
    DigitTiers,
    Task,
    check_haystack,
    check_int,
    encoder,
    prompts_of,
    ranking_scores,
    register_task,
    summarize,
    tier_details,
)

NEEDLE, DIGITS, LETTERS = "{name}: {value}.", 5, "abcdefghijklmnopqrstuvwxyz"
TIERS = (1, 2)


def wavelengths(head_dim: int, base: float) -> list[float]:
    """Every RoPE component's wavelength 2 pi base^(2i / head_dim), fastest first."""
    return [2 * math.pi * base ** (2 * i / head_dim) for i in range(head_dim // 2)]


def units(text: str, encode=None) -> int:
    """Units a piece takes: bytes (with the spaces ``assemble`` puts around an insert), or its tokens after a space."""
    return len(text) + 2 if encode is None else len(encode(" " + text))


def tail_units(question: str, answer: str, encode=None) -> int:
    """Units the question and its answer take at the window's end (bytes: a space before each)."""
    if encode is None:
        return len(question) + 1 + len(answer) + 1
    return units(question, encode) + units(answer, encode)


def plan(length: int, head_dim: int, base: float, encode=None) -> tuple[int, int, int]:
    """(D before, D after, the room left) for a window of ``length``: the two wavelengths (rounded, each longer than
    a needle) whose layout fits with the longest names and values, the smaller of them as slow as it can be; a window
    too short for any two is a ValueError."""
    longest = NEEDLE.format(name="w" * 6, value="9" * DIGITS)
    margin = 0 if encode is None else 3  # a tokenizer may split a drawn name into more tokens than the placeholder
    piece = units(longest, encode) + margin
    tail = tail_units("w" * 6 + ":", "9" * DIGITS, encode) + margin
    room = length - 3 * piece - tail
    ds = [round(x) for x in wavelengths(head_dim, base) if round(x) > piece]
    fits = [(b, a) for i, a in enumerate(ds) for b in ds[i + 1 :] if a + b - 2 * piece <= room]
    if fits:  # the slowest pair: the larger of the two smaller wavelengths, then the larger larger one
        b, a = max(fits, key=lambda p: (p[1], p[0]))
        return b, a, room
    raise ValueError(f"decoy: a window of {length} tokens holds no two RoPE wavelengths around the needle")


def confusable(rng: np.random.Generator, name: str, avoid: list[str]) -> str:
    """``name`` with one letter changed (to another letter), not in ``avoid``."""
    for _ in range(64):
        p = int(rng.integers(len(name)))
        out = name[:p] + LETTERS[(LETTERS.index(name[p]) + int(rng.integers(1, 26))) % 26] + name[p + 1 :]
        if out not in avoid:
            return out
    raise ValueError(f"decoy: no one-letter variant of {name!r}")


def draw(seed: int, length: int, i: int, encode=None) -> dict:
    """The i-th draw of a length: the names (the needle's, two other words, two one-letter variants), the values
    (the decoys' of as many tokens as the true one), where the needle sits, a seed for the haystack."""
    rng = np.random.default_rng([seed, EVAL, 13, length, i])
    names = distinct(rng, random_word, 3)
    close = [confusable(rng, names[0], names)]
    close.append(confusable(rng, names[0], names + close))
    width = None if encode is None else len(encode(" " + "0" * DIGITS))
    for _ in range(64):
        values = distinct(rng, lambda r: random_number(r, DIGITS), 3)
        if width is None or all(len(encode(" " + v)) == width for v in values):
            break
    return {
        "names": names,
        "close": close,
        "values": values,
        "at": float(rng.random()),
        "seed": int(rng.integers(2**31)),
    }


def prompt(length: int, tier: int, d: dict, head_dim: int, base: float, haystack=None, encode=None) -> Prompt:
    """One prompt of a draw at ``tier``: decoy, needle, decoy at exact start-to-start distances, then the question."""
    before, after, _ = plan(length, head_dim, base, encode)
    others = d["names"][1:] if tier == 1 else d["close"]
    true, wrong = d["values"][0], d["values"][1:]
    names, values = [others[0], d["names"][0], others[1]], [wrong[0], true, wrong[1]]  # decoy, needle, decoy
    texts = [NEEDLE.format(name=n, value=v) for n, v in zip(names, values)]
    L = [units(t, encode) for t in texts]
    question = f"{d['names'][0]}:"
    room = length - sum(L) - tail_units(question, true, encode)
    # insert k starts at its haystack offset plus the units of the inserts before it: offsets for exact distances
    lo, hi = before - L[0], room - (after - L[1])
    if hi < lo:
        raise ValueError(f"decoy: a window of {length} tokens cannot hold these names at distances {before}, {after}")
    a = lo + int(round(d["at"] * (hi - lo)))
    offsets = [a - (before - L[0]), a, a + (after - L[1])]
    rng = np.random.default_rng(d["seed"])
    tokens, starts, answers = lay_out(
        length, [(o / room, t) for o, t in zip(offsets, texts)], question, true, rng, haystack, encode, whole=True
    )
    if (starts[1] - starts[0], starts[2] - starts[1]) != (before, after):
        raise AssertionError(f"decoy laid out at {starts}, not {before} and {after} apart")  # a layout defect
    meta = {"tier": tier}
    if encode is not None:  # each candidate's ids, as many as the slot's
        meta["slot"] = {v: encode(" " + v).tolist() for v in d["values"]}
    return Prompt(tokens, "compact", starts, answers, [true], list(wrong), meta)


class DecoyTask(Task):
    name = "decoy"
    reads_stream = False  # its haystack: filler, or the whole split (haystack=corpus)
    description = "a needle between two decoys a RoPE wavelength away, their names other words or one letter off"
    metrics = DigitTiers.tier_metrics(
        "decoy",
        ("the decoys' names other words", "their names the needle's, one letter changed"),
        "credit of the needle's value ranked above both decoys' values",
        chance=3,
    )
    fields = {
        **DigitTiers.tier_fields,
        "distances": "the wavelengths (rounded, in tokens): decoy before to needle, needle to the decoy after",
        "rotation": "head_dim and base the wavelengths are computed for",
    }
    options = {"trials": 30, "haystack": "filler", "head_dim": 32, "base": 10000.0}
    headline = "decoy_t1"
    any_tokenizer = True
    summary = ("decoy_t1", "decoy_t2")
    order = 67

    def check(self, options, lengths, context, n_tokens, protocol):
        check_haystack(options, "decoy", lengths, n_tokens)
        check_int(options, "decoy", "trials")
        check_int(options, "decoy", "head_dim")
        if options["head_dim"] % 2 or not float(options["base"]) > 1:
            raise UsageError(f"decoy: head_dim must be even and base > 1, got {options['head_dim']}, {options['base']}")
        for L in lengths:
            try:
                plan(L, options["head_dim"], float(options["base"]))
            except ValueError as e:
                raise UsageError(str(e)) from None

    def protocol(self, options, protocol):
        return options["haystack"], {k: options[k] for k in ("trials", "head_dim", "base")}

    def measure(self, ctx, length: int) -> dict:
        o = ctx.options
        hay = ctx.split_tokens if o["haystack"] == "corpus" else None
        encode = encoder(ctx)
        hd, base = int(o["head_dim"]), float(o["base"])
        draws = [draw(ctx.seed, length, i, encode) for i in range(o["trials"])]
        metrics, intervals, credit = {}, {}, {}
        for tier in TIERS:
            prompts = prompts_of(lambda x, tier=tier: prompt(length, tier, x, hd, base, hay, encode), draws)
            credit[tier] = [s[0] for s in ranking_scores(ctx, prompts)]
            metrics[f"decoy_t{tier}"], intervals[f"decoy_t{tier}"] = summarize([[c] for c in credit[tier]], True)
        before, after, _ = plan(length, hd, base, encode)
        return {
            "status": "ok",
            "reason": None,
            "metrics": metrics,
            "intervals": intervals,
            "details": {
                "haystack": o["haystack"],
                "trials": o["trials"],
                "distances": [before, after],
                "rotation": {"head_dim": hd, "base": base},
                **tier_details(credit[1], credit[2]),
                "tokens": "bytes" if encode is None else type(ctx.tokenizer).__name__,
            },
        }


register_task(DecoyTask())
