"""Where tensors live: the device a command asked for, and the autocast that goes with it."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import platform
from typing import Optional

import torch

from ..config import check_precision
from ..util.errors import UsageError


def resolve_device(device: str = "auto") -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device not in ("cpu", "cuda") and not device.startswith("cuda:"):
        raise UsageError(f"unknown device {device!r}; valid: auto, cpu, cuda")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise UsageError("--device cuda was asked for but no CUDA GPU is available")
    return torch.device(device)


def autocast_for(device: torch.device, precision: str = "auto"):
    """Evaluation's autocast for ``precision`` (``eval_precision``: auto, bf16 or fp32): bf16 autocast, or none."""
    return train_autocast(device, eval_precision(device, precision))


# CPU flags of native bf16 matrix arithmetic: AVX512-BF16's dot products and AMX tiles. Without them oneDNN emulates
# bf16 through fp32, which saves nothing (and without AVX-512 at all costs several times fp32).
NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16")


@functools.lru_cache(maxsize=4)
def cpu_info(cpuinfo: str = "/proc/cpuinfo") -> dict:
    """The first processor's fields of /proc/cpuinfo (Linux; elsewhere empty): ``model name``, ``flags``, ..."""
    try:
        with open(cpuinfo) as f:
            first = f.read().split("\n\n", 1)[0]
    except OSError:
        return {}
    return {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in first.splitlines()) if k.strip()}


def cpu_name() -> str:
    """The CPU's model name (/proc/cpuinfo), else what the platform says."""
    import platform

    return cpu_info().get("model name") or platform.processor() or platform.machine()


def native_bf16_cpu(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """Whether this CPU multiplies bf16 matrices natively (Linux: the flags in /proc/cpuinfo; elsewhere False)."""
    flags = cpu_info(cpuinfo).get("flags", "").split()
    return any(f in flags for f in NATIVE_BF16_FLAGS)


def train_precision(device: torch.device, requested: str = "auto") -> str:
    """The precision training runs in: ``requested`` (train.precision) unless auto; auto is bf16 autocast on CUDA and
    on a CPU with native bf16 matmuls, where the main job's step is 1.3-1.9x faster (docs/manual/speed.md), else
    fp32."""
    if requested != "auto":
        return requested
    return "bf16" if device.type == "cuda" or (device.type == "cpu" and native_bf16_cpu()) else "fp32"


def eval_precision(device: torch.device, requested: str = "auto") -> str:
    """The precision a pebench model is evaluated in (``--eval-precision``): ``requested`` unless auto; auto is, as
    training's, bf16 autocast on CUDA and on a CPU with native bf16 matmuls, else fp32. On those CPUs the main job's
    evaluation takes about half the time and every perplexity cell stays within 0.5% of fp32's
    (results/speed/eval-precision.md); a logit term is kept in fp32 (``attention._inference_bias``)."""
    return train_precision(device, check_precision(requested, "--eval-precision"))


def cpu_trains_bf16(device: torch.device, precisions) -> bool:
    """Whether ``device`` is a CPU and any of these ``train.precision`` values trains there in bf16 autocast (then a
    run's bf16 floor is measured too, and bf16 asked for where it is emulated is noted)."""
    return device.type == "cpu" and any(train_precision(device, p) == "bf16" for p in precisions)


def emulated_bf16_note(device: torch.device, requested: str) -> list[str]:
    """A note for bf16 training asked for where the CPU has no native bf16 matmuls: oneDNN then emulates it, many
    times slower than fp32 (auto would train in fp32 here). Empty where that is not so."""
    if device.type != "cpu" or requested != "bf16" or native_bf16_cpu():
        return []
    return [
        "train.precision bf16 on a CPU without native bf16 matmuls (no "
        + " or ".join(NATIVE_BF16_FLAGS)
        + "): emulated, many times slower than fp32; auto trains in fp32 here"
    ]


def train_autocast(device: torch.device, precision: str):
    """Training's autocast for a resolved precision (``train_precision``): bf16 autocast, or none (fp32)."""
    if precision == "bf16":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


# glibc's malloc hands every allocation above its (adaptive) mmap threshold back to the kernel when it is freed, and
# trims the heap's top past 128 kB: a CPU training step of the default config then faults in about 44 MB of fresh
# pages, each zeroed by the kernel (results/speed/levers-bf16.md, the allocator rows). Keeping freed blocks up to
# 32 MB in the heap (the largest threshold glibc allows) and trimming only past 256 MB leaves almost none to fault
# in (tests/jobs/test_scheduling.py counts them). PEBENCH_MALLOC=system keeps glibc's defaults.
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
                    libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
                )
            except (OSError, AttributeError):  # a libc without mallopt: its defaults stay
                _allocator_tuned = False
    return _allocator_tuned
