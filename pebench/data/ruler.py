"""RULER-style prompts (Hsieh et al. 2024) and multi-query associative recall (Zoology, Arora et al. 2023) as byte
windows, for the ``niah``, ``vt`` and ``mqar`` evaluation tasks and the training documents of the same kinds.

Every prompt is exactly ``length`` bytes: haystack pieces with the inserts (needles, assignments, pairs, queries)
between them, one space on each side of an insert, ending with the question and its answer. Each builder returns
a :class:`Prompt` that says where every insert starts and which bytes are scored, so the tasks score and the tests
check the same positions. Two forms: ``standard`` (RULER's sentences) and ``compact`` (the same content in a few
bytes, for windows of a tiny model's 128-byte context); ``auto`` takes the standard form where it leaves at
least half the window to the haystack. Keys, values and names come from the caller's generator: the tasks seed
it from the evaluation stream, training documents from the training stream.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from .needles import FILLER, _b, choose_form, doc_kind, fill

FORMS = ("standard", "compact")
CONSONANTS, VOWELS = "bdfgklmnprstvz", "aeiou"
UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
VALUE_DIGITS = (5, 7)  # niah values: 5-7 digits (one count per prompt)
MAX_WORD = 6  # keys: 2-3 syllables

HEAD = (
    "Some special magic numbers are hidden within the following text. Make sure to memorize it. I will quiz "
    "you about the numbers afterwards."
)
NEEDLE = {"standard": "One of the special magic numbers for {key} is: {value}.", "compact": "{key}: {value}."}
ASK_ONE = {
    "standard": "What is the special magic number for {key} mentioned in the provided text? The special magic "
    "number for {key} mentioned in the provided text is",
    "compact": "{key}:",
}
ASK_ALL = {
    "standard": "What are all the special magic numbers for {key} mentioned in the provided text? The special "
    "magic numbers for {key} mentioned in the provided text are",
    "compact": "{key}:",
}
VT_HEAD = "Memorize and track the chain(s) of variable assignment hidden in the following text."
VT_VALUE = {"standard": "VAR {name} = {value}.", "compact": "{name} = {value}."}
VT_COPY = {"standard": "VAR {name} = VAR {source}.", "compact": "{name} = {source}."}
VT_ASK = {
    "standard": "Question: Find all variables that are assigned the value {value} in the text above. Answer: "
    "According to the chain(s) of variable assignment in the text above, {n} variables are assigned "
    "the value {value}, they are:",
    "compact": "{value} in",
}


@dataclass
class Prompt:
    tokens: np.ndarray  # exactly `length` bytes
    form: str
    inserts: list[int]  # start index of each insert, in the order the builder listed them
    answers: list[tuple[int, int]]  # [start, stop) of each teacher-forced answer
    texts: list[str]  # the answers' texts (ranking prompts: the true candidates)
    candidates: list[str] = field(default_factory=list)  # ranking prompts: the distractors (as long as the answer)
    meta: dict[str, Any] = field(default_factory=dict)


def random_word(rng: np.random.Generator) -> str:
    """A short pronounceable random word (2-3 consonant-vowel syllables)."""
    return "".join(
        CONSONANTS[rng.integers(len(CONSONANTS))] + VOWELS[rng.integers(len(VOWELS))]
        for _ in range(int(rng.integers(2, 4)))
    )


def distinct(rng: np.random.Generator, make, n: int, avoid=(), ok=None) -> list[str]:
    """``n`` different draws of ``make``, none in ``avoid`` (and each ``ok``, if given)."""
    out: list[str] = []
    while len(out) < n:
        s = make(rng)
        if s not in out and s not in avoid and (ok is None or ok(s)):
            out.append(s)
    return out


def random_number(rng: np.random.Generator, digits: int) -> str:
    return "".join(str(d) for d in rng.integers(0, 10, size=digits))


def random_name(rng: np.random.Generator, n: int = 5) -> str:
    return "".join(UPPER[i] for i in rng.integers(0, 26, size=n))


def fixed_bytes(inserts: list[str], tail: str, head: str = "") -> int:
    """Bytes of a window that are not haystack."""
    return (len(head) + 1 if head else 0) + sum(len(s) + 2 for s in inserts) + (len(tail) + 1 if tail else 0)


def assemble(
    length: int, inserts: list[tuple[float, str]], tail: str, haystack=None, head: str = ""
) -> tuple[np.ndarray, list[int]]:
    """[head] hay ins hay ins ... hay [tail] with single spaces around every insert: exactly ``length`` bytes, insert i
    at fraction ``inserts[i][0]`` of the haystack (equal fractions keep the given order). Returns the bytes and each
    insert's start index."""
    room = length - fixed_bytes([s for _, s in inserts], tail, head)
    if room < 0:
        raise ValueError(f"{len(inserts)} inserts and the question need {length - room} bytes; the window has {length}")
    hay = fill(haystack, room)
    sp = _b(" ")
    parts = [_b(head), sp] if head else []
    starts = [0] * len(inserts)
    pos, prev = sum(len(p) for p in parts), 0
    for i in sorted(range(len(inserts)), key=lambda i: inserts[i][0]):
        a = max(prev, min(room, int(round(inserts[i][0] * room))))
        parts += [hay[prev:a], sp]
        pos += a - prev + 1
        starts[i] = pos
        parts += [_b(inserts[i][1]), sp]
        pos += len(inserts[i][1]) + 1
        prev = a
    parts.append(hay[prev:])
    if tail:
        parts += [sp, _b(tail)]
    tokens = np.concatenate(parts).astype(np.uint8)
    assert len(tokens) == length, (len(tokens), length)
    return tokens, starts


