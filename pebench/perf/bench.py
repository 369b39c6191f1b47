"""`pebench bench`: training and evaluation speed, peak memory and MFU, fast path vs reference.

Every figure is a median over repeats after a warm-up. On CPU each measurement runs in a fresh
subprocess so that its peak resident memory (ru_maxrss) is its own; on CUDA the allocator's peak is
reset between measurements instead.
"""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, replace
from typing import Optional

import torch

from ..config import Config, ModelConfig
from ..model.decoder import DecoderLM
from ..model.device import autocast_for
from ..results import peak_rss_mb
from ..util.errors import PebenchError


@dataclass
class Measurement:
    scheme: str
    phase: str  # train | eval
    path: str  # fast | fast+compile | reference
    length: int
    tokens_per_s: float
    step_ms: float
    peak_mem_mb: float
    mfu: Optional[float] = None  # model_flops / the matmul peak, set once the peak is known
    backend: str = ""
    model_flops: Optional[float] = None  # achieved model FLOP/s (training rows)


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def matmul_peak(
    device: str = "cpu", n: int = 2048, runs: int = 7, seconds: float = 0.3, dtype: Optional[torch.dtype] = None
) -> float:
    """A ceiling for MFU: the best FLOP/s over ``runs`` timed runs, each a loop of n x n matmuls (``dtype``; default
    fp32 on CPU, bf16 on CUDA) lasting at least ``seconds``. The best, not the median: anything else on the machine
    can only slow a run down, and a ceiling measured low inflates every MFU."""
    dev = torch.device(device)
    dtype = dtype or (torch.bfloat16 if dev.type == "cuda" else torch.float32)
    n = 8192 if dev.type == "cuda" else n
    a, b = torch.randn(n, n, device=dev, dtype=dtype), torch.randn(n, n, device=dev, dtype=dtype)
    a @ b  # warm-up
    best = 0.0
    for _ in range(runs):
        _sync(dev)
        t, k = time.perf_counter(), 0
        while True:
            a @ b
            k += 1
            _sync(dev)
            elapsed = time.perf_counter() - t
            if elapsed >= seconds:
                break
        best = max(best, 2 * n**3 * k / elapsed)
    return best


@dataclass
class Peak:
    """The MFU denominator: the matmul peak measured alone before and after the measurements (the higher
    is used), with the thread count the measurements ran with."""

    before: float
    after: float
    threads: int

    @property
    def flops(self) -> float:
        return max(self.before, self.after)

    def describe(self) -> str:
        return (
            f"matmul peak {self.flops / 1e9:,.0f} GFLOP/s (MFU denominator: best of 7 runs of >= 0.3 s, measured "
            f"alone with {self.threads} threads; {self.before / 1e9:,.0f} before and {self.after / 1e9:,.0f} "
            "after the measurements)"
        )


IMPLAUSIBLE_MFU = 0.75


class _XTLoss(torch.nn.Module):
    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x, y=None):
        logits = self.net(x)
        if y is None:
            return logits
        return logits, torch.nn.functional.cross_entropy(logits.view(-1, logits.shape[-1]), y.reshape(-1))


def _x_transformers(cfg: ModelConfig) -> torch.nn.Module:
    """x-transformers' decoder with rotary embeddings at the shape of ``cfg`` (for comparison only)."""
    from x_transformers import Decoder, TransformerWrapper

    net = TransformerWrapper(
        num_tokens=cfg.vocab_size,
        max_seq_len=cfg.context,
        use_abs_pos_emb=False,
        attn_layers=Decoder(
            dim=cfg.d_model,
            depth=cfg.n_layers,
            heads=cfg.n_heads,
            ff_mult=cfg.d_mlp // cfg.d_model,
            rotary_pos_emb=True,
        ),
    )
    return _XTLoss(net)


def x_transformers_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("x_transformers") is not None


def _peak_mb(dev: torch.device) -> float:
    if dev.type == "cuda":
        return torch.cuda.max_memory_allocated(dev) / 2**20
    return peak_rss_mb() or 0.0


