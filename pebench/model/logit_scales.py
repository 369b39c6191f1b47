"""Evaluation-time logit scales, a registry of pure functions: ``fn(T, context, c, device)`` -> per-query logit
multipliers [T], or None where every factor is 1. Adding one is one function registered here (or from any module).

- ``none``: no scaling.
- ``logn``: log(i+1) / log(context) beyond the training context (log-n attention, scalable softmax); with
  ``gamma`` (Chen et al. 2026's sweep of the log-n strength, arXiv 2510.05554), 1 + gamma (log(i+1) / log(context)
  - 1) there: 0 no scaling, 1 log-n itself, every factor 1 within the context at any gamma.
- ``drope``: 1 + c ln(T / context) for a sequence of T tokens (DroPE's evaluation scaling).
- ``llama4``: Llama 4's attention temperature, 1 + alpha ln(floor(i / F) + 1) at position i (0-based): ``alpha``
  its ``attn_scale`` (0.1), ``F`` its ``floor_scale`` (option ``floor``; 0, the default: the training context).
  Llama 4 counts ``i + 1``, so its last training position already gets 1 + 0.1 ln 2; counting ``i`` keeps every
  factor 1 within the context, as every scale here does. Llama 4 applies it to its NoPE layers: a pattern's layer
  takes it as its own scale, and ``--logit-scale llama4@none`` applies it to the NoPE layers of any run.

A scale is named ``NAME[:key=value...]`` (``llama4:alpha=0.2:floor=256``), its settings the function's keyword
arguments; ``NAME@SCHEME`` applies it to the layers of one scheme (``decoder.DecoderLM.layer_scales``).
"""

from __future__ import annotations

import inspect
import math
from typing import Any, Callable, Optional

import torch

from ..util.errors import UsageError
from ..util.parsing import parse_spec, typed_value
from ..util.registry import Registry
from .pe.base import SCHEMES

ScaleFn = Callable[[int, int, float, torch.device], Optional[torch.Tensor]]
LOGIT_SCALES: Registry[ScaleFn] = Registry("logit scale")


@LOGIT_SCALES.register("none")
def _none(T: int, context: int, c: float, device) -> None:
    return None


@LOGIT_SCALES.register("logn")
def _logn(T: int, context: int, c: float, device, gamma: float = 1.0) -> Optional[torch.Tensor]:
    if gamma < 0:
        raise UsageError(f"--logit-scale logn:gamma must be >= 0 (0: no scaling, 1: log-n), got {gamma:g}")
    if T <= context or gamma == 0:
        return None
    n = torch.arange(1, T + 1, device=device, dtype=torch.float32)
    return (1.0 + gamma * (torch.log(n) / math.log(context) - 1.0)).clamp(min=1.0)


@LOGIT_SCALES.register("drope")
def _drope(T: int, context: int, c: float, device) -> Optional[torch.Tensor]:
    if T <= context:
        return None
    return torch.full((T,), 1.0 + c * math.log(T / context), device=device)


LLAMA4_ATTN_SCALE = 0.1  # Llama 4's attn_scale


@LOGIT_SCALES.register("llama4")
def _llama4(
    T: int, context: int, c: float, device, alpha: float = LLAMA4_ATTN_SCALE, floor: int = 0
) -> Optional[torch.Tensor]:
    F = floor or context
    if T <= F:
        return None  # floor(i / F) = 0 below F: every factor 1
    i = torch.arange(T, device=device, dtype=torch.float32)
    return 1.0 + alpha * torch.log(torch.floor(i / F) + 1.0)


# text -> (function, settings), each text parsed once: the model asks for its layers' scales on every forward. A
# plain dict, not functools.lru_cache: torch.compile traces a lookup in it (the model parses its scales when built, so
# a compiled forward finds them here), where it warns on a cache wrapper it cannot see through.
_PARSED: dict[str, tuple[Callable, tuple]] = {}


def parse_scale(text: str) -> tuple[Callable, dict[str, Any]]:
    """``NAME[:key=value...]`` -> the scale's function and its typed settings (a bad name or setting: one line)."""
    if (hit := _PARSED.get(text)) is None:
        fn, settings = _parse_scale(text)
        hit = _PARSED[text] = (fn, tuple(settings.items()))
    return hit[0], dict(hit[1])


def _parse_scale(text: str) -> tuple[Callable, dict[str, Any]]:
    name = text.split(":")[0].strip()
    fn = LOGIT_SCALES.get(name)
    keys = {p.name: p.default for p in list(inspect.signature(fn).parameters.values())[4:]}
    _, texts = parse_spec(text, "--logit-scale", list(keys))
    return fn, {k: typed_value(v, keys[k], f"--logit-scale {text}: {k}") for k, v in texts.items()}


def check_logit_scale(text: str) -> str:
    """``text`` if it names a registered scale with valid settings, and at most one ``@SCHEME``."""
    kind, at, target = text.partition("@")
    if at and not target.strip():
        raise UsageError(f"--logit-scale {text}: NAME@SCHEME names the scheme whose layers it scales")
    if at and target.strip() not in SCHEMES.names():
        raise UsageError(
            f"--logit-scale {text}: no scheme {target.strip()!r} (its layers would be none, and the records would "
            f"name a scale that changed nothing); schemes: {', '.join(sorted(SCHEMES.names()))}"
        )
    parse_scale(kind)
    return text


def logit_scale_factors(kind: str, T: int, context: int, c: float, device) -> Optional[torch.Tensor]:
    """The multipliers of the registered scale ``kind`` (``NAME[:key=value...]``; an unknown name: one line with
    the valid ones)."""
    fn, settings = parse_scale(kind)
    return fn(T, context, c, device, **settings)
