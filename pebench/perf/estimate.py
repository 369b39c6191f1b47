"""`pebench bench --estimate CONFIG`: what a config costs, on paper, before anything trains.

The arithmetic of a run at its config: parameters, FLOPs per token and per run (training, and evaluation at each
length), the memory of training (weights, gradients, AdamW's two moments, the activations kept for the backward
at the training batch) and of evaluation at each length (weights and the live set of one forward over a batch of
``eval.batch_tokens``), and the time all of it takes at a peak and a utilisation (``PEAKS``: the 2-core CPU as
measured, an A100, an H100/H200).

Conventions, the ones ``DecoderLM.flops_per_token`` states: FLOPs are PaLM's and nanoGPT's (6 per matmul weight per
trained token, 2 per evaluated token, plus q.k and a.v over the *full* T x T score matrix), so a predicted time is
the time at the stated utilisation of that count. Memory is counted as the model runs on the fused attention path
(flash-style SDPA or FlexAttention: no T x T tensor), plus the schemes' own terms, found by running each layer's
scheme once at a small width (``probe_scheme``, ``SchemeTerms``): a rotation that makes new q and k (RoPE) keeps two
more d-wide vectors per token, a logit term materialized for training (ALiBi, T5, Shaw at short contexts) an
H x T x T tensor per sequence (an upper bound: a term shared by the batch is held once). Training in bf16 prices the
fused attention of a CUDA step; on the CPU pebench's bf16 step runs SDPA's math kernel, which keeps the T x T
probabilities in fp32 (more than this). tests/test_estimate.py checks every count against a direct count on small
models (``torch.utils.flop_counter``, the tensors autograd saves, AdamW's state after a step, the live storages of
an evaluation forward; the allocator's peak only where CUDA exists). What it leaves out: the allocator's slack and
fragmentation, the framework's own workspace, and a compiled step's fusions (which keep less).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Optional

import torch

from ..config import Config, ModelConfig
from ..util.errors import UsageError


@dataclass(frozen=True)
class PeakPreset:
    """A device's dense matmul peak at the training precision and the share of it a run is assumed to reach."""

    name: str
    tflops: float
    mfu: float
    source: str


PEAKS = {
    "cpu2": PeakPreset(
        "cpu2",
        0.82,
        0.28,
        "2-core AMD EPYC with AVX512-BF16: bf16 matmul peak 822 GFLOP/s and the main job's training at 28% of it "
        "(docs/manual/speed.md, budgets, measured 2026-12-01)",
    ),
    "a100": PeakPreset("a100", 312.0, 0.40, "A100 SXM: 312 TFLOP/s dense bf16 (datasheet); 40% MFU assumed"),
    "h100": PeakPreset("h100", 989.0, 0.40, "H100/H200 SXM: 989 TFLOP/s dense bf16 (datasheet); 40% MFU assumed"),
}
GIB = 2**30


@dataclass(frozen=True)
class SchemeTerms:
    """What the layers' schemes add to the memory of a training step (found by ``probe_scheme``)."""

    rotating: int  # layers whose q and k become new tensors (RoPE): two more d-wide vectors per token each
    materializing: int  # layers whose training path keeps the whole logit term (or its blocks' probabilities)
    with_term: int = 0  # layers with a logit term at all (CPU inference materializes one, shared, up to 2,048)


@dataclass(frozen=True)
class EvalCost:
    length: int
    rows: int  # windows per forward pass (eval.batch_tokens // length, at least 1)
    flops_per_token: float  # forward only
    flops: float  # over eval.max_tokens scored tokens, one variant
    activation_bytes: int  # the live set of one forward over ``rows`` windows
    peak_bytes: int  # weights + activations


