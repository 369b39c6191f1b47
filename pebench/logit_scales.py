"""Evaluation-time logit scales, a registry of pure functions: ``fn(T, context, c, device)`` -> per-query logit
multipliers [T], or None where every factor is 1. Adding one is one function registered here (or from any module).

- ``none``: no scaling.
- ``logn``: log(i+1) / log(context) beyond the training context (log-n attention, scalable softmax).
- ``drope``: 1 + c ln(T / context) for a sequence of T tokens (DroPE's evaluation scaling).
"""

from __future__ import annotations

import math
from typing import Callable, Optional

import torch

from .registry import Registry

ScaleFn = Callable[[int, int, float, torch.device], Optional[torch.Tensor]]
LOGIT_SCALES: Registry[ScaleFn] = Registry("logit scale")


@LOGIT_SCALES.register("none")
def _none(T: int, context: int, c: float, device) -> None:
    return None


@LOGIT_SCALES.register("logn")
def _logn(T: int, context: int, c: float, device) -> Optional[torch.Tensor]:
    if T <= context:
        return None
    n = torch.arange(1, T + 1, device=device, dtype=torch.float32)
    return (torch.log(n) / math.log(context)).clamp(min=1.0)


@LOGIT_SCALES.register("drope")
def _drope(T: int, context: int, c: float, device) -> Optional[torch.Tensor]:
    if T <= context:
        return None
    return torch.full((T,), 1.0 + c * math.log(T / context), device=device)


def logit_scale_factors(kind: str, T: int, context: int, c: float, device) -> Optional[torch.Tensor]:
    """The multipliers of the registered scale ``kind`` (an unknown name: one line with the valid ones)."""
    return LOGIT_SCALES.get(kind)(T, context, c, device)
