"""The speed levers of the main job's training step, measured side by side in one run (``scripts/speed_levers.py`` is
the command line; its docstring says what each table measures): the step of a config with each lever (allocator,
bf16 autocast, processes against threads, torch.compile, seeds batched with ``torch.func.vmap``), where the step's
time goes (torch.profiler), the optimizer alone and the step's work at the model's shapes. Medians of timed steps
after warm-up; MFU against the matmul peak measured in the same run. A child process runs the calling script
(``--child``), which gives the config."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import replace

import torch

from ..config import load_config
from ..model.checkpoint import build_model
from ..model.device import train_precision, tune_cpu_allocator
from ..train import make_optimizer
from .bench import matmul_peak


def training_step(cfg, pe: str, threads: int, autocast: bool = False, compile_: bool = False, seeds: int = 1):
    """(cfg, model, step): one full training step (forward, backward, clip, AdamW) of ``cfg`` with scheme ``pe`` on
    a fixed batch, with pebench's allocator (unless PEBENCH_MALLOC=system) and optimizer. With ``seeds`` > 1 the step
    trains that many models of the scheme (one per seed) as one batched model (``batched_step``; model is None)."""
    tune_cpu_allocator()
    torch.set_num_threads(threads)
    cfg = replace(cfg, model=replace(cfg.model, pe=pe))
    if seeds > 1:
        return cfg, None, batched_step(cfg, seeds, autocast, compile_)
    torch.manual_seed(0)
    model = build_model(cfg)
    fwd = torch.compile(model) if compile_ else model
    opt = make_optimizer(model, cfg.train, torch.device("cpu"))
    x = torch.randint(0, 256, (cfg.train.batch_size, cfg.model.context))

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16) if autocast else contextlib.nullcontext():
            _, loss = fwd(x, x)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    return cfg, model, step


def batched_step(cfg, seeds: int, autocast: bool, compile_: bool):
    """One training step of ``seeds`` models of one config (seeds 0..seeds-1) as one batched model: their parameters
    stacked (``torch.func.stack_module_state``), the forward ``torch.func.vmap``-ed over the stacks (each model's
    loss the one it would have alone; the losses summed, so the gradients do not mix), each model's gradient clipped
    by its own norm, one fused AdamW over the stacks."""
    import copy

    from torch.func import functional_call, stack_module_state, vmap

    models = []
    for s in range(seeds):
        torch.manual_seed(s)
        models.append(build_model(cfg))
    params, buffers = stack_module_state(models)
    base = copy.deepcopy(models[0])  # the module whose forward runs on each slice of the stacks

    def loss_of(p: dict, b: dict, x: torch.Tensor) -> torch.Tensor:
        return functional_call(base, (p, b), (x, x))[1]

    losses = vmap(loss_of, randomness="different")
    losses = torch.compile(losses) if compile_ else losses
    tc = cfg.train
    opt = torch.optim.AdamW(
        list(params.values()), lr=tc.lr, betas=(tc.beta1, tc.beta2), weight_decay=tc.weight_decay, fused=True
    )
    x = torch.randint(0, 256, (seeds, tc.batch_size, cfg.model.context))

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16) if autocast else contextlib.nullcontext():
            loss = losses(params, buffers, x).sum()
        loss.backward()
        grads = [p.grad for p in params.values()]
        norms = torch.stack([g.flatten(1).pow(2).sum(1) for g in grads]).sum(0).sqrt()  # one norm per model
        scale = (tc.grad_clip / (norms + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(scale.view(-1, *([1] * (g.dim() - 1))))
        opt.step()

    return step


def step_times(
    cfg, pe: str, steps: int, threads: int, autocast: bool = False, compile_: bool = False, seeds: int = 1
) -> dict:
    """Seconds per training step (per model's step where ``seeds`` models train batched) after 5 warm-up steps, the
    minor page faults per step and the seconds of the first two (compiling) steps."""
    import resource

    step = training_step(cfg, pe, threads, autocast, compile_, seeds)[2]
    first = time.perf_counter()
    for _ in range(2):
        step()
    first = time.perf_counter() - first
    for _ in range(3):
        step()
    faults, out = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, []
    for _ in range(steps):
        t = time.perf_counter()
        step()
        out.append((time.perf_counter() - t) / seeds)
    faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults) / steps / seeds
    return {"steps": out, "faults": faults, "first": first}


def breakdown(cfg, pe: str, steps: int, threads: int, autocast: bool = False) -> list[tuple]:
    """Where a training step's time goes (torch.profiler, self CPU time per operator, summed into kinds): the
    matmuls the floor counts, attention (the fused kernel, or the math kernel's batched matmuls and softmax), and
    everything else (elementwise, norms, softmax of the loss, the optimizer). Each (kind, seconds per step, share,
    the FLOPs the floor counts for it): the matmuls' 6N per token, attention's 12 L T d over the full T x T."""
    from torch.profiler import ProfilerActivity, profile

    cfg, model, step = training_step(cfg, pe, threads, autocast)
    for _ in range(3):
        step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
    kinds: dict = {}
    for ev in prof.key_averages():
        name = ev.key
        kind = (
            "matmuls (the floor's 6N)"
            if name in ("aten::mm", "aten::addmm")
            else "attention (forward and backward)"
            if name in ("aten::bmm", "aten::_softmax", "aten::_softmax_backward_data")
            or ("scaled_dot_product" in name and name.startswith("aten::_"))
            else "everything else (elementwise, norms, loss, optimizer, framework)"
        )
        kinds[kind] = kinds.get(kind, 0.0) + ev.self_cpu_time_total / 1e6 / steps
    total = sum(kinds.values())
    tokens = cfg.train.batch_size * cfg.model.context
    attn_flops = 12 * cfg.model.n_layers * cfg.model.context * cfg.model.d_model * tokens
    mm_flops = model.flops_per_token(cfg.model.context) * tokens - attn_flops
    rows = []
    for kind, sec in sorted(kinds.items(), key=lambda kv: -kv[1]):
        f = mm_flops if kind.startswith("matmuls") else attn_flops if kind.startswith("attention") else 0.0
        rows.append((kind, sec, sec / total, f))
    return rows


def _median_s(fn, reps: int = 20) -> float:
    """Median seconds of ``fn()`` over ``reps`` calls after three warm-up calls."""
    for _ in range(3):
        fn()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def _fwd_bwd(fn, *shapes, dtype=torch.float32):
    """A callable running ``fn`` forward and backward on fresh random inputs of ``shapes`` in ``dtype``."""
    xs = [torch.randn(*sh, dtype=dtype, requires_grad=True) for sh in shapes]
    out = fn(*xs)
    g = torch.randn_like(out)
    return lambda: torch.autograd.grad(fn(*xs), xs, g)


def cpu_kind() -> str:
    """The CPU's model name and its native bf16 flags (``amx_bf16``, ``avx512_bf16``), as the tables name it."""
    from ..model.device import NATIVE_BF16_FLAGS, cpu_info, cpu_name

    flags = [f for f in (*NATIVE_BF16_FLAGS, "amx_tile") if f in cpu_info().get("flags", "").split()]
    return f"{cpu_name()} ({', '.join(flags) or 'no native bf16'})"


def work_rows(cfg) -> list[tuple]:
    """The step's work item by item at the model's own shapes, each (work, shape, FLOPs, fp32 s, bf16 s, times per
    step): the four matmuls of a layer and the head, forward and backward (x w, then g w^T and x^T g), attention
    forward and backward per layer (the fp32 column on fp32 inputs; the bf16 column on bf16 inputs, through pebench's
    training path, with SDPA's math kernel beside it), the elementwise work forward and backward, and the fused
    AdamW step."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from ..model.attention import attend

    m, d, f, V = cfg.train.batch_size * cfg.model.context, cfg.model.d_model, cfg.model.d_mlp, cfg.model.vocab_size
    B, H, T, L = cfg.train.batch_size, cfg.model.n_heads, cfg.model.context, cfg.model.n_layers
    qkv = (B, H, T, d // H)
    rows = []
    for label, (a, b, c), count in (
        ("q, k, v projection", (m, d, 3 * d), L),
        ("attention output", (m, d, d), L),
        ("MLP up", (m, d, f), L),
        ("MLP down", (m, f, d), L),
        ("output head", (m, d, V), 1),
    ):
        times = []
        for dt in (torch.float32, torch.bfloat16):
            x, w, g = torch.randn(a, b, dtype=dt), torch.randn(c, b, dtype=dt), torch.randn(a, c, dtype=dt)
            times.append(_median_s(lambda x=x, w=w, g=g: (x @ w.t(), g @ w, g.t() @ x)))
        rows.append((label + " (forward and backward)", f"{a} x {b} x {c}", 6 * a * b * c, *times, count))
    attn_flops = 3 * 4 * B * H * T * T * (d // H)  # forward and backward over the full T x T, as the floor counts
    causal = lambda q, k, v: attend(q, k, v, None, "sdpa")  # noqa: E731

    def math_kernel(q, k, v):
        with sdpa_kernel(SDPBackend.MATH):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    for label, fn in (
        ("attention, pebench's path (per layer)", causal),
        ("attention, SDPA's math kernel", math_kernel),
    ):
        times = [_median_s(_fwd_bwd(fn, qkv, qkv, qkv, dtype=dt)) for dt in (torch.float32, torch.bfloat16)]
        rows.append((label + ", forward and backward", "x".join(map(str, qkv)), attn_flops, *times, L))
    return rows + elementwise_rows(cfg)


def elementwise_rows(cfg) -> list[tuple]:
    """LayerNorm, GELU and the loss forward and backward at the model's shapes (fp32, and bf16 inputs), and the
    fused AdamW step over the model's parameters (fp32 master weights in both columns); each with its count per
    step."""
    import torch.nn.functional as F

    m, d, f, V = cfg.train.batch_size * cfg.model.context, cfg.model.d_model, cfg.model.d_mlp, cfg.model.vocab_size
    L = cfg.model.n_layers
    y = torch.randint(0, V, (m,))
    items = (
        ("LayerNorm (per norm)", lambda x: F.layer_norm(x, (d,)), (m, d), 2 * L + 1),
        ("GELU (per layer)", F.gelu, (m, f), L),
        ("cross-entropy loss", lambda x: F.cross_entropy(x.float(), y), (m, V), 1),
    )
    rows = []
    for label, fn, shape, count in items:
        times = [_median_s(_fwd_bwd(fn, shape, dtype=dt)) for dt in (torch.float32, torch.bfloat16)]
        rows.append((label + ", forward and backward", " x ".join(map(str, shape)), 0, *times, count))
    adam = optimizer_times("fused")
    rows.append(("AdamW step (fused, fp32 master weights)", "all parameters", 0, adam, adam, 1))
    return rows


def print_work_table(cfg, rows: list[tuple], threads: int, peak: float, peak_bf16: float) -> None:
    print(
        f"\nThe step's work at the model's own shapes on {cpu_kind()}, {threads} thread(s), medians of 20 calls: fp32 "
        f"matmul peak {peak / 1e9:,.0f} GFLOP/s, bf16 {peak_bf16 / 1e9:,.0f} GFLOP/s (n x n at 2,048, this run)\n"
    )
    print(
        "| work | shape | per step | fp32 ms | fp32 GFLOP/s (of the n x n peak) | bf16 ms "
        "| bf16 GFLOP/s (of the n x n peak) |"
    )
    print("|---|---|---|---|---|---|---|")
    for work, shape, flops, t32, t16, count in rows:
        r32 = f"{flops / t32 / 1e9:,.0f} ({flops / t32 / peak:.0%})" if flops else ""
        r16 = f"{flops / t16 / 1e9:,.0f} ({flops / t16 / peak_bf16:.0%})" if flops else ""
        print(f"| {work} | {shape} | {count} | {t32 * 1e3:.2f} | {r32} | {t16 * 1e3:.2f} | {r16} |")


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


def child(args, cfg) -> None:
    """One measuring process (the two-process row runs two of these at once), of config ``cfg``."""
    print(json.dumps(step_times(cfg, args.pe, args.steps, args.threads, args.autocast, args.compile, args.seeds)))


def lever_list(suite: bool, cores: int, bf16: bool) -> tuple[tuple, int]:
    """The levers to measure, each (label, processes, threads per process, spawn options), and the row the others
    are compared with: pebench's default step, or with ``suite`` the scale suite's layout (a process per core)."""
    mark = {True: " (pebench's default here)", False: ""}
    if suite:  # the suite's layout: a process per core, one thread each
        each_core, prec = f"{cores} processes x 1 thread at once", "bf16 autocast" if bf16 else "fp32"
        ac = {"autocast": bf16}
        levers = (
            (f"{each_core}, {prec} (the suite's default)", cores, 1, ac),
            (f"{each_core}, {prec}, torch.compile", cores, 1, {**ac, "compile_": True}),
            (f"{each_core}, {prec}, 3 seeds as one batched model (torch.func.vmap)", cores, 1, {**ac, "seeds": 3}),
            (f"{each_core}, {prec}, 3 seeds batched and compiled", cores, 1, {**ac, "seeds": 3, "compile_": True}),
        )
        default = 0
    else:
        levers = (
            (f"1 process x {cores} threads, fp32, glibc's default allocator", 1, cores, {"malloc": "system"}),
            (f"1 process x {cores} threads, fp32 (tuned allocator, fused AdamW){mark[not bf16]}", 1, cores, {}),
            (f"{cores} processes x 1 thread at once, fp32", cores, 1, {}),
            (f"1 process x {cores} threads, bf16 autocast{mark[bf16]}", 1, cores, {"autocast": True}),
            (f"{cores} processes x 1 thread at once, bf16 autocast", cores, 1, {"autocast": True}),
            (f"1 process x {cores} threads, fp32, torch.compile", 1, cores, {"compile_": True}),
        )
        default = 3 if bf16 else 1
    return levers, default


def spawn(
    args, threads: int, autocast: bool = False, compile_: bool = False, malloc: str = "tuned", seeds: int = 1
) -> subprocess.Popen:
    """One measuring child process of the calling script (the ``entry`` given to ``main``; its step's options;
    ``threads`` OpenMP threads)."""
    cmd = [
        sys.executable,
        args.entry,
        "--child",
        "--pe",
        args.pe,
        "--steps",
        str(args.steps),
        "--threads",
        str(threads),
    ]
    cmd += (["--autocast"] if autocast else []) + (["--compile"] if compile_ else [])
    cmd += ["--seeds", str(seeds), "--point", args.point]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "PEBENCH_MALLOC": malloc}
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)


def measure(args, levers: tuple, flops: float, peak: float) -> tuple[list, list]:
    """Each lever's row (label, ms per step of each process, ms per step of throughput, MFU, page faults, first
    steps' seconds), its processes run at once; and a line for each lever that did not run here."""
    rows, failed = [], []
    for label, procs, threads, kw in levers:
        ps = [spawn(args, threads, **kw) for _ in range(procs)]
        texts = [p.communicate()[0] for p in ps]
        if any(p.returncode for p in ps):  # a lever this torch cannot run (e.g. a compile that fails) is said so
            failed.append(f"{label}: did not run here (exit {max(p.returncode for p in ps)})")
            continue
        outs = [json.loads(t) for t in texts]
        each = statistics.median(statistics.median(o["steps"]) for o in outs)
        per_step = each / procs  # the processes' throughput as seconds per step
        faults = statistics.median(o["faults"] for o in outs)
        rows.append((label, each * 1e3, per_step * 1e3, flops / per_step / peak, faults, max(o["first"] for o in outs)))
    return rows, failed


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--pe", default="rope")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--autocast", action="store_true")
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--seeds", type=int, default=1, help="models trained as one batched model (child only)")
    ap.add_argument(
        "--suite",
        action="store_true",
        help="the scale suite's layout only: a process per core, one thread each (pebench run --workers cpu:N)",
    )
    ap.add_argument("--point", default="", help="with --suite: a scale point's shape (d256), not the default's")
    ap.add_argument("--work", action="store_true", help="the table of the step's work and its bound only")
    ap.add_argument("--child", action="store_true")
    return ap


def main(config_of, entry: str) -> None:
    """The script's command line: ``config_of(point)`` gives the default config or a scale point's (the caller
    resolves the suite: jobs, which imports perf, is not imported here); ``entry`` is the script a child runs."""
    args = _parser().parse_args()
    args.entry = entry
    if args.child:
        return child(args, config_of(args.point))
    cores = os.cpu_count() or 1
    torch.set_num_threads(cores)
    cfg = config_of(args.point)
    bf16 = train_precision(torch.device("cpu")) == "bf16"  # what pebench trains in on this CPU
    # the peaks (fp32, and the step's floor's): measured here, after the levers and at the end
    peaks = remeasured((0.0, 0.0), bf16)
    peak = peaks[0]
    if args.work:
        work = work_rows(cfg)
        return print_work_table(cfg, work, cores, *remeasured(peaks, bf16))
    flops = build_model(cfg).flops_per_token(cfg.model.context) * cfg.train.batch_size * cfg.model.context

    levers, default = lever_list(args.suite, cores, bf16)
    rows, failed = measure(args, levers, flops, peak)
    print(
        f"{time.strftime('%Y-%m-%d')}, {cpu_kind()}, torch {torch.__version__}: "
        f"{args.pe} training step, {'config ' + cfg.name if args.point else 'default config'} "
        f"(d_model {cfg.model.d_model}, {cfg.train.batch_size} x {cfg.model.context}), {args.steps} timed "
        f"steps; fp32 matmul peak {peak / 1e9:,.0f} GFLOP/s measured in this run (MFU against it); native bf16 "
        f"matmuls on this CPU: {'yes' if bf16 else 'no'}"
        + (
            "; with several seeds batched, a row's milliseconds are per model's step (the batched step's time "
            "over its models)\n"
            if args.suite
            else "\n"
        )
    )
    print(
        "| lever | ms per step (each process) | ms per step of throughput | MFU | vs pebench's default | "
        "page faults per step | first 2 steps, s |"
    )
    print("|---|---|---|---|---|---|---|")
    base = next((r[2] for r in rows if r[0] == levers[default][0]), None)  # the default's, if it ran
    for label, each, per, mfu, faults, first in rows:
        vs = f"{base / per:.2f}x" if base else "n/a"
        print(f"| {label} | {each:,.1f} | {per:,.1f} | {mfu:.0%} | {vs} | {faults:,.0f} | {first:.1f} |")
    for line in failed:
        print(f"\n{line}")
    if not args.suite:
        print_step_tables(args, cfg, remeasured(peaks, bf16), bf16, flops)


def remeasured(peaks: tuple, bf16: bool) -> tuple:
    """The (fp32, own) matmul peaks measured again, the higher of each kept (the host can only slow a measurement
    down); own is the bf16 peak where pebench trains in bf16 here, else the fp32 one."""
    peak = max(peaks[0], matmul_peak("cpu"))
    return peak, (max(peaks[1], matmul_peak("cpu", dtype=torch.bfloat16)) if bf16 else peak)


def print_step_tables(args, cfg, peaks: tuple, bf16: bool, flops: float) -> None:
    """Where the default step goes (against the step's floor: its FLOPs at the peak of the precision it trains in),
    the optimizer alone, and the step's work at the model's shapes. ``peaks`` (fp32, and the precision's own) are
    measured again after these measurements and the highest taken, as a run's profile takes them: the host can
    only slow one down."""
    (peak, own), cores = peaks, torch.get_num_threads()
    parts = breakdown(cfg, args.pe, args.steps, cores, bf16)
    adam = {}
    for mode in ("for-loop", "foreach", "fused"):
        try:
            adam[mode] = f"{optimizer_times(mode) * 1e3:.2f}"
        except (RuntimeError, TypeError) as e:
            adam[mode] = f"not available: {str(e).splitlines()[0][:60]}"
    work = work_rows(cfg)
    peak, own = remeasured((peak, own), bf16)
    prec = "bf16" if bf16 else "fp32"
    floor_s = flops / own
    print(
        f"\nWhere a {args.pe} step's time goes in pebench's default here ({'bf16 autocast' if bf16 else 'fp32'}, "
        f"{cores} threads, torch.profiler over {args.steps} steps; attention FLOPs counted over the full T x T "
        f"matrix, as the floor counts them; rates against the {prec} peak of this run, {own / 1e9:,.0f} GFLOP/s, "
        f"at which the step's floor is {floor_s * 1e3:.1f} ms)\n"
    )
    print(f"| kind | ms per step | share | rate | x the step's {prec} floor |\n|---|---|---|---|---|")
    for kind, sec, share, f in parts:
        rate = f"{f / sec / 1e9:,.0f} GFLOP/s ({f / sec / own:.0%} of peak)" if f else ""
        print(f"| {kind} | {sec * 1e3:,.1f} | {share:.0%} | {rate} | {sec / floor_s:.2f} |")
    counted, total = sum(r[1] for r in parts if r[3]), sum(r[1] for r in parts)
    print(
        f"| the work the floor counts (matmuls and attention) | {counted * 1e3:,.1f} | {counted / total:.0%} | "
        f"{flops / counted / 1e9:,.0f} GFLOP/s ({flops / counted / own:.0%} of peak) | {counted / floor_s:.2f} |"
    )
    print(f"| the step (profiled) | {total * 1e3:,.1f} | 100% |  | {total / floor_s:.2f} |")
    print("\n| AdamW step alone (0.8M parameters) | ms |\n|---|---|")
    for mode, text in adam.items():
        print(f"| {mode} | {text} |")
    print_work_table(cfg, work, cores, peak, own)
