"""The speed levers for the main job's training step, measured side by side in one run on this machine: a RoPE
step of the default config (batch 32 x 128) with both cores in one process, one core in each of two processes
running at once (throughput of the pair), bf16 autocast, and the optimizer step alone with the default, foreach and
fused AdamW. Medians of timed steps after warm-up; MFU against the fp32 matmul peak measured in the same run.

Usage: python scripts/speed_levers.py [--steps 20] [--pe rope]
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time

import torch

from pebench.bench import matmul_peak
from pebench.checkpoint import build_model
from pebench.config import load_config


def step_times(pe: str, steps: int, threads: int, autocast: bool = False) -> list[float]:
    """Seconds per full training step (forward, backward, clip, AdamW) of the default config."""
    from dataclasses import replace

    from pebench.train import make_optimizer

    torch.set_num_threads(threads)
    cfg = load_config("tiny")
    cfg = replace(cfg, model=replace(cfg.model, pe=pe))
    torch.manual_seed(0)
    model = build_model(cfg)
    opt = make_optimizer(model, cfg.train, torch.device("cpu"))
    x = torch.randint(0, 256, (cfg.train.batch_size, cfg.model.context))
    ctx = torch.autocast("cpu", dtype=torch.bfloat16) if autocast else contextlib.nullcontext()
    out = []
    for i in range(steps + 5):
        t = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with ctx:
            _, loss = model(x, x)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if i >= 5:
            out.append(time.perf_counter() - t)
    return out


def optimizer_times(mode: str, steps: int = 50) -> float:
    cfg = load_config("tiny")
    model = build_model(cfg)
    for p in model.parameters():
        p.grad = torch.randn_like(p)
    kw = {"foreach": True} if mode == "foreach" else {"fused": True} if mode == "fused" else {"foreach": False}
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, **kw)
    ts = []
    for _ in range(steps + 5):
        t = time.perf_counter()
        opt.step()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts[5:])


def child(args) -> None:
    """One measuring process (the two-process row runs two of these at once)."""
    print(json.dumps(step_times(args.pe, args.steps, args.threads, args.autocast)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--pe", default="rope")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--autocast", action="store_true")
    ap.add_argument("--child", action="store_true")
    args = ap.parse_args()
    if args.child:
        return child(args)
    cores = os.cpu_count() or 1
    torch.set_num_threads(cores)
    peak = matmul_peak("cpu")
    cfg = load_config("tiny")
    flops = build_model(cfg).flops_per_token(cfg.model.context) * cfg.train.batch_size * cfg.model.context

    def spawn(threads: int, autocast: bool = False) -> subprocess.Popen:
        cmd = [sys.executable, __file__, "--child", "--pe", args.pe, "--steps", str(args.steps), "--threads",
               str(threads)] + (["--autocast"] if autocast else [])
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env={**os.environ, "OMP_NUM_THREADS": str(threads)})

    rows = []
    for label, procs, threads, autocast in ((f"1 process x {cores} threads", 1, cores, False),
                                            (f"{cores} processes x 1 thread, at once", cores, 1, False),
                                            (f"1 process x {cores} threads, bf16 autocast", 1, cores, True)):
        ps = [spawn(threads, autocast) for _ in range(procs)]
        meds = [statistics.median(json.loads(p.communicate()[0])) for p in ps]
        per_step = statistics.median(meds) / procs  # the pair's throughput as seconds per step
        rows.append((label, statistics.median(meds) * 1e3, per_step * 1e3, flops / per_step / peak))
    print(f"RoPE training step, default config ({cfg.train.batch_size} x {cfg.model.context}), {args.steps} timed "
          f"steps; fp32 matmul peak {peak / 1e9:,.0f} GFLOP/s measured in this run\n")
    print("| lever | ms per step (each process) | ms per step of throughput | MFU | vs first row |")
    print("|---|---|---|---|---|")
    for label, each, per, mfu in rows:
        print(f"| {label} | {each:,.1f} | {per:,.1f} | {mfu:.0%} | {rows[0][2] / per:.2f}x |")
    print("\n| AdamW step alone (0.8M parameters) | ms |\n|---|---|")
    for mode in ("for-loop", "foreach", "fused"):
        try:
            print(f"| {mode} | {optimizer_times(mode) * 1e3:.2f} |")
        except (RuntimeError, TypeError) as e:
            print(f"| {mode} | not available: {str(e).splitlines()[0][:60]} |")


if __name__ == "__main__":
    main()
