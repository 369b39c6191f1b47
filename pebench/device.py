"""Where tensors live: the device a command asked for, and the autocast that goes with it."""
from __future__ import annotations

import contextlib
import ctypes
import os
import platform
from typing import Optional

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


# glibc's malloc hands every allocation above its (adaptive) mmap threshold back to the kernel when it is freed, and
# trims the heap's top past 128 kB: a CPU training step of the default config then faults in about 44 MB of fresh
# pages (10,800 minor page faults per step, each page zeroed by the kernel), 6-7% of the step (docs/speed.md). Keeping
# freed blocks up to 32 MB in the heap (the largest threshold glibc allows) and trimming only past 256 MB brings that
# to under 100 faults per step. PEBENCH_MALLOC=system keeps glibc's defaults.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 256 << 20
_allocator_tuned: Optional[bool] = None


def tune_cpu_allocator() -> bool:
    """Keep freed tensor memory in the process (glibc only; once per process). Returns whether it is tuned."""
    global _allocator_tuned
    if _allocator_tuned is None:
        _allocator_tuned = False
        if os.environ.get("PEBENCH_MALLOC", "tuned") != "system" and platform.libc_ver()[0] == "glibc":
            try:
                libc = ctypes.CDLL(None)
                _allocator_tuned = bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
                    libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
            except (OSError, AttributeError):  # a libc without mallopt: its defaults stay
                _allocator_tuned = False
    return _allocator_tuned
