"""Run under torchrun: one DDP training step inside pebench's distributed() context, then exit.

Before the fix in pebench.jobs.distributed, about one 2-rank CPU launch in 8-12 aborted at exit (SIGABRT,
"terminate called without an active exception"): DDP sits in a reference cycle and its reducer kept the
process group alive past destroy_process_group, to be finalized during interpreter shutdown."""

import torch

from pebench.jobs.distributed import distributed


def step():
    net = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 8))
    for _ in range(2):
        net(torch.randn(4, 8)).sum().backward()


with distributed("cpu") as d:
    step()