@dataclass(frozen=True)
class Estimate:
    config: str
    pe: str
    params: int  # every parameter (the tied head once)
    matmul_params: int  # the N of 6N: every matmul weight, the tied head as a matmul
    train_flops_per_token: float
    train_tokens: int
    train_flops: float
    weight_bytes: int
    grad_bytes: int
    optimizer_bytes: int  # AdamW's two fp32 moments
    autocast_bytes: int  # bf16 copies of the matmul weights autocast keeps during a step
    activation_bytes: int  # kept for the backward at the training batch
    precision: str
    evals: list[EvalCost]

    @property
    def train_peak_bytes(self) -> int:
        return self.weight_bytes + self.grad_bytes + self.optimizer_bytes + self.autocast_bytes + self.activation_bytes

    @property
    def eval_flops(self) -> float:
        return sum(e.flops for e in self.evals)


def train_activation_floats(m: ModelConfig, terms: SchemeTerms, batch: int, T: int) -> dict[str, float]:
    """Values autograd keeps for the backward of one step, by kind (4-byte floats in fp32; ``bf16_bytes`` prices
    them under autocast). Per layer and token: the two LayerNorms' inputs and statistics (2d + 4), the qkv, proj and
    first MLP inputs (3d), attention's q, k, v and output and its log-sum-exp per head (4d + H; the proj input is
    the output's storage), GELU's input and the last MLP input (2 d_mlp); then the final norm, the head's input
    and the log-softmax (2d + 2 + V)."""
    d, H, L, V = m.d_model, m.n_heads, m.n_layers, m.vocab_size
    tokens = batch * T
    out = {
        "norms": tokens * L * (2 * d + 4),
        "matmul_inputs": tokens * L * (2 * d),  # qkv and first-MLP inputs (proj's input is attention's output)
        "attention": tokens * L * (4 * d + H),
        "mlp_hidden": tokens * L * (2 * m.d_mlp),
        "rotated": tokens * terms.rotating * (2 * d),
        "logit_term": batch * terms.materializing * H * T * T,
        "head": tokens * (2 * d + 2 + V),
    }
    return out


def bf16_bytes(parts: dict[str, float], precision: str) -> int:
    """Bytes of ``train_activation_floats`` at a precision: under bf16 autocast (a CUDA step's fused attention) the
    matmul inputs, attention's tensors, the rotated q and k and the MLP hidden are bf16; norms, the logit term and
    the head's fp32 log-softmax stay fp32."""
    if precision != "bf16":
        return int(4 * sum(parts.values()))
    half = ("matmul_inputs", "attention", "mlp_hidden", "rotated")
    return int(sum(v * (2 if k in half else 4) for k, v in parts.items()))


def eval_activation_floats(m: ModelConfig, rows: int, L: int, terms: Optional[SchemeTerms] = None) -> int:
    """The live set of one forward without gradients over ``rows`` windows of L tokens, at its largest moment: in
    a block's attention phase (the residual stream, its norm, qkv, the output and its reshaped copy: 7d; a rotation
    that makes new q and k holds them and half-width temporaries beside: 5d/2 more) or its MLP phase (the residual
    stream, its norm and output, the hidden and its GELU: 3d + 2 d_mlp), whichever is larger; or the head (the
    residual stream, its norm and the logits: 2d + V), or the scorer's log-softmax beside the logits (2V). A
    scheme with a logit term adds, on the CPU up to ``attention.MATERIALIZE_MAX_LEN``, the term materialized once
    for every layer and window that share it (H x L x L; a lower bound: the attention kernel's own scores come on
    top); beyond it (and on CUDA) its fused path keeps no L x L tensor."""
    from ..model.attention import MATERIALIZE_MAX_LEN

    d = m.d_model
    rotating = terms is not None and terms.rotating > 0
    block = max(7 * d + (5 * d / 2 if rotating else 0), 3 * d + 2 * m.d_mlp)
    head = m.vocab_size + max(2 * d, m.vocab_size)
    term = m.n_heads * L * L if terms is not None and terms.with_term and L <= MATERIALIZE_MAX_LEN else 0
    return int(rows * L * max(block, head) + term)


