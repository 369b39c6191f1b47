"""Schemes by name: the built-in ones (registered by their modules), a user's file (``path.py:Class``) or an
installed entry point (``pebench.schemes``), resolved to a registered name; the groups and the order ``list`` shows
them in; ``build_pe``, a scheme's module for a model."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any, Optional

from ...util.errors import UsageError
from ...util.groups import GROUPS, SCHEME_ORDER
from .base import SCHEMES, PEContext, PositionalEncoding, ScoreMod

SOURCES: dict[str, str] = {}  # scheme name -> "file.py:Class" or "entry-point:NAME", for schemes from outside
ENTRY_POINT_GROUP = "pebench.schemes"


def _register_user(cls: Any, source: str) -> str:
    if not (isinstance(cls, type) and issubclass(cls, PositionalEncoding)):
        raise UsageError(f"{source} is not a PositionalEncoding subclass")
    name = cls.name
    if not name or not isinstance(name, str):
        raise UsageError(f"{source}: the class needs a class attribute name = '...' (the scheme's name)")
    if name in SCHEMES and SCHEMES.get(name) is not cls:
        if SOURCES.get(name) == source:
            return name  # the same file loaded again
        raise UsageError(f"{source}: a scheme named {name!r} exists already; give the class another name")
    if name not in SCHEMES:
        SCHEMES.add(cls)
    SOURCES[name] = source
    return name


def load_scheme_file(spec: str) -> str:
    """``path/to/file.py:ClassName`` -> registers the class and returns its scheme name."""
    path, _, cls_name = spec.rpartition(":")
    if not path.endswith(".py") or not cls_name:
        raise UsageError(f"--pe {spec!r}: a scheme from a file is given as path/to/file.py:ClassName")
    file = Path(path).resolve()
    if not file.is_file():
        raise UsageError(f"--pe {spec!r}: file not found: {path}")
    mod_name = f"pebench_user_{abs(hash(str(file)))}"
    if mod_name not in sys.modules:
        loader = importlib.util.spec_from_file_location(mod_name, file)
        module = importlib.util.module_from_spec(loader)
        try:
            loader.loader.exec_module(module)
        except Exception as e:  # noqa: BLE001 - a user's file can fail in any way; say which and how
            raise UsageError(f"--pe {spec!r}: importing {path} failed: {type(e).__name__}: {e}") from e
        sys.modules[mod_name] = module
    cls = getattr(sys.modules[mod_name], cls_name, None)
    if cls is None:
        raise UsageError(f"--pe {spec!r}: {path} defines no {cls_name!r}")
    return _register_user(cls, f"{file}:{cls_name}")


def load_entry_points() -> list[str]:
    """Register the schemes installed under the ``pebench.schemes`` entry-point group."""
    from importlib.metadata import entry_points

    names = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            cls = ep.load()
        except Exception as e:  # noqa: BLE001
            raise UsageError(f"entry point {ep.name!r} ({ep.value}) failed to load: {type(e).__name__}: {e}") from e
        names.append(_register_user(cls, f"entry-point:{ep.name}"))
    return names


def resolve_scheme(spec: str) -> str:
    """A scheme name, or a file spec / entry point loaded and registered, -> the registered name."""
    if spec in SCHEMES:
        return spec
    if ":" in spec and not spec.startswith("entry-point:"):
        return load_scheme_file(spec)
    name = spec.removeprefix("entry-point:")
    if name not in SCHEMES:
        load_entry_points()
    SCHEMES.get(name)  # an unknown name: one line with the valid ones and a "did you mean"
    return name


def resolve_schemes(spec: str | list[str]) -> list[str]:
    """``--pe``'s list (or its text): ``all``, groups (``classic``, ``modern``), names and file specs, each scheme
    once in the order named."""
    from ...util.parsing import parse_list

    out: list[str] = []
    for part in parse_list(spec, "--pe", unique=False):
        names = scheme_names() if part == "all" else GROUPS.get(part) or [resolve_scheme(part)]
        out += [n for n in names if n not in out]
    return out


def scheme_names() -> list[str]:
    names = SCHEMES.names()
    return [n for n in SCHEME_ORDER if n in names] + sorted(n for n in names if n not in SCHEME_ORDER)


def group_of(name: str) -> str:
    return next((g for g, members in GROUPS.items() if name in members), "user")


def all_variants() -> list[str]:
    """Every evaluation-time variant name any registered scheme can be named with (RoPE's scalings today)."""
    out: list[str] = []
    for n in SCHEMES.names():
        out += [v for v in SCHEMES.get(n).named_variants() if v not in out]
    return out


def build_pe(
    name: str, ctx: PEContext, options: Optional[dict[str, Any]] = None, source: str = ""
) -> PositionalEncoding:
    if name not in SCHEMES and source:
        resolve_scheme(source)
    return SCHEMES.get(name)(ctx, options)


__all__ = [
    "SCHEMES",
    "GROUPS",
    "SOURCES",
    "PEContext",
    "PositionalEncoding",
    "ScoreMod",
    "build_pe",
    "scheme_names",
    "resolve_scheme",
    "resolve_schemes",
    "all_variants",
    "group_of",
    "load_entry_points",
    "load_scheme_file",
]