# ----- needle in a haystack: single, multikey, multivalue, multiquery -----

NIAH_VARIANTS = ("single", "multikey", "multivalue", "multiquery")


def niah_layout(
    variant: str,
    form: str,
    keys: int,
    values: int,
    queries: int,
    digits: int = VALUE_DIGITS[1],
    key_len: int = MAX_WORD,
) -> tuple[list[str], str, str]:
    """(needles, tail, head) of the longest prompt of a variant, with placeholder keys and values."""
    k, v = "k" * key_len, "9" * digits
    needle = NEEDLE[form].format(key=k, value=v)
    head = HEAD if form == "standard" else ""
    if variant == "single":
        return [needle], ASK_ONE[form].format(key=k) + " " + v, head
    if variant == "multikey":
        return [needle] * keys, ASK_ONE[form].format(key=k) + " " + v, head
    if variant == "multivalue":
        return [needle] * values, ASK_ALL[form].format(key=k) + " " + v, head
    asked = ", ".join([k] * queries)
    if form == "compact":
        tail = " ".join(f"{k}: {v}." for _ in range(queries))
    else:
        tail = ASK_ALL[form].format(key=asked) + " " + ", ".join([v] * queries) + "."
    return [needle] * keys, tail, head


def niah_need(variant: str, form: str, keys: int, values: int, queries: int) -> int:
    """Bytes a prompt of the variant needs besides its haystack (at the longest keys and values)."""
    return fixed_bytes(*niah_layout(variant, form, keys, values, queries))


def niah_form(variant: str, form: str, length: int, keys: int, values: int, queries: int) -> Optional[str]:
    return choose_form(
        form,
        niah_need(variant, "standard", keys, values, queries),
        niah_need(variant, "compact", keys, values, queries),
        length,
    )


@dataclass
class NiahContent:
    """What a needle prompt says, before it is laid out in bytes or in an outside tokenizer's tokens: the needles in
    the order they are placed (the asked one first) with their depths, the head, and the tail as segments, each
    (text, whether it is an answer the model is scored on)."""

    pairs: list[tuple[str, str]]  # (key, value) of every needle, in the order of `values`
    order: list[int]  # pairs' indices in the order they are inserted (the asked one first)
    asked: list[int]
    inserts: list[tuple[float, str]]  # (depth, needle text), in `order`
    head: str
    tail: list[tuple[str, bool]]
    answers: list[str]  # the scored values (multivalue: the key's true values)
    digits: int


