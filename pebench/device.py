"""Where tensors live: the device a command asked for, and the autocast that goes with it."""
from __future__ import annotations

import contextlib

import torch

from .errors import UsageError


def resolve_device(device: str = "auto") -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device not in ("cpu", "cuda") and not device.startswith("cuda:"):
        raise UsageError(f"unknown device {device!r}; valid: auto, cpu, cuda")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise UsageError("--device cuda was asked for but no CUDA GPU is available")
    return torch.device(device)


def autocast_for(device: torch.device):
    """bf16 autocast on CUDA, nothing elsewhere (CPU runs in fp32)."""
    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()
