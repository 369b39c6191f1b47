"""The speed levers for the main job's training step, measured side by side in one run on this machine: a RoPE
step of the default config (batch 32 x 128) with glibc's default allocator and with pebench's tuned one
(``pebench.model.device.tune_cpu_allocator``), fp32 and bf16 autocast (pebench's default on a CPU with native bf16
matmuls, ``device.train_precision``), both cores in one process against one core in each of two processes running
at once (throughput of the pair), torch.compile (its compile time beside it), where the default's step goes, and the
optimizer step alone with the for-loop, foreach and fused AdamW. Medians of timed steps after warm-up; minor page
faults per step; MFU against the fp32 matmul peak measured in the same run.

With ``--suite``, the scale suite's layout only (a process per core, one thread each, as ``pebench run --workers
cpu:N`` trains): the default step against the same step compiled, and three seeds of the scheme trained as one
batched model (``torch.func.vmap`` over their stacked parameters), eager and compiled.

Usage: python scripts/speed_levers.py [--steps 20] [--pe rope] [--suite [--point d256]] [--work]
"""

from __future__ import annotations

from pebench.config import load_config
from pebench.jobs.plan import select_points
from pebench.jobs.suites import get_suite
from pebench.perf import levers
from pebench.util.errors import UsageError


def config_of(point: str = ""):
    """The default config, or one scale suite point's (``pebench.jobs.suites.SCALE_POINTS``, by name: d256)."""
    cfg = load_config("tiny")
    try:
        return select_points(get_suite("scale"), point)[0].apply(cfg) if point else cfg
    except UsageError as e:  # a point the suite does not have: its one line, no traceback
        raise SystemExit(f"error: {e}") from None


if __name__ == "__main__":
    levers.main(config_of, __file__)
