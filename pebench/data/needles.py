"""Retrieval documents: the passkey prompt (Mohtashami & Jaggi 2023, as used by PI and YaRN) and repeated random
strings, as byte arrays. Evaluation tasks build their prompts here; training mixes them in (``train.needles``).

Keys and strings come from numpy generators seeded with a *stream tag*, so training documents (tag ``TRAIN``)
and evaluation prompts (tag ``EVAL``) never share a random stream.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, NamedTuple, Optional

import numpy as np

from ..util.registry import Registry

TASK = (
    "There is an important info hidden inside a lot of irrelevant text. Find it and memorize them. "
    "I will quiz you about the important information there."
)
FILLER = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
NEEDLE = "The pass key is {key}. Remember it. {key} is the pass key."
QUESTION = "What is the pass key? The pass key is"
KEY_DIGITS = 5
ALPHABET = np.frombuffer(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", dtype=np.uint8)
TRAIN, EVAL = 0x7472, 0x6576  # stream tags ('tr', 'ev')
FORMS = ("standard", "compact")


def _b(s: str) -> np.ndarray:
    return np.frombuffer(s.encode("ascii"), dtype=np.uint8)


class Passkey(NamedTuple):
    tokens: np.ndarray  # exactly `length` bytes; the last KEY_DIGITS are the key
    key: str
    form: str  # standard (task sentence first) | compact (needle and question only)
    needle_start: int  # index of the needle's first byte
    depth: float
    answer: int = KEY_DIGITS  # tokens of the key at the window's end (an outside tokenizer's may differ)


def fixed_bytes(form: str) -> int:
    """Bytes of a passkey window that are not haystack."""
    needle = len(NEEDLE.format(key="0" * KEY_DIGITS))
    parts = needle + len(QUESTION) + KEY_DIGITS + 4  # and the four spaces between the pieces
    return parts + (len(TASK) + 1 if form == "standard" else 0)


def choose_form(form: str, need_standard: int, need_compact: int, length: int) -> Optional[str]:
    """The prompt form of a window (the one rule of every retrieval task): ``form`` itself (None where it does not
    fit), or for ``auto`` the standard form where it leaves at least half the window to the haystack, else the
    compact one; ``need_*``: the tokens the form needs, its least haystack included."""
    if form == "standard":
        return "standard" if need_standard <= length else None
    if form == "compact" or 2 * need_standard > length:
        return "compact" if need_compact <= length else None
    return "standard"


def passkey_form(length: int) -> Optional[str]:
    """``choose_form`` for the byte passkey: the compact form needs one haystack byte at least."""
    return choose_form("auto", fixed_bytes("standard"), fixed_bytes("compact") + 1, length)


def fill(haystack: Optional[np.ndarray], room: int, filler: Optional[np.ndarray] = None) -> np.ndarray:
    """``room`` tokens of haystack: ``filler`` (default: the filler sentence's bytes) repeated when ``haystack`` is
    None, else the given tokens cut to the room."""
    if haystack is None:
        filler = _b(FILLER + " ") if filler is None else filler
        return np.tile(filler, room // len(filler) + 1)[:room]
    hay = np.asarray(haystack[:room])
    if len(hay) < room:
        raise ValueError(f"haystack of {len(hay)} tokens is shorter than the {room} needed")
    return hay


def random_key(rng: np.random.Generator) -> str:
    return "".join(str(d) for d in rng.integers(0, 10, size=KEY_DIGITS))


def passkey_window(
    length: int, depth: float, key: str, haystack: Optional[np.ndarray] = None, form: Optional[str] = None
) -> Passkey:
    """A window of exactly ``length`` bytes: [task] haystack[:a] needle haystack[a:] question key, with the needle
    at fraction ``depth`` of the haystack (0: first, 1: last before the question). ``haystack`` is the text to
    fill with (default: the filler sentence repeated); it is cut to the room left."""
    form = form or passkey_form(length)
    if form is None:
        raise ValueError(f"a passkey window needs more than {fixed_bytes('compact')} bytes, got {length}")
    room = length - fixed_bytes(form)
    if room < 0 or not 0.0 <= depth <= 1.0:
        raise ValueError(f"no room for the {form} passkey form in {length} bytes (depth {depth})")
    hay = fill(haystack, room)
    a = int(round(depth * room))
    sp = _b(" ")
    head = [_b(TASK), sp] if form == "standard" else []
    needle = _b(NEEDLE.format(key=key))
    parts = head + [hay[:a], sp, needle, sp, hay[a:], sp, _b(QUESTION), sp, _b(key)]
    tokens = np.concatenate(parts)
    assert len(tokens) == length, (len(tokens), length)
    start = sum(len(p) for p in parts[: len(head) + 2])
    return Passkey(tokens, key, form, start, depth)


def token_pieces(encode, key: str, form: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(head, needle, question, answer) of a passkey prompt as an outside tokenizer's ids, each piece encoded on its
    own with its leading space, so the window is an exact number of tokens and the answer's tokens are known."""
    head = encode(TASK) if form == "standard" else np.zeros(0, dtype=np.int64)
    return head, encode(" " + NEEDLE.format(key=key)), encode(" " + QUESTION), encode(" " + key)


def token_passkey(encode, length: int, depth: float, key: str, haystack: Optional[np.ndarray] = None) -> Passkey:
    """A passkey window of exactly ``length`` tokens of an outside tokenizer (``encode``: text -> ids): the byte
    form's pieces, the haystack cut at token granularity (the filler's tokens repeated, or ``haystack`` ids); its
    ``answer`` says how many tokens the key takes at the end."""
    pieces = {f: token_pieces(encode, key, f) for f in FORMS}
    fixed = {f: sum(len(p) for p in pieces[f]) for f in FORMS}
    form = choose_form("auto", fixed["standard"], fixed["compact"] + 1, length)
    if form is None:
        raise ValueError(f"a passkey window needs more than {fixed['compact']} tokens, got {length}")
    head, needle, question, answer = pieces[form]
    room = length - fixed[form]
    hay = fill(haystack, room, encode(" " + FILLER))
    a = int(round(depth * room))
    tokens = np.concatenate([head, hay[:a], needle, hay[a:], question, answer]).astype(np.int64)
    return Passkey(tokens, key, form, len(head) + a, depth, len(answer))


class Copy(NamedTuple):
    tokens: np.ndarray
    first: int  # index of the first copy
    second: int  # index of the second copy (= first + distance)
    string: np.ndarray


def random_string(rng: np.random.Generator, n: int) -> np.ndarray:
    return ALPHABET[rng.integers(0, len(ALPHABET), size=n)]


def copy_window(background: np.ndarray, string: np.ndarray, first: int, distance: int) -> Copy:
    """``background`` with ``string`` written over it at ``first`` and again ``distance`` tokens later."""
    n = len(string)
    if distance < n or first < 0 or first + distance + n > len(background):
        raise ValueError(
            f"copies of {n} bytes at {first} and {first + distance} do not fit {len(background)} bytes "
            "without overlapping"
        )
    tokens = np.array(background, copy=True)  # bytes, or an outside tokenizer's ids
    tokens[first : first + n] = string
    tokens[first + distance : first + distance + n] = string
    return Copy(tokens, first, first + distance, string)


@dataclass(frozen=True)
class DocKind:
    """A kind of retrieval training window: ``make(rng, background, k, lengths)`` -> the window's bytes, with ``k``
    a string length drawn from ``lengths`` (lo, hi) first when ``string`` (else both None; ``make`` may then return
    None where the window is too short for it, and a ``copy`` window is made instead)."""

    name: str
    make: Callable[..., Optional[np.ndarray]]
    description: str
    string: bool = True


DOC_KINDS: Registry[DocKind] = Registry("training-document kind")


def doc_kind(name: str, description: str, string: bool = True):
    """Register a kind of training window (``train.needle_kinds`` / ``induction_kinds`` name it)."""

    def deco(fn):
        DOC_KINDS.add(DocKind(name, fn, description, string))
        return fn

    return deco


def tiered_document(rng: np.random.Generator, background: np.ndarray, need, draw, prompt) -> Optional[np.ndarray]:
    """A training window of a task of two tiers: a tier drawn, then a draw (``draw(rng)``) and its prompt
    (``prompt(n, tier, draw, haystack)``) over the row's own text half the time, filler otherwise; None where the
    window is shorter than the tier's ``need(tier)``."""
    n = len(background)
    tier = int(rng.integers(1, 3))
    if need(tier) >= n:
        return None
    d = draw(rng)
    return prompt(n, tier, d, None if rng.random() < 0.5 else background).tokens


@doc_kind("passkey", "a passkey window (random depth and key; the filler or the background text as haystack)", False)
def _passkey_doc(rng, background, k, lengths):
    n = len(background)
    if passkey_form(n) is None:
        return None
    hay = None if rng.random() < 0.5 else background
    return passkey_window(n, float(rng.random()), random_key(rng), hay).tokens


@doc_kind("copy", "a random string written twice over the background text, at a random distance in the window")
def _copy_doc(rng, background, k, lengths):
    n = len(background)
    distance = int(rng.integers(k, n - k + 1))
    first = int(rng.integers(0, n - k - distance + 1))
    return copy_window(background, random_string(rng, k), first, distance).tokens


@doc_kind("repeat", "a random string immediately followed by its repeat, the rest random letters (dense copying)")
def _repeat_doc(rng, background, k, lengths):
    out = random_string(rng, len(background))
    out[: 2 * k] = np.tile(random_string(rng, k), 2)
    return out


@doc_kind("periodic", "a random string repeated with its own period to fill the window")
def _periodic_doc(rng, background, k, lengths):
    n = len(background)
    return np.tile(random_string(rng, k), n // k + 1)[:n]


@doc_kind("pairs", "random strings, each immediately followed by its repeat (the induction warm-up's data)")
def _pairs_doc(rng, background, k, lengths):
    return pairs_window(rng, len(background), lengths)


@doc_kind("alternate", "two random letters alternating (rewards attending to the previous token)")
def _alternate_doc(rng, background, k, lengths):
    n = len(background)
    return np.tile(random_string(rng, 2), n // 2 + 1)[:n]


def training_document(
    rng: np.random.Generator, background: np.ndarray, copy_lengths: tuple[int, int], kinds: Optional[dict] = None
) -> np.ndarray:
    """One retrieval training window of ``len(background)`` bytes, of a kind (``DOC_KINDS``) drawn with the weights
    ``kinds`` (default: passkey and copy, half each). Strings are at most half the window."""
    n = len(background)
    if kinds:
        names = list(kinds)
        w = np.array([float(kinds[k]) for k in names])
        kind = DOC_KINDS.get(names[int(rng.choice(len(names), p=w / w.sum()))])
    else:
        kind = DOC_KINDS.get("passkey" if rng.random() < 0.5 else "copy")
    if not kind.string:
        out = kind.make(rng, background, None, None)
        if out is not None:
            return out
        kind = DOC_KINDS.get("copy")  # too short for its kind: a copy window instead
    hi = min(copy_lengths[1], n // 2)  # both copies fit the window
    k = int(rng.integers(min(copy_lengths[0], hi), hi + 1))
    return kind.make(rng, background, k, (min(copy_lengths[0], hi), hi))


def pairs_window(
    rng: np.random.Generator, n: int, lengths: tuple[int, int], repeats: Optional[list] = None
) -> np.ndarray:
    """``n`` bytes of random strings (lengths drawn from [lo, hi]), each immediately followed by its repeat; the
    last pair is cut at the window's end. ``repeats``, if given, gets each repeat's (start, end) appended."""
    out, i = np.empty(n, dtype=np.uint8), 0
    while i < n:
        k = int(rng.integers(lengths[0], lengths[1] + 1))
        s = random_string(rng, k)
        pair = np.concatenate([s, s])[: n - i]
        out[i : i + len(pair)] = pair
        if repeats is not None and len(pair) > k:
            repeats.append((i + k, i + len(pair)))
        i += len(pair)
    return out


def needle_rows(seed: int, step: int, batch_size: int, fraction: float) -> np.ndarray:
    """Which rows of batch ``step`` are retrieval documents: a seeded draw, the same for every scheme."""
    if fraction <= 0:
        return np.zeros(batch_size, dtype=bool)
    rng = np.random.default_rng([seed, step, TRAIN, 0])
    return rng.random(batch_size) < fraction


def mix_needles(
    chunk: np.ndarray,
    seed: int,
    step: int,
    fraction: float,
    copy_lengths: tuple[int, int],
    kinds: Optional[dict] = None,
) -> np.ndarray:
    """Replace the drawn rows of a training batch (rows of context+1 bytes) by retrieval documents built over the
    row's own text; keys and strings from the training stream (never the evaluation one)."""
    rows = np.flatnonzero(needle_rows(seed, step, len(chunk), fraction))
    if len(rows) == 0:
        return chunk
    out = np.array(chunk, copy=True)
    for r in rows:
        rng = np.random.default_rng([seed, step, TRAIN, 1, int(r)])
        out[r] = training_document(rng, chunk[r], copy_lengths, kinds)
    return out