def measure(model_cfg: dict, phase: str, path: str, length: int, batch: int, repeats: int, device: str) -> dict:
    """One measurement (run in-process on CUDA, in a subprocess on CPU)."""
    dev = torch.device(device)
    cfg = ModelConfig(**model_cfg)
    torch.manual_seed(0)
    model = DecoderLM(cfg).to(dev)
    backend = "math" if path == "reference" else "auto"
    model.set_attention_backend(backend)
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.cuda.reset_peak_memory_stats(dev)
    fwd = torch.compile(model) if path == "fast+compile" else model
    if path == "x-transformers":  # the peer baseline at the same shape (optional dependency)
        fwd = _x_transformers(cfg).to(dev)
        model_params = fwd.parameters
    else:
        model_params = model.parameters
    x = torch.randint(0, cfg.vocab_size, (batch, length), device=dev)
    amp = autocast_for(dev, "bf16" if dev.type == "cuda" else "fp32")  # its tables: bf16 on CUDA, fp32 on CPUs
    times = []
    if phase == "train":
        opt = torch.optim.AdamW(model_params(), lr=1e-4, fused=dev.type == "cuda")
        for i in range(repeats + 2):  # two warm-up steps (compilation happens there)
            _sync(dev)
            t = time.perf_counter()
            with amp:
                _, loss = fwd(x, x)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            _sync(dev)
            if i >= 2:
                times.append(time.perf_counter() - t)
    else:
        model.eval()
        with torch.inference_mode():
            for i in range(repeats + 1):
                _sync(dev)
                t = time.perf_counter()
                with amp:
                    fwd(x)
                _sync(dev)
                if i >= 1:
                    times.append(time.perf_counter() - t)
    step = statistics.median(times)
    tps = batch * length / step
    mfu_flops = model.flops_per_token(length) * tps if phase == "train" else None
    return {"tokens_per_s": tps, "step_ms": step * 1e3, "peak_mem_mb": _peak_mb(dev), "flops": mfu_flops}


def peak_sample(device: str, threads: Optional[int] = None, **kw) -> dict:
    """The matmul peak with the thread count it was measured on (run alone in a worker process: ``_isolated``)."""
    if threads:
        torch.set_num_threads(threads)
    return {"flops": matmul_peak(device, **kw), "threads": torch.get_num_threads()}


def _isolated(fn: str, device: str, **kw) -> dict:
    """Run ``measure`` or ``peak_sample`` alone in a fresh process on CPU (its own peak memory, nothing else
    of the benchmark running), in-process on CUDA."""
    if device.startswith("cuda"):
        return globals()[fn](device=device, **kw)
    args = json.dumps({"fn": fn, "device": device, **kw})
    p = subprocess.run([sys.executable, "-m", "pebench.perf.bench", args], capture_output=True, text=True)
    if p.returncode != 0:
        raise PebenchError(worker_failure(p.returncode, p.stderr, kw))
    return json.loads(p.stdout.strip().splitlines()[-1])


def worker_failure(code: int, stderr: str, kw: dict) -> str:
    """One line for a benchmark worker that failed: what it measured, how it ended (its exit code, or the signal
    that killed it), and its error (the last line that names an exception; never a warning that happened to be
    printed last)."""
    scheme = (kw.get("model_cfg") or {}).get("pe")
    what = " ".join(
        f"{k}={v}" for k, v in (("scheme", scheme), *((k, kw.get(k)) for k in ("phase", "path", "length"))) if v
    )
    what = what or "the matmul peak"
    how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
    errors = [x.strip() for x in stderr.splitlines() if re.match(r"^[\w.]+(Error|Exception|Interrupt)\b", x.strip())]
    tail = f": {errors[-1]}" if errors else " without an error message (out of memory, or a crash in a library)"
    return f"bench: the worker measuring {what} {how}{tail}; rerun with --debug or alone to see it"