def niah_content(
    rng: np.random.Generator, variant: str, fm: str, depth: float, keys: int, values: int, queries: int
) -> NiahContent:
    """The needles, question and answers of one prompt of ``variant`` in form ``fm`` (the generator's draws: digits,
    keys, values, the asked keys, the other needles' depths)."""
    digits = int(rng.integers(VALUE_DIGITS[0], VALUE_DIGITS[1] + 1))
    n_keys = {"single": 1, "multikey": keys, "multivalue": 1, "multiquery": keys}[variant]
    ks = distinct(rng, random_word, n_keys)
    n_vals = values if variant == "multivalue" else n_keys
    vs = distinct(rng, lambda r: random_number(r, digits), n_vals)
    pairs = [(ks[0], v) for v in vs] if variant == "multivalue" else list(zip(ks, vs))
    order, asked = list(range(len(pairs))), [0]
    if variant == "multiquery":
        asked = [int(i) for i in rng.permutation(len(pairs))[:queries]]
        order = asked + [i for i in order if i not in asked]
    depths = [depth] + [float(rng.random()) for _ in order[1:]]
    inserts = [(d, NEEDLE[fm].format(key=pairs[i][0], value=pairs[i][1])) for d, i in zip(depths, order)]
    if variant == "multiquery":
        tail = multiquery_tail(fm, [pairs[i][0] for i in asked], [pairs[i][1] for i in asked])
    else:
        tail = [((ASK_ALL if variant == "multivalue" else ASK_ONE)[fm].format(key=ks[0]) + " ", False), (vs[0], True)]
    answers = list(vs) if variant == "multivalue" else [t for t, scored in tail if scored]
    return NiahContent(pairs, order, asked, inserts, HEAD if fm == "standard" else "", tail, answers, digits)


def niah_prompt(
    rng: np.random.Generator,
    variant: str,
    length: int,
    depth: float,
    form: str = "auto",
    keys: int = 4,
    values: int = 4,
    queries: int = 2,
    distractors: int = 3,
    haystack=None,
    encode=None,
) -> Prompt:
    """One needle-in-a-haystack prompt (in bytes; with ``encode``, an outside tokenizer's text -> ids, in its
    tokens: ``_token_niah_prompt``). The first listed needle (the asked one; multivalue: the first value; multiquery:
    the first queried key) sits at ``depth`` of the haystack, the others at uniform random depths. Teacher-forced
    variants score the value digits in ``answers``; multivalue ranks each true value (``texts``) against
    ``distractors`` random values of as many digits (``candidates``), one candidate in the answer slot at a time."""
    if encode is not None:
        return _token_niah_prompt(
            encode, rng, variant, length, depth, form, keys, values, queries, distractors, haystack
        )
    fm = niah_form(variant, form, length, keys, values, queries)
    if fm is None:
        raise ValueError(f"niah {variant} ({form} form) does not fit {length} bytes")
    c = niah_content(rng, variant, fm, depth, keys, values, queries)
    tail = "".join(t for t, _ in c.tail)
    tokens, starts = assemble(length, c.inserts, tail, fill_source(haystack, length, rng), c.head)
    t0, answers, at = length - len(tail), [], 0
    for text, scored in c.tail:
        if scored:
            answers.append((t0 + at, t0 + at + len(text)))
        at += len(text)
    return niah_result(rng, variant, tokens, fm, starts, answers, c, distractors)


def niah_result(rng, variant: str, tokens, fm: str, starts, answers, c: NiahContent, distractors: int) -> Prompt:
    """The Prompt of a laid-out needle prompt (``starts`` in insertion order), with multivalue's distractors drawn
    last (random values of the prompt's digits, none a true value)."""
    vs = [v for _, v in c.pairs]
    starts = [starts[c.order.index(i)] for i in range(len(c.pairs))]  # back to the order of `pairs`
    multivalue = variant == "multivalue"
    cands = distinct(rng, lambda r: random_number(r, c.digits), distractors, avoid=vs) if multivalue else []
    return Prompt(
        tokens,
        fm,
        starts,
        answers,
        c.answers,
        cands,
        {"variant": variant, "keys": [p[0] for p in c.pairs], "values": vs, "asked": c.asked, "digits": c.digits},
    )


