"""Positional encodings: one module per scheme, discovered and registered by name.

Adding a scheme: drop a module in this folder that defines a ``PositionalEncoding`` subclass decorated
with ``@SCHEMES.register("name")``. Nothing else needs to change.
"""
from __future__ import annotations

import importlib
import pkgutil
from typing import Any, Optional

from ..registry import Registry
from .base import PEContext, PositionalEncoding, ScoreMod

SCHEMES: Registry[type[PositionalEncoding]] = Registry("positional encoding")

_ORDER = ["none", "sinusoidal", "learned", "shaw", "t5", "rope", "alibi"]


def _discover() -> None:
    for mod in pkgutil.iter_modules(__path__):
        if mod.name not in ("base",) and not mod.name.startswith("_"):
            importlib.import_module(f"{__name__}.{mod.name}")


_discover()


def scheme_names() -> list[str]:
    names = SCHEMES.names()
    return [n for n in _ORDER if n in names] + sorted(n for n in names if n not in _ORDER)


def build_pe(name: str, ctx: PEContext, options: Optional[dict[str, Any]] = None) -> PositionalEncoding:
    return SCHEMES.get(name)(ctx, options)


__all__ = ["SCHEMES", "PEContext", "PositionalEncoding", "ScoreMod", "build_pe", "scheme_names"]
