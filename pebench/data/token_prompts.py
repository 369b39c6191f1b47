"""Retrieval prompts in an outside model's tokens (``pebench eval --hf``): the content of ``data.ruler``'s byte
prompts, each piece encoded on its own by the model's tokenizer (``encode``: text -> ids; the spaces the pieces
carry are theirs), the haystack (the filler's tokens repeated, or evaluation-split ids) cut at token granularity so a
prompt is exactly ``length`` tokens. ``token_assemble`` lays a prompt out; ``vt_token_prompt`` and
``mqar_token_prompt`` are variable tracking and MQAR in it (the index task's prompt is built in its task module);
``ruler._token_niah_prompt`` is the needle's own older form of the same rule."""

from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from .needles import FILLER, choose_form, fill
from .ruler import (
    MQAR_KEY,
    MQAR_VALUE,
    VT_ASK,
    VT_HEAD,
    Prompt,
    assemble,
    distinct,
    fill_source,
    mqar_draw,
    random_name,
    random_number,
    vt_layout,
    vt_statements,
)

Encode = Callable[[str], np.ndarray]
Pieces = list[tuple[str, bool]]  # (text, scored): a scored piece's tokens are an answer


def token_assemble(
    encode: Encode,
    length: int,
    inserts: list[tuple[float, Pieces]],
    tail: Pieces,
    rng: np.random.Generator,
    haystack=None,
    head: str = "",
    whole: bool = False,
) -> tuple[np.ndarray, list[int], list[tuple[int, int]]]:
    """[head] hay ins hay ins ... hay tail in tokens: insert i at fraction ``inserts[i][0]`` of the haystack (equal
    fractions keep the given order). Returns the ids (exactly ``length``), each insert's start (in the given order)
    and the [start, stop) of every scored piece in window order. A scored piece that begins with a space-only token
    keeps that token as unscored context, unless ``whole`` (a ranking slot, filled by candidates of one width)."""
    space = encode(" ")
    enc = [(d, [(encode(t), s) for t, s in ps]) for d, ps in inserts]
    tail_ids = [(encode(t), s) for t, s in tail]
    head_ids = encode(head) if head else np.zeros(0, dtype=np.int64)
    used = len(head_ids) + sum(len(x) for _, ps in enc for x, _ in ps) + sum(len(x) for x, _ in tail_ids)
    room = length - used
    if room < 0:
        raise ValueError(f"the prompt's pieces take {used} tokens; the window has {length}")
    hay = fill(fill_source(haystack, length, rng), room, encode(" " + FILLER))
    parts, starts, answers, prev = [head_ids], [0] * len(enc), [], 0
    pos = len(head_ids)

    def put(pieces) -> None:
        nonlocal pos
        for ids, scored in pieces:
            if scored:
                lead = (
                    len(space)
                    if not whole and 0 < len(space) < len(ids) and np.array_equal(ids[: len(space)], space)
                    else 0
                )
                answers.append((pos + lead, pos + len(ids)))
            parts.append(ids)
            pos += len(ids)

    for i in sorted(range(len(enc)), key=lambda i: enc[i][0]):
        a = max(prev, min(room, int(round(enc[i][0] * room))))
        parts.append(hay[prev:a])
        pos += a - prev
        starts[i], prev = pos, a
        put(enc[i][1])
    parts.append(hay[prev:])
    pos += room - prev
    put(tail_ids)
    tokens = np.concatenate(parts).astype(np.int64)
    assert len(tokens) == length, (len(tokens), length)
    return tokens, starts, answers


def lay_out(
    length: int,
    texts: list[tuple[float, str]],
    question: str,
    answer: str,
    rng: np.random.Generator,
    haystack=None,
    encode: Optional[Encode] = None,
    whole: bool = False,
) -> tuple[np.ndarray, list[int], list[tuple[int, int]]]:
    """A prompt of inserts at depths, then "QUESTION ANSWER" ending the window: in bytes (``ruler.assemble``) or,
    with ``encode``, in an outside tokenizer's tokens (each insert and the question after a space, the answer a word
    of its own). Returns the tokens, the inserts' starts and the answer's [start, stop)."""
    if encode is None:
        tokens, starts = assemble(length, texts, question + " " + answer, fill_source(haystack, length, rng))
        return tokens, starts, [(length - len(answer), length)]
    tail = [(" " + question, False), (" " + answer, True)]
    return token_assemble(encode, length, [(d, [(" " + t, False)]) for d, t in texts], tail, rng, haystack, whole=whole)


