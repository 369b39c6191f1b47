"""One parser for every comma list a user types (``--lengths 512,2048``, ``--pe rope,alibi``, ``--seeds 0,1``):
the same rules everywhere, and one line saying what was wrong and what is allowed."""

from __future__ import annotations

import re
from typing import Any, Callable, Optional, Sequence

from .errors import UsageError

_KIND = {int: "integers", float: "numbers", str: "names"}


def parse_list(
    spec: Any,
    what: str,
    item: Callable[[str], Any] = str,
    *,
    kind: Optional[str] = None,
    lo: Optional[float] = None,
    hi: Optional[float] = None,
    unique: bool = True,
) -> Optional[list]:
    """``spec`` (a comma-separated string, or a list from a config) -> a list of ``item`` values; None stays
    None. Empty items, values outside [lo, hi] and (with ``unique``) repeats are errors naming ``what``."""
    if spec is None:
        return None
    parts: Sequence = spec if isinstance(spec, (list, tuple)) else str(spec).split(",")
    kind = kind or _KIND.get(item, "values")
    texts = [str(p).strip() for p in parts]
    if not texts or any(not t for t in texts):
        raise UsageError(f"{what} must be a comma-separated list of {kind}, got {spec!r}")
    try:
        values = [item(t) for t in texts]
    except ValueError:
        raise UsageError(f"{what} must be {kind}, got {spec!r}") from None
    bound = [v for v in values if (lo is not None and v < lo) or (hi is not None and v > hi)]
    if bound:
        rng = f">= {_num(lo)}" if hi is None else f"<= {_num(hi)}" if lo is None else f"in [{_num(lo)}, {_num(hi)}]"
        raise UsageError(f"{what} must be {rng} each, got {bound[0]!r} in {spec!r}")
    if unique and len(set(values)) != len(values):
        raise UsageError(f"{what} lists a value twice: {spec!r}")
    return values


def _num(x: float) -> str:
    """A bound as a person writes it: an integer in full, anything else in its short form."""
    return str(x) if isinstance(x, int) else f"{x:g}"


def parse_assignment(spec: str, what: str) -> tuple[str, str]:
    """``NAME=VALUE`` -> (NAME, VALUE), both stripped and non-empty."""
    name, sep, value = spec.partition("=")
    if not sep or not name.strip() or not value.strip():
        raise UsageError(f"{what} takes NAME=VALUE, got {spec!r}")
    return name.strip(), value.strip()


def parse_spec(item: str, what: str, keys: Sequence[str]) -> tuple[str, dict[str, str]]:
    """``NAME[:key=value...]`` (``yarn:factor=4:beta_fast=16``), the one form of a named thing with settings in
    every command -> (NAME, {key: value text}); a key outside ``keys``, a repeat or a pair without ``=`` is one
    line naming ``what`` and the keys allowed."""
    name, *pairs = [p.strip() for p in item.split(":")]
    params: dict[str, str] = {}
    for p in pairs:
        k, eq, v = (x.strip() for x in p.partition("="))
        if not eq or not v or k not in keys or k in params:
            allowed = ", ".join(keys) or "no settings"
            raise UsageError(f"{what} {item}: {p!r} is not a setting; {name} takes {allowed} as key=value")
        params[k] = v
    return name, params


SCALING_ALIASES = {"dynamic": "dynamic-ntk"}  # another spelling (transformers' rope_type) -> the one name pebench uses


def canonical_scaling(item: str) -> tuple[str, Optional[str]]:
    """One ``--rope-scaling`` item under the one name pebench's runs, outside models, records and reports use
    (``dynamic`` -> ``dynamic-ntk``, settings kept), and a note when another spelling was given (None otherwise)."""
    name, sep, rest = item.strip().partition(":")
    new = SCALING_ALIASES.get(name.strip())
    if new is None:
        return item, None
    return new + sep + rest, f"note: --rope-scaling {name.strip()} is read as {new}, the name pebench's records use"


def scaling_notes(spec: Optional[str]) -> list[str]:
    """The notes of every item of a ``--rope-scaling`` list given under another spelling (none for a bad list: its
    parser names the error)."""
    items = [x for x in (spec or "").split(",") if x.strip()]
    return [note for x in items if (note := canonical_scaling(x)[1]) is not None]