def _token_niah_prompt(
    encode, rng, variant: str, length: int, depth: float, form, keys, values, queries, distractors, haystack
):
    """``niah_prompt`` in an outside tokenizer's tokens (``encode``: text -> ids): the same content, each piece
    encoded on its own with the space before it (a word's usual tokens), the haystack cut at token granularity (the
    filler's tokens repeated, or ``haystack`` ids), exactly ``length`` tokens. ``answers`` are the values' tokens
    (a tokenizer that writes the space before a number as a token of its own keeps it in the prompt, unscored: after
    "is" a model may rightly expect ":" there, as the needle reads); multivalue's values and distractors are drawn
    until each takes as many tokens as the first value, so one answer slot holds any of them (``meta['slot']``: each
    candidate's ids)."""
    fm = token_niah_form(encode, variant, form, length, keys, values, queries)
    if fm is None:
        raise ValueError(f"niah {variant} ({form} form) does not fit {length} tokens")
    for _ in range(64):  # multivalue: values of one token count (almost always the first draw)
        c = niah_content(rng, variant, fm, depth, keys, values, queries)
        if variant != "multivalue" or len({len(encode(" " + v)) for _, v in c.pairs}) == 1:
            break
    else:
        raise ValueError("niah multivalue: this tokenizer gave the values different token counts in 64 draws")
    head = encode(c.head) if c.head else np.zeros(0, dtype=np.int64)
    inserts = [(d, encode(" " + text)) for d, text in c.inserts]
    tail = [(encode(text), scored) for text, scored in _spaces_forward(c.tail)]
    room = length - len(head) - sum(len(x) for _, x in inserts) - sum(len(x) for x, _ in tail)
    if room < 0:
        raise ValueError(
            f"niah {variant}: its needles and question take {length - room} tokens; the window has {length}"
        )
    hay = fill(fill_source(haystack, length, rng), room, encode(" " + FILLER))
    parts, starts, prev, pos = [head], [0] * len(inserts), 0, len(head)
    for i in sorted(range(len(inserts)), key=lambda i: inserts[i][0]):
        a = max(prev, min(room, int(round(inserts[i][0] * room))))
        parts.append(hay[prev:a])
        starts[i], prev = pos + a - prev, a
        parts.append(inserts[i][1])
        pos = starts[i] + len(inserts[i][1])
    parts.append(hay[prev:])
    answers, at, space = [], length - sum(len(x) for x, _ in tail), encode(" ")
    for ids, scored in tail:
        if scored:  # the value's own tokens: a lone space token before it is context (a ranking slot stays whole)
            lead = len(space) if variant != "multivalue" and _starts_with(ids, space) else 0
            answers.append((at + lead, at + len(ids)))
        parts.append(ids)
        at += len(ids)
    tokens = np.concatenate(parts).astype(np.int64)
    assert len(tokens) == length, (len(tokens), length)
    p = niah_result(rng, variant, tokens, fm, starts, answers, c, distractors)
    if variant == "multivalue":
        width = answers[0][1] - answers[0][0]
        p.candidates = distinct(
            rng,
            lambda r: random_number(r, c.digits),
            distractors,
            avoid=list(p.texts),
            ok=lambda x: len(encode(" " + x)) == width,
        )
        p.meta["slot"] = {x: encode(" " + x).tolist() for x in [*p.texts, *p.candidates]}
    return p


def _starts_with(ids: np.ndarray, prefix: np.ndarray) -> bool:
    """Whether ``ids`` begin with ``prefix`` and hold more than it (a value encoded after a space-only token)."""
    return 0 < len(prefix) < len(ids) and bool(np.array_equal(ids[: len(prefix)], prefix))


def _spaces_forward(tail: list[tuple[str, bool]]) -> list[tuple[str, bool]]:
    """Tail segments with each segment's trailing space moved to the start of the next, so an answer is encoded
    as a word after a space (" 12345"), the way a tokenizer reads it in running text; the first segment, which
    follows the haystack, starts with a space too."""
    out, carry = [], " "
    for text, scored in tail:
        body = text.rstrip(" ")
        out.append(((carry + body.lstrip(" ")) if carry else body, scored))
        carry = " " if text.endswith(" ") else ""
    return out


def token_niah_form(encode, variant: str, form: str, length: int, keys: int, values: int, queries: int):
    """``niah_form`` counted in an outside tokenizer's tokens (the longest keys and values of the layout)."""

    def need(fm: str) -> int:
        ins, tail, head = niah_layout(variant, fm, keys, values, queries)
        return len(encode(head)) + sum(len(encode(" " + x)) for x in ins) + len(encode(" " + tail)) + 1

    return choose_form(form, need("standard"), need("compact"), length)