def _need(encode: Encode, inserts: list[str], tail: str, head: str = "") -> int:
    """Tokens a prompt takes besides its haystack (at least one haystack token)."""
    return (len(encode(head)) if head else 0) + sum(len(encode(" " + x)) for x in inserts) + len(encode(tail)) + 1


def vt_token_form(encode: Encode, form: str, length: int, chains: int, hops: int) -> Optional[str]:
    """``ruler.vt_form`` counted in an outside tokenizer's tokens."""

    def need(fm: str) -> int:
        ins, tail, head = vt_layout(fm, chains, hops)
        return _need(encode, ins, " " + tail, head)

    return choose_form(form, need("standard"), need("compact"), length)


def vt_token_prompt(
    encode: Encode, rng: np.random.Generator, length: int, form: str, chains: int, hops: int, haystack=None
) -> Prompt:
    """``ruler.vt_prompt`` in tokens: the same chains and question; every name takes as many tokens as the first (drawn
    until so), so the answer slot holds any of them (``meta['slot']``: each name's ids)."""
    fm = vt_token_form(encode, form, length, chains, hops)
    if fm is None:
        raise ValueError(f"vt with {chains} chains of {hops} hops ({form} form) does not fit {length} tokens")
    first = random_name(rng)
    width = len(encode(" " + first))
    names = [first] + distinct(
        rng, random_name, chains * (hops + 1) - 1, [first], lambda x: len(encode(" " + x)) == width
    )
    values = distinct(rng, lambda r: random_number(r, 5), chains)
    inserts = [(d, [(" " + text, False)]) for d, text in vt_statements(rng, fm, names, values, hops)[0]]
    tail = [(" " + VT_ASK[fm].format(value=values[0], n=hops + 1), False), (" " + names[0], True)]
    tokens, starts, answers = token_assemble(
        encode, length, inserts, tail, rng, haystack, VT_HEAD if fm == "standard" else "", whole=True
    )
    p = Prompt(tokens, fm, starts, answers, names[: hops + 1], names[hops + 1 :], {"names": names, "values": values})
    p.meta["slot"] = {x: encode(" " + x).tolist() for x in names}
    return p


def mqar_token_need(encode: Encode, pairs: int, queries: int) -> int:
    """Tokens an MQAR prompt takes besides its gaps, at pieces of the widest kind ("zzz=", "999")."""
    key, value = "z" * MQAR_KEY + "=", "9" * MQAR_VALUE
    one = len(encode(" " + key)) + len(encode(value))
    return pairs * one + queries * one + queries


def mqar_token_prompt(
    encode: Encode, rng: np.random.Generator, length: int, pairs: int, queries: int, haystack=None
) -> Prompt:
    """``ruler.mqar_prompt`` in tokens: the pairs block first, then the queried keys at evenly spread depths (the
    last ends the window); each pair is " key=" then its value, encoded apart in the block and in the queries alike,
    and the queried values' tokens are the answers."""
    if queries > pairs:
        raise ValueError(f"mqar with {pairs} pairs cannot ask {queries} different keys")
    keys, vals, asked = mqar_draw(rng, pairs, queries)
    block = [piece for k, v in zip(keys, vals) for piece in ((f" {k}=", False), (v, False))]
    asks = [[(f" {keys[i]}=", False), (vals[i], True)] for i in asked]
    inserts = [(0.0, block)] + [((j + 1) / queries, q) for j, q in enumerate(asks[:-1])]
    tokens, starts, answers = token_assemble(encode, length, inserts, asks[-1], rng, haystack)
    return Prompt(
        tokens,
        "compact",
        starts,
        answers,
        [vals[i] for i in asked],
        meta={"keys": keys, "values": vals, "asked": asked},
    )