def canonical_label(label: str) -> str:
    """A record's row label with its scaling under the one name (``X (hf)+dynamic`` -> ``X (hf)+dynamic-ntk``):
    records written before the names were one read as those written after, and a claim naming either finds both."""
    for old, new in SCALING_ALIASES.items():
        label = re.sub(rf"\+{re.escape(old)}(?=$|[:\s])", "+" + new, label)
    return label


def parse_scaling(
    item: str, keys: Sequence[str], convert: Callable[[str, str], Any], given: Optional[dict[str, str]] = None
) -> dict[str, Any]:
    """The settings of one ``--rope-scaling`` item, ``NAME[:key=value...]`` (the one parser of that spelling, for
    pebench's own runs and for outside models alike), over ``given`` texts it does not set (``--rope-factor``): each
    value converted by ``convert(key, text)``; a value it refuses (ValueError) and a factor below 1 are one line
    naming the item."""
    texts = {**(given or {}), **parse_spec(item, "--rope-scaling", keys)[1]}
    values = {}
    for k, v in sorted(texts.items()):
        try:
            values[k] = convert(k, v)
        except ValueError:
            raise UsageError(f"--rope-scaling {item}: {k}={v} is not a valid value") from None
    if values.get("factor", 1.0) < 1:
        raise UsageError(f"--rope-scaling {item}: factor must be >= 1, got {values['factor']:g}")
    return values


def typed_value(value, default, what: str):
    """A value given as text (``--task-opt trials=20``, ``--launcher-opt pack=2``) in the type of the option's
    default; other values as they are. A bad one is one line: '{what} must be int, got 'x''."""
    if not isinstance(value, str) or isinstance(default, str):
        return value
    try:
        if isinstance(default, bool):
            if value.lower() not in ("true", "false", "1", "0"):
                raise ValueError
            return value.lower() in ("true", "1")
        return type(default)(value)
    except ValueError:
        raise UsageError(f"{what} must be {type(default).__name__}, got {value!r}") from None


def fields_from(cls, options: dict, **given):
    """A flags dataclass from a command's options, taken by field name (an option the class has no field for is
    not its business; a list becomes a tuple, a None list the empty one), then ``given`` over them."""
    import dataclasses

    kw = {}
    for f in dataclasses.fields(cls):
        if f.name in options:
            v = options[f.name]
            if isinstance(v, list) or (v is None and f.default == ()):
                v = tuple(v or ())
            kw[f.name] = v
    return cls(**{**kw, **given})


def parse_lengths(spec: Any, what: str = "--lengths") -> Optional[list]:
    """``--lengths``, the one spelling for every command: token counts (``512``) or multiples of the model's context
    (``2x``, ``0.5x``), mixed as you like; each checked here, resolved against a context by ``resolve_lengths``."""
    items = parse_list(spec, what, kind="lengths (token counts or multiples such as 2x)")
    if items is None:
        return None
    out: list = []
    for item in items:
        try:
            value = float(item[:-1]) if item.endswith("x") else int(item)
        except ValueError:
            raise UsageError(
                f"{what} must be integers (token counts) or multiples such as 2x, got {item!r} in {spec!r}"
            ) from None
        if value <= 0 or (not item.endswith("x") and value < 2):
            raise UsageError(f"{what}: {item!r} must be a token count >= 2 or a multiple above 0 (e.g. 2x)")
        out.append(item if item.endswith("x") else int(item))
    return out


def resolve_lengths(lengths: Optional[list], context: int, what: str = "--lengths") -> Optional[list[int]]:
    """Lengths in tokens at ``context``: a multiple ``Kx`` is K times it, rounded; each at least 2 tokens."""
    if lengths is None:
        return None
    out = [int(round(float(L[:-1]) * context)) if isinstance(L, str) else int(L) for L in lengths]
    if bad := [str(L) for L, n in zip(lengths, out) if n < 2]:
        raise UsageError(f"{what}: {', '.join(bad)} is under 2 tokens at context {context}")
    return out


def parse_context(spec: Any, base: Optional[int] = None) -> Any:
    """``--context``, one length in the form ``--lengths`` takes: N tokens, or Kx ``base`` (``train --init-from``:
    the parent's context; ``eval --hf``: the one its config states). Without ``base``, only checked (the token
    count, or the ``Kx`` text for later)."""
    if isinstance(spec, int):
        spec = str(spec)
    items = parse_lengths(spec, "--context")
    if items is None:
        return None
    if len(items) != 1:
        raise UsageError(f"--context takes one length (N or Kx), got {spec!r}")
    if base is None:
        return items[0]
    return resolve_lengths(items, base, "--context")[0]
