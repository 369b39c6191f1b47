"""Retrieval documents: the passkey prompt (Mohtashami & Jaggi 2023, as used by PI and YaRN) and repeated random
strings, as byte arrays. Evaluation tasks build their prompts here; training mixes them in (``train.needles``).

Keys and strings come from numpy generators seeded with a *stream tag*, so training documents (tag ``TRAIN``)
and evaluation prompts (tag ``EVAL``) never share a random stream.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np

TASK = ("There is an important info hidden inside a lot of irrelevant text. Find it and memorize them. "
        "I will quiz you about the important information there.")
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


def fixed_bytes(form: str) -> int:
    """Bytes of a passkey window that are not haystack."""
    needle = len(NEEDLE.format(key="0" * KEY_DIGITS))
    parts = needle + len(QUESTION) + KEY_DIGITS + 4  # and the four spaces between the pieces
    return parts + (len(TASK) + 1 if form == "standard" else 0)


def passkey_form(length: int) -> Optional[str]:
    """The standard template where at least half the window is left for the haystack, else the compact one
    (needle and question only); None where not even the compact form fits."""
    if 2 * fixed_bytes("standard") <= length:
        return "standard"
    return "compact" if fixed_bytes("compact") < length else None


def random_key(rng: np.random.Generator) -> str:
    return "".join(str(d) for d in rng.integers(0, 10, size=KEY_DIGITS))


def passkey_window(length: int, depth: float, key: str, haystack: Optional[np.ndarray] = None,
                   form: Optional[str] = None) -> Passkey:
    """A window of exactly ``length`` bytes: [task] haystack[:a] needle haystack[a:] question key, with the needle
    at fraction ``depth`` of the haystack (0: first, 1: last before the question). ``haystack`` is the text to
    fill with (default: the filler sentence repeated); it is cut to the room left."""
    form = form or passkey_form(length)
    if form is None:
        raise ValueError(f"a passkey window needs more than {fixed_bytes('compact')} bytes, got {length}")
    room = length - fixed_bytes(form)
    if room < 0 or not 0.0 <= depth <= 1.0:
        raise ValueError(f"no room for the {form} passkey form in {length} bytes (depth {depth})")
    if haystack is None:
        filler = _b(FILLER + " ")
        haystack = np.tile(filler, room // len(filler) + 1)
    hay = np.asarray(haystack[:room], dtype=np.uint8)
    if len(hay) < room:
        raise ValueError(f"haystack of {len(hay)} bytes is shorter than the {room} needed")
    a = int(round(depth * room))
    sp = _b(" ")
    head = [_b(TASK), sp] if form == "standard" else []
    needle = _b(NEEDLE.format(key=key))
    parts = head + [hay[:a], sp, needle, sp, hay[a:], sp, _b(QUESTION), sp, _b(key)]
    tokens = np.concatenate(parts)
    assert len(tokens) == length, (len(tokens), length)
    start = sum(len(p) for p in parts[:len(head) + 2])
    return Passkey(tokens, key, form, start, depth)


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
        raise ValueError(f"copies of {n} bytes at {first} and {first + distance} do not fit {len(background)} bytes "
                         "without overlapping")
    tokens = np.array(background, dtype=np.uint8, copy=True)
    tokens[first:first + n] = string
    tokens[first + distance:first + distance + n] = string
    return Copy(tokens, first, first + distance, string)


NEEDLE_KINDS = ("passkey", "copy", "repeat", "periodic", "pairs", "alternate")


def training_document(rng: np.random.Generator, background: np.ndarray, copy_lengths: tuple[int, int],
                      kinds: Optional[dict] = None) -> np.ndarray:
    """One retrieval training window of ``len(background)`` bytes, of a kind drawn with the weights ``kinds``
    (default: passkey and copy, half each):
    - ``passkey``: a passkey window (random depth and key; the filler or the background text as haystack);
    - ``copy``: a random string of ``copy_lengths`` bytes written twice over the background text, at a random
      distance inside the window;
    - ``repeat``: a random string immediately followed by its repeat, the rest random letters (dense copying);
    - ``periodic``: a random string repeated with its own period to fill the window;
    - ``pairs``: the window filled with random strings, each immediately followed by its repeat (dense copying at
      many distances in one window: the data of the induction warm-up, ``train.induction_steps``);
    - ``alternate``: two random letters alternating (each token is the one two back: rewards attending to the
      previous token, the first half of an induction circuit).
    Strings are at most half the window."""
    n = len(background)
    if kinds:
        names = list(kinds)
        w = np.array([float(kinds[k]) for k in names])
        kind = names[int(rng.choice(len(names), p=w / w.sum()))]
    else:
        kind = "passkey" if rng.random() < 0.5 else "copy"
    if kind == "passkey" and passkey_form(n) is not None:
        hay = None if rng.random() < 0.5 else background
        return passkey_window(n, float(rng.random()), random_key(rng), hay).tokens
    hi = min(copy_lengths[1], n // 2)  # both copies fit the window
    k = int(rng.integers(min(copy_lengths[0], hi), hi + 1))
    if kind == "repeat":
        out = random_string(rng, n)
        out[:2 * k] = np.tile(random_string(rng, k), 2)
        return out
    if kind == "periodic":
        return np.tile(random_string(rng, k), n // k + 1)[:n]
    if kind == "pairs":
        return pairs_window(rng, n, (min(copy_lengths[0], hi), hi))
    if kind == "alternate":
        return np.tile(random_string(rng, 2), n // 2 + 1)[:n]
    distance = int(rng.integers(k, n - k + 1))
    first = int(rng.integers(0, n - k - distance + 1))
    return copy_window(background, random_string(rng, k), first, distance).tokens


def pairs_window(rng: np.random.Generator, n: int, lengths: tuple[int, int],
                 repeats: Optional[list] = None) -> np.ndarray:
    """``n`` bytes of random strings (lengths drawn from [lo, hi]), each immediately followed by its repeat; the
    last pair is cut at the window's end. ``repeats``, if given, gets each repeat's (start, end) appended."""
    out, i = np.empty(n, dtype=np.uint8), 0
    while i < n:
        k = int(rng.integers(lengths[0], lengths[1] + 1))
        s = random_string(rng, k)
        pair = np.concatenate([s, s])[:n - i]
        out[i:i + len(pair)] = pair
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


def mix_needles(chunk: np.ndarray, seed: int, step: int, fraction: float, copy_lengths: tuple[int, int],
                kinds: Optional[dict] = None) -> np.ndarray:
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