def probe_scheme(cfg: Config) -> SchemeTerms:
    """Run each layer's scheme once at a small length on the CPU and read what it does: whether its rotation makes
    new q and k, and whether the training path at the config's context keeps its whole logit term (materialized
    for SDPA or the relative path, or as the exact chunked path's per-block probabilities)."""
    from ..model.attention import choose_backend
    from ..model.decoder import DecoderLM

    m = cfg.model  # each layer as configured, at a width of 8 per head (what a scheme does does not depend on it)
    small = replace(m, vocab_size=min(m.vocab_size, 256), d_model=8 * m.n_heads, d_mlp=8)
    with torch.no_grad():
        model = DecoderLM(small, cfg.train.random_positions)
        T = min(cfg.model.context, 32)
        x = torch.randn(1, T, small.d_model)
        rotating = materializing = with_term = 0
        for block in model.blocks:
            attn = block.attn
            q, k, _, mod = attn.qkv_and_term(x, model.pe, torch.arange(T))
            raw = attn.qkv(x).view(1, T, 3, small.n_heads, -1).permute(2, 0, 3, 1, 4)
            rotating += not (torch.equal(q, raw[0]) and torch.equal(k, raw[1]))
            materializing += mod is not None and choose_backend("cpu", cfg.model.context, mod, True) != "flex"
            with_term += mod is not None
    return SchemeTerms(rotating, materializing, with_term)


def count_params(cfg: Config) -> tuple[int, int]:
    """(every parameter, the matmul weights of 6N), read off the model built on the meta device (no memory)."""
    from ..model.decoder import DecoderLM

    with torch.device("meta"):
        model = DecoderLM(cfg.model, cfg.train.random_positions)
    n = sum(
        p.numel()
        for name, p in model.named_parameters()
        if p.dim() >= 2 and not name.startswith("tok.") and not name.startswith("pe.")
    )
    return model.num_params(), n + cfg.model.vocab_size * cfg.model.d_model


_FACTS: dict = {}


def _model_facts(cfg: Config) -> tuple:
    """``count_params`` and ``probe_scheme`` of a config, each model built once per process: both read the model
    alone (its config and whether it draws positions), and the docs ask for one model under many plans."""
    key = repr((cfg.model, cfg.train.random_positions))
    if key not in _FACTS:
        _FACTS[key] = (count_params(cfg), probe_scheme(cfg))
    return _FACTS[key]