def multiquery_tail(form: str, keys: list[str], values: list[str]) -> list[tuple[str, bool]]:
    """The question and answers of a multiquery prompt as segments (text, scored). Compact: "k1: v1. k2: v2.";
    standard: RULER's question for all the keys, then "v1, v2."."""
    tail = [] if form == "compact" else [(ASK_ALL[form].format(key=", ".join(keys)) + " ", False)]
    for j, (k, v) in enumerate(zip(keys, values)):
        if form == "compact":
            tail.append(((" " if j else "") + f"{k}: ", False))
        tail += [(v, True), ("." if form == "compact" or j == len(values) - 1 else ", ", False)]
    return tail


def fill_source(haystack, length: int, rng: np.random.Generator):
    """A random stretch of ``haystack`` long enough for any window of ``length`` (None stays None: the filler)."""
    if haystack is None:
        return None
    start = int(rng.integers(0, max(1, len(haystack) - length + 1)))
    return np.asarray(haystack[start : start + length])


# ----- variable tracking -----


def vt_layout(form: str, chains: int, hops: int) -> tuple[list[str], str, str]:
    name, value = "N" * 5, "9" * 5
    ins = [VT_VALUE[form].format(name=name, value=value)] * chains
    ins += [VT_COPY[form].format(name=name, source=name)] * (chains * hops)
    tail = VT_ASK[form].format(value=value, n=hops + 1) + " " + name
    return ins, tail, VT_HEAD if form == "standard" else ""


def vt_form(form: str, length: int, chains: int, hops: int) -> Optional[str]:
    return choose_form(
        form,
        fixed_bytes(*vt_layout("standard", chains, hops)),
        fixed_bytes(*vt_layout("compact", chains, hops)),
        length,
    )


def vt_statements(rng: np.random.Generator, fm: str, names: list[str], values: list[str], hops: int):
    """The assignments of every chain (one per value, ``hops`` + 1 names each) at sorted random depths: (depth, text)
    per statement, and (chain, hop) of each."""
    inserts, where = [], []
    for c in range(len(values)):
        depths = np.sort(rng.random(hops + 1))
        chain = names[c * (hops + 1) : (c + 1) * (hops + 1)]
        for h in range(hops + 1):
            text = (
                VT_VALUE[fm].format(name=chain[0], value=values[c])
                if h == 0
                else VT_COPY[fm].format(name=chain[h], source=chain[h - 1])
            )
            inserts.append((float(depths[h]), text))
            where.append((c, h))
    return inserts, where


def vt_prompt(
    rng: np.random.Generator, length: int, form: str = "auto", chains: int = 2, hops: int = 2, haystack=None
) -> Prompt:
    """``chains`` chains of ``hops`` + 1 variables ("VAR A = 12345.", "VAR B = VAR A.", ...), every chain's
    statements in order at sorted random depths (the chains interleaved). The question asks for the first chain's
    value; ``texts`` are that chain's names (the true candidates), ``candidates`` the other chains' names; one name
    fills the answer slot at a time."""
    fm = vt_form(form, length, chains, hops)
    if fm is None:
        raise ValueError(f"vt with {chains} chains of {hops} hops ({form} form) does not fit {length} bytes")
    names = distinct(rng, random_name, chains * (hops + 1))
    values = distinct(rng, lambda r: random_number(r, 5), chains)
    inserts, where = vt_statements(rng, fm, names, values, hops)
    tail = VT_ASK[fm].format(value=values[0], n=hops + 1) + " " + names[0]
    tokens, starts = assemble(
        length, inserts, tail, fill_source(haystack, length, rng), VT_HEAD if fm == "standard" else ""
    )
    true = names[: hops + 1]
    return Prompt(
        tokens,
        fm,
        starts,
        [(length - 5, length)],
        true,
        names[hops + 1 :],
        {"names": names, "values": values, "statements": where},
    )


# ----- multi-query associative recall -----

MQAR_KEY, MQAR_VALUE = 3, 3  # bytes of a key (lowercase letters) and a value (digits)
PAIR = "{key}={value}"


def mqar_need(pairs: int, queries: int) -> int:
    """Bytes of a prompt besides its gaps: the pairs block and the queries."""
    one = MQAR_KEY + 1 + MQAR_VALUE
    return fixed_bytes([" ".join(["x" * one] * pairs)] + ["x" * one] * (queries - 1), "x" * one)


