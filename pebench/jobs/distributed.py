"""Data parallelism under torchrun: NCCL on CUDA, gloo on CPU. Rank 0 alone writes files."""

from __future__ import annotations

import contextlib
import gc
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator, Optional

import torch

if TYPE_CHECKING:
    from torch.distributed import ProcessGroup


@dataclass
class DistInfo:
    rank: int = 0
    world: int = 1
    local_rank: int = 0
    device: str = "auto"
    group: Optional[ProcessGroup] = None

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def launched_by_torchrun() -> bool:
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


@contextlib.contextmanager
def distributed(device: str = "auto") -> Iterator[DistInfo]:
    """Join the process group torchrun describes in the environment (or do nothing for one process)."""
    if not launched_by_torchrun():
        yield DistInfo(device=device)
        return
    import torch.distributed as dist

    local = int(os.environ.get("LOCAL_RANK", "0"))
    use_cuda = torch.cuda.is_available() and device != "cpu"
    if use_cuda:
        torch.cuda.set_device(local)
    dist.init_process_group("nccl" if use_cuda else "gloo")
    try:
        yield DistInfo(
            dist.get_rank(), dist.get_world_size(), local, f"cuda:{local}" if use_cuda else "cpu", dist.group.WORLD
        )
    finally:
        # DistributedDataParallel sits in a reference cycle, and its reducer holds the process group: left to
        # the interpreter's exit, the group (and gloo's worker threads) is finalized there, which aborted 2-rank
        # CPU launches on some machines ("terminate called without an active exception", SIGABRT). Collecting the
        # cycle first lets destroy_process_group really tear the group down while the interpreter is intact
        # (tests/jobs/test_distributed.py checks that nothing wrapped is left when it does).
        gc.collect()
        dist.destroy_process_group()