def estimate(cfg: Config, precision: str = "fp32", lengths: Optional[list[int]] = None) -> Estimate:
    """Every figure of ``pebench bench --estimate`` for a config (its scheme, ``cfg.model.pe``)."""
    if precision not in ("fp32", "bf16"):
        raise UsageError(f"--precision must be fp32 or bf16, got {precision!r}")
    m, t = cfg.model, cfg.train
    (params, n), terms = _model_facts(cfg)
    T = m.context
    per_token = 6 * n + 12 * m.n_layers * T * m.d_model
    tokens = t.steps * t.batch_size * T
    acts = bf16_bytes(train_activation_floats(m, terms, t.batch_size, T), precision)
    evals = []
    for L in lengths or [T * k for k in cfg.eval.multiples]:
        rows = max(1, cfg.eval.batch_tokens // L)
        fwd = 2 * n + 4 * m.n_layers * L * m.d_model
        a = 4 * eval_activation_floats(m, rows, L, terms)  # counted in fp32: an upper bound where it runs in bf16
        evals.append(EvalCost(L, rows, fwd, fwd * cfg.eval.max_tokens, a, 4 * params + a))
    return Estimate(
        cfg.name,
        m.pe,
        params,
        n,
        per_token,
        tokens,
        per_token * tokens,
        4 * params,
        4 * params,
        8 * params,
        2 * n if precision == "bf16" else 0,
        acts,
        precision,
        evals,
    )


def predicted_seconds(flops: float, preset: PeakPreset) -> float:
    return flops / (preset.tflops * 1e12 * preset.mfu)


def custom_preset(tflops: Optional[float], mfu: Optional[float]) -> list[PeakPreset]:
    """The presets, or one of the user's (``--peak-tflops``, ``--mfu``)."""
    if tflops is None:
        if mfu is not None:
            return [replace(p, mfu=mfu) for p in PEAKS.values()]
        return list(PEAKS.values())
    if not (tflops > 0 and math.isfinite(tflops)):
        raise UsageError(f"--peak-tflops must be a positive number, got {tflops}")
    u = 0.4 if mfu is None else mfu
    return [PeakPreset("given", tflops, u, f"{tflops:g} TFLOP/s given, {u:.0%} utilisation")]


def _size(b: float) -> str:
    return f"{b / GIB:,.2f} GiB" if b >= GIB / 10 else f"{b / 2**20:,.1f} MiB"


def _time(s: float) -> str:
    if s >= 3600:
        return f"{s / 3600:,.1f} h"
    return f"{s / 60:,.1f} min" if s >= 60 else f"{s:,.1f} s"


def estimate_markdown(e: Estimate, presets: list[PeakPreset]) -> str:
    """The estimate as the tables ``pebench bench --estimate`` prints (and the docs quote)."""
    lines = [
        f"Estimate for config `{e.config}` (scheme {e.pe}, training in {e.precision}): {e.params:,} parameters "
        f"({e.matmul_params:,} in matmuls, the tied head counted as one).",
        "",
        "| training | value |",
        "|---|---|",
        f"| FLOPs per token (6N + 12 L T d) | {e.train_flops_per_token:.3g} |",
        f"| tokens | {e.train_tokens:,} ({e.train_tokens / e.params:.1f} per parameter) |",
        f"| FLOPs per run | {e.train_flops:.3g} |",
        f"| weights / gradients / AdamW moments | {_size(e.weight_bytes)} / {_size(e.grad_bytes)} / "
        f"{_size(e.optimizer_bytes)} |",
        f"| activations kept for the backward | {_size(e.activation_bytes)} |",
        f"| peak of a step | {_size(e.train_peak_bytes)} |",
        "",
        "| evaluation length | windows per pass | FLOPs per token | FLOPs (one variant) | activations | peak |",
        "|---|---|---|---|---|---|",
    ]
    for c in e.evals:
        lines.append(
            f"| {c.length:,} | {c.rows} | {c.flops_per_token:.3g} | {c.flops:.3g} | {_size(c.activation_bytes)} | "
            f"{_size(c.peak_bytes)} |"
        )
    lines += ["", "| device | peak TFLOP/s | MFU | training | evaluation (one variant) | source |", "|---" * 6 + "|"]
    for p in presets:
        lines.append(
            f"| {p.name} | {p.tflops:g} | {p.mfu:.0%} | {_time(predicted_seconds(e.train_flops, p))} | "
            f"{_time(predicted_seconds(e.eval_flops, p))} | {p.source} |"
        )
    return "\n".join(lines) + "\n"


def suite_cost(base: Config, points, schemes: list[str], seeds: int = 3) -> str:
    """A suite's training on paper, point by point (each point's ``apply`` of ``base``; every scheme, ``seeds``
    seeds), at the 2-core CPU preset: a markdown table with the total."""
    cpu = PEAKS["cpu2"]
    lines = [
        "| point | axis | params | tokens per run | tokens per parameter "
        f"| training FLOPs (every scheme, {seeds} seeds) | at the cpu2 preset |",
        "|---" * 7 + "|",
    ]
    total = 0.0
    for p in points:
        cfg = p.apply(base)
        flops = seeds * sum(
            estimate(replace(cfg, model=replace(cfg.model, pe=s)), "bf16", [cfg.model.context]).train_flops
            for s in schemes
        )
        e = estimate(cfg, "bf16", [cfg.model.context])
        total += flops
        lines.append(
            f"| {cfg.name} | {p.axis or 'all'} | {e.params:,} | {e.train_tokens:,} | "
            f"{e.train_tokens / e.params:.2f} | {flops:.3g} | {predicted_seconds(flops, cpu) / 3600:.1f} h |"
        )
    lines.append(f"| **all** | | | | | {total:.3g} | {predicted_seconds(total, cpu) / 3600:.1f} h |")
    return "\n".join(lines) + "\n"