def run_bench(
    cfg: Config,
    schemes: list[str],
    lengths: list[int],
    device: str = "cpu",
    repeats: int = 3,
    compile_: bool = True,
    reference: bool = True,
    on_row=None,
    baseline: bool = True,
    peak_kw: Optional[dict] = None,
) -> tuple[list[Measurement], Peak]:
    before = _isolated("peak_sample", device, **(peak_kw or {}))
    T = cfg.model.context
    rows = []

    def add(scheme, phase, path, length, batch):
        mc = asdict(replace(cfg.model, pe=scheme))
        r = _isolated(
            "measure", device, model_cfg=mc, phase=phase, path=path, length=length, batch=batch, repeats=repeats
        )
        m = Measurement(
            scheme, phase, path, length, r["tokens_per_s"], r["step_ms"], r["peak_mem_mb"], model_flops=r["flops"]
        )
        rows.append(m)
        if on_row:
            on_row(m)

    for s in schemes:
        paths = ["fast"] + (["fast+compile"] if compile_ else []) + (["reference"] if reference else [])
        if s == "rope" and baseline and x_transformers_available():
            paths.append("x-transformers")
        for path in paths:
            add(s, "train", path, T, cfg.train.batch_size)
        limit = DecoderLM(replace(cfg.model, pe=s)).pe.max_positions()
        for L in lengths:  # evaluation lengths in tokens (``--lengths``: N or Kx the context)
            if limit is not None and L > limit:
                continue  # the scheme cannot represent this length (learned beyond its table)
            batch = max(1, cfg.eval.batch_tokens // L)
            for path in ["fast"] + (["reference"] if reference else []):
                add(s, "eval", path, L, batch)
    after = _isolated("peak_sample", device, threads=before["threads"], **(peak_kw or {}))
    peak = Peak(before["flops"], after["flops"], before["threads"])
    apply_peak(rows, peak)
    return rows, peak


def apply_peak(rows: list[Measurement], peak: Peak) -> None:
    """MFU = achieved model FLOP/s over the ceiling."""
    for m in rows:
        m.mfu = m.model_flops / peak.flops if m.model_flops else None


def to_frame(rows: list[Measurement], peak: Optional[Peak] = None):
    import pandas as pd

    df = pd.DataFrame([asdict(r) for r in rows])
    if peak is not None:  # every row carries the ceiling its MFU was computed against
        df["matmul_peak_gflops"], df["threads"] = peak.flops / 1e9, peak.threads
    return df


def summary_markdown(rows: list[Measurement], peak: Peak, device: str) -> str:
    df = to_frame(rows)
    out = [
        f"Device: {device}; {peak.describe()}. Medians after warm-up.",
        "",
        "| scheme | phase | path | length | tokens/s | ms/step | peak MB | MFU |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in df.itertuples():
        mfu = "" if r.mfu is None or r.mfu != r.mfu else f"{100 * r.mfu:.0f}%"
        out.append(
            f"| {r.scheme} | {r.phase} | {r.path} | {r.length} | {r.tokens_per_s:,.0f} | {r.step_ms:.1f} | "
            f"{r.peak_mem_mb:,.0f} | {mfu} |"
        )
    # ratios measured side by side
    out += [
        "",
        "| scheme | train step vs rope | compiled, vs rope compiled | eval speedup fast/reference at longest length |",
        "|---|---|---|---|",
    ]
    train = df[df.phase == "train"]
    ev = df[df.phase == "eval"]
    Lmax = ev["length"].max() if len(ev) else None
    for s in df["scheme"].unique():
        ratios = []
        for path in ("fast", "fast+compile"):
            t = train[train.path == path].set_index("scheme")["step_ms"]
            ratios.append(f"{t[s] / t['rope']:.2f}x" if "rope" in t and s in t else "")
        e = ev[(ev.scheme == s) & (ev.length == Lmax)].set_index("path")["tokens_per_s"]
        sp = f"{e['fast'] / e['reference']:.1f}x" if "reference" in e and "fast" in e else ""
        out.append(f"| {s} | {ratios[0]} | {ratios[1]} | {sp} |")
    high = df[df["mfu"].notna() & (df["mfu"] > IMPLAUSIBLE_MFU)] if "mfu" in df else df.iloc[:0]
    if len(high):
        worst = high.loc[high["mfu"].idxmax()]
        out += [
            "",
            f"**Warning: MFU up to {100 * worst.mfu:.0f}% ({worst.scheme}, {worst.path}) is implausibly high** "
            f"(above {100 * IMPLAUSIBLE_MFU:.0f}% of the matmul peak): the peak was probably measured low "
            "(something else running?). Rerun `pebench bench` on a quiet machine before quoting MFU.",
        ]
    xt = df[df.path == "x-transformers"]
    if len(xt):
        ours = df[(df.scheme == "rope") & (df.phase == "train") & (df.path != "x-transformers")]
        best = ours.loc[ours["tokens_per_s"].idxmax()]
        out.append("")
        out.append(
            f"rope training vs x-transformers at the same shape: {best.tokens_per_s:,.0f} tok/s ({best.path}) "
            f"vs {xt.iloc[0].tokens_per_s:,.0f} tok/s = {best.tokens_per_s / xt.iloc[0].tokens_per_s:.2f}x"
        )
    return "\n".join(out) + "\n"


if __name__ == "__main__":  # worker entry: one isolated measurement, JSON on the last stdout line
    kw = json.loads(sys.argv[1])
    print(json.dumps(globals()[kw.pop("fn")](**kw)))


def floor_markdown(cfg: Config, schemes: list[str], peak: Peak, root) -> str:
    """The training floor of `pebench run` on this config and these schemes at the peak just measured, and the last
    run's wall time against it where a profile of one is in the results folder."""
    from pathlib import Path

    from ..model.checkpoint import train_flops

    flops = sum(train_flops(replace(cfg, model=replace(cfg.model, pe=s))) for s in schemes)
    floor = flops / peak.flops
    out = [
        f"Training floor of `pebench run --pe {','.join(schemes)}` on this config: {flops:.2e} FLOPs = "
        f"{floor:,.0f} s ({floor / 60:.1f} min) at this peak."
    ]
    prof = Path(root) / "profile.md"
    if prof.exists():
        out.append(
            f"The last `pebench run` in this folder (its own peak and floor): {prof.read_text().splitlines()[0]}"
        )
    return "\n\n".join(out)


def write_bench(root, rows: list[Measurement], peak: Peak, device: str, floor: str = "") -> str:
    """bench.md and bench.csv in ``root``, written atomically; returns the markdown."""
    from pathlib import Path

    from ..util.fsutil import atomic_path, atomic_write_text

    md = summary_markdown(rows, peak, device) + (f"\n{floor}\n" if floor else "")
    atomic_write_text(Path(root) / "bench.md", md)
    with atomic_path(Path(root) / "bench.csv") as tmp:
        to_frame(rows, peak).to_csv(tmp, index=False)
    return md