def mqar_draw(rng: np.random.Generator, pairs: int, queries: int) -> tuple[list[str], list[str], list[int]]:
    """An MQAR prompt's content: ``pairs`` distinct keys, a value each, and the ``queries`` keys asked (their indices,
    in the order asked)."""
    keys = distinct(rng, lambda r: "".join(chr(97 + i) for i in r.integers(0, 26, size=MQAR_KEY)), pairs)
    vals = [random_number(rng, MQAR_VALUE) for _ in range(pairs)]
    return keys, vals, [int(i) for i in rng.permutation(pairs)[:queries]]


def mqar_prompt(rng: np.random.Generator, length: int, pairs: int = 4, queries: int = 4, haystack=None) -> Prompt:
    """The pairs block "abc=123 def=456 ..." first, then ``queries`` of its keys (distinct, random order), each with
    its value, at evenly spread depths of the rest of the window (the last ends the window). Only the queried values'
    bytes are scored (``answers``)."""
    if queries > pairs or mqar_need(pairs, queries) > length:
        raise ValueError(f"mqar with {pairs} pairs and {queries} queries does not fit {length} bytes")
    keys, vals, asked = mqar_draw(rng, pairs, queries)
    block = " ".join(PAIR.format(key=k, value=v) for k, v in zip(keys, vals))
    asks = [PAIR.format(key=keys[i], value=vals[i]) for i in asked]
    inserts = [(0.0, block)] + [((j + 1) / queries, q) for j, q in enumerate(asks[:-1])]
    tokens, starts = assemble(length, inserts, asks[-1], fill_source(haystack, length, rng))
    starts.append(length - len(asks[-1]))
    answers = [(s + MQAR_KEY + 1, s + MQAR_KEY + 1 + MQAR_VALUE) for s in starts[1:]]
    return Prompt(
        tokens,
        "compact",
        starts,
        answers,
        [vals[i] for i in asked],
        meta={"keys": keys, "values": vals, "asked": asked},
    )


# ----- training documents (train.needle_kinds: niah, vt, mqar) -----


def _haystack(rng, background):
    return None if rng.random() < 0.5 else background


@doc_kind(
    "niah",
    "a RULER needle prompt (single, multikey, multivalue or multiquery; 1-4 keys, values and "
    "queries; the form that fits), answered",
    False,
)
def _niah_doc(rng, background, k, lengths):
    n = len(background)
    variant = NIAH_VARIANTS[int(rng.integers(len(NIAH_VARIANTS)))]
    keys, values = int(rng.integers(1, 5)), int(rng.integers(1, 5))
    queries = int(rng.integers(1, keys + 1))
    while niah_form(variant, "auto", n, keys, values, queries) is None:  # fewer needles until the window holds them
        if max(keys, values) == 1:
            return None
        keys, values = max(1, keys - 1), max(1, values - 1)
        queries = min(queries, keys)
    p = niah_prompt(rng, variant, n, float(rng.random()), "auto", keys, values, queries, 0, _haystack(rng, background))
    if variant == "multivalue":  # the answer slot holds one of the values, drawn
        s, e = p.answers[0]
        p.tokens[s:e] = _b(p.texts[int(rng.integers(len(p.texts)))])
    return p.tokens


@doc_kind(
    "vt",
    "a variable-tracking prompt (2 chains of 1-3 hops where they fit), answered with one of the chain's names",
    False,
)
def _vt_doc(rng, background, k, lengths):
    n = len(background)
    hops = int(rng.integers(1, 4))
    while hops > 0 and vt_form("auto", n, 2, hops) is None:
        hops -= 1
    if hops == 0:
        return None
    p = vt_prompt(rng, n, "auto", 2, hops, _haystack(rng, background))
    p.tokens[-5:] = _b(p.texts[int(rng.integers(len(p.texts)))])
    return p.tokens


@doc_kind("mqar", "multi-query associative recall: 2-8 key=value pairs, then queries of them over the text", False)
def _mqar_doc(rng, background, k, lengths):
    n = len(background)
    pairs = int(rng.integers(2, 9))
    while pairs > 1 and mqar_need(pairs, pairs) > n:
        pairs -= 1
    if pairs < 2:
        return None
    return mqar_prompt(rng, n, pairs, int(rng.integers(1, pairs + 1)), _haystack(rng, background)).tokens
