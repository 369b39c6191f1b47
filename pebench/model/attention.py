"""Causal attention backends. All compute softmax(q k^T * scale + logit term, causal) v (+ value term).

- ``sdpa``:  fused ``scaled_dot_product_attention``. With no logit term it uses ``is_causal=True``
             (flash / memory-efficient kernels, O(T) memory). With a logit term it materializes the
             per-head bias [*, H, T, T] as ``attn_mask`` (the "materialized-bias path"; fine at
             training lengths and differentiable with respect to the bias). CPU inference hands the
             fused kernel the bias unmasked with ``is_causal``, so it skips the masked half, and reuses
             a bias whose scheme keys it (``ScoreMod.key``) across layers and batches.
- ``flex``:  compiled FlexAttention with a causal block mask; the logit term runs inside the kernel as
             a score modification, so no T x T tensor exists. On CPU it is inference-only and cannot
             return the log-sum-exp, so a scheme with a value term (Shaw) uses ``banded`` there.
- ``chunked``: exact attention one block of queries at a time: O(block x T) memory, differentiable,
             any device, provides the log-sum-exp.
- ``banded``: for a logit term that is constant beyond a band of distances (Shaw beyond k_max): a fused
             causal attention over the far keys merged with an explicit narrow band, by log-sum-exp;
             O(T x band) memory, exact, CPU inference.
- ``relative``: for Shaw-style relative vectors (training): the score matrix is explicit, and the
             distance terms live on its diagonals, read and written in place through a strided view;
             forward and backward are written by hand, so no [T, T, d_h] or gathered bias exists.
- ``math``:  the plain reference: the whole score matrix, written for readability (tests).

``auto`` picks: sdpa without a logit term; with one, sdpa while training (short sequences, gradients
to the bias) or relative for relative vectors, flex for inference on CUDA; on CPU for inference:
relative up to 8 band widths, banded beyond; sdpa up to 2048 tokens for the other logit terms (measured
fastest there), flex beyond; chunked where nothing faster is exact.
"""

from __future__ import annotations

import functools
from typing import Optional

import torch
import torch.nn.functional as F

from ..util.errors import UsageError
from .pe.base import ScoreMod, band_scores, band_values
from .spans import Span

BACKENDS = ("auto", "sdpa", "flex", "chunked", "banded", "relative", "math")
MATERIALIZE_MAX_LEN = 2048  # CPU inference: up to here a materialized bias + fused SDPA is fastest
CHUNK = 256
# CPU inference with relative vectors: the explicit relative path beats the banded split up to about
# 8 band widths (`pebench bench --pe shaw` measures both paths).
RELATIVE_MAX_BANDS = 8

_compile_flex = True
# CPU inference keeps the last materialized logit term whose scheme gives it a key (attention._inference_bias),
# up to this size (a [4, 2048, 2048] fp32 term is 64 MiB)
BIAS_CACHE_BYTES = 256 * 2**20
_BIAS_CACHE: dict = {}


def set_flex_compile(enabled: bool) -> None:
    """Compiled FlexAttention is the fast path; eager flex (debugging) materializes scores."""
    global _compile_flex
    _compile_flex = enabled


def _grid(q: torch.Tensor, q_offset: int, n_q: int, n_k: int):
    dev = q.device
    b = torch.arange(q.shape[0], device=dev).view(-1, 1, 1, 1)
    h = torch.arange(q.shape[1], device=dev).view(1, -1, 1, 1)
    qi = torch.arange(q_offset, q_offset + n_q, device=dev).view(1, 1, -1, 1)
    ki = torch.arange(n_k, device=dev).view(1, 1, 1, -1)
    return b, h, qi, ki


def _masked_bias(
    q: torch.Tensor, mod: Optional[ScoreMod], q_offset: int, n_k: int, dtype: Optional[torch.dtype] = None
) -> torch.Tensor:
    """The term for queries q_offset .. q_offset + len(q) against n_k keys (zero without one), in ``dtype`` (q's by
    default), -inf above the causal diagonal: the ``attn_mask`` SDPA takes where the kernel cannot apply the causal
    mask itself."""
    b, h, qi, ki = _grid(q, q_offset, q.shape[2], n_k)
    dtype = dtype or q.dtype
    term = torch.zeros((), dtype=dtype, device=q.device) if mod is None else mod.bias(b, h, qi, ki).to(dtype)
    return term.masked_fill(ki > qi, float("-inf"))


def _causal_scores(q, k, mod: Optional[ScoreMod], scale: float, q_offset: int = 0, materialize: bool = False):
    """Scores for queries q_offset .. q_offset + len(q) against the keys, with the logit term and the mask.

    ``materialize=False`` applies the scheme's score modification to the scores (the reference);
    ``True`` adds its materialized bias (the fast equivalent the chunked and sdpa paths use)."""
    b, h, qi, ki = _grid(q, q_offset, q.shape[2], k.shape[2])
    s = (q @ k.transpose(-1, -2)) * scale
    if mod is not None:
        s = s + mod.bias(b, h, qi, ki) if materialize else mod(s, b, h, qi, ki)
    return s.masked_fill(ki > qi, float("-inf"))


def _fp32(*ts: torch.Tensor) -> tuple:
    """Half-precision q, k, v in fp32, as SDPA's math kernel computes them: scores, log-sum-exp and weights rounded
    to bf16 drift (the log-sum-exp by tenths of a nat at T = 128), and training through them diverged. The callers
    run with autocast off (``_no_autocast``), which would otherwise cast the matmuls back to bf16."""
    return tuple(t.float() if t.dtype in (torch.bfloat16, torch.float16) else t for t in ts)


def _no_autocast(fn):
    """Run ``fn`` with autocast off on its tensors' device (it computes in the dtypes it chooses)."""
    import functools

    @functools.wraps(fn)
    def wrapped(q, *args, **kwargs):
        with torch.autocast(q.device.type, enabled=False):
            return fn(q, *args, **kwargs)

    return wrapped


def _weights(s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The attention weights exp(s - lse) of masked scores and their log-sum-exp, both by softmax's own kernel: ATen's
    vectorized exp (and logsumexp with it) takes a slow path on -inf and very negative inputs
    (results/speed/attention-weights.md). The log-sum-exp is the row's largest score less the log of its largest
    weight (at least 1/n, so the log is exact to fp rounding); autograd through both gives the weights as its
    gradient, as logsumexp's does. The same values up to rounding, the same gradients."""
    p = torch.softmax(s, dim=-1)
    return p, s.amax(dim=-1) - torch.log(p.amax(dim=-1))


@_no_autocast
def attention_math(q, k, v, mod: Optional[ScoreMod], scale: float, chunk: Optional[int] = None):
    """Reference attention (unchunked), or the exact chunked path: one block of queries at a time
    against the keys up to the block's end. Returns (out, lse)."""
    T, dt = q.shape[2], v.dtype
    q, k, v = _fp32(q, k, v)
    step = chunk or T
    outs, lses = [], []
    for start in range(0, T, step):
        stop = min(T, start + step)
        s = _causal_scores(q[:, :, start:stop], k[:, :, :stop], mod, scale, start, materialize=chunk is not None)
        p, lse = _weights(s)
        outs.append(p @ v[:, :, :stop])
        lses.append(lse)
    return torch.cat(outs, dim=2).to(dt), torch.cat(lses, dim=2)


def _cpu_half_training(q: torch.Tensor, v: torch.Tensor) -> bool:
    """Half-precision q or v on the CPU with gradients (bf16 autocast training): SDPA's math kernel would upcast them
    to fp32 anyway, and in half precision the fused CPU kernel's backward is slow; ``_fp32_training_attention`` is
    neither."""
    half = (torch.bfloat16, torch.float16)
    return (q.dtype in half or v.dtype in half) and q.device.type == "cpu" and torch.is_grad_enabled()


@_no_autocast
def _fp32_training_attention(q, k, v, mask: Optional[torch.Tensor], scale: float) -> torch.Tensor:
    """CPU half-precision training attention computed in fp32, as SDPA's math kernel computes it (``_fp32``), but
    faster (docs/manual/speed.md, the attention rows of the lever table): without a term the fused causal kernel in fp32
    (1.6x the math kernel's forward and backward at 32 x 4 x 128 x 32 on an AMX Xeon); with one (``mask``: the
    term, -inf above the diagonal) one fp32 matmul added to it, softmax, and the value matmul (1.4x). The output is
    in v's dtype; the term keeps its gradient."""
    dt = v.dtype
    q, k, v = _fp32(q, k, v)
    if mask is None:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale).to(dt)
    s = torch.add(mask.float(), q @ k.transpose(-1, -2), alpha=scale)
    return (torch.softmax(s, dim=-1) @ v).to(dt)


def _inference_bias(mod: ScoreMod, q: torch.Tensor) -> torch.Tensor:
    """The term on the whole [T, T] grid, unmasked, as a 4-d tensor in q's dtype (fp32 for half q on the CPU), for
    inference. Where the scheme names what its term depends on (``ScoreMod.key``), the last one built is kept and
    reused by every layer and batch whose key, length, dtype and device are equal (T5's shared table, ALiBi's
    slopes): one build per length instead of one per layer and batch."""
    T = q.shape[2]
    # fp32 under half-precision q on the CPU (bf16 evaluation): the fused kernel takes an fp32 term and accumulates
    # in fp32, and rounded to bf16 a term would move by up to 1/256 of its size (whole units for a term of hundreds)
    dt = torch.float32 if q.dtype in (torch.bfloat16, torch.float16) and q.device.type == "cpu" else q.dtype
    key = None if mod.key is None else (mod.key(), T, dt, q.device)
    if key is not None and key in _BIAS_CACHE:
        return _BIAS_CACHE[key]
    b, h, qi, ki = _grid(q, 0, T, T)
    bias = mod.bias(b, h, qi, ki).to(dt)
    bias = bias.reshape((1,) * (4 - bias.dim()) + tuple(bias.shape))
    if bias.shape[-2:] != (T, T) or bias.stride(-1) != 1:
        bias = bias.expand(*bias.shape[:2], T, T).contiguous()
    if key is not None and bias.numel() * bias.element_size() <= BIAS_CACHE_BYTES:
        _BIAS_CACHE.clear()
        _BIAS_CACHE[key] = bias
    return bias


def attention_sdpa(q, k, v, mod: Optional[ScoreMod], scale: float):
    if v.shape[-1] < q.shape[-1]:  # values narrower than q and k (PoPE's 2 d_h): padded, so the fused kernels run
        out, lse = attention_sdpa(q, k, F.pad(v, (0, q.shape[-1] - v.shape[-1])), mod, scale)
        return out[..., : v.shape[-1]], lse
    if mod is None:
        if _cpu_half_training(q, v):
            return _fp32_training_attention(q, k, v, None, scale), None
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale), None
    if mod.needs_lse:  # the log-sum-exp is needed anyway: one explicit softmax beats SDPA + a second q.k
        return attention_math(q, k, v, mod, scale, chunk=q.shape[2])
    if q.device.type == "cpu" and not torch.is_grad_enabled():
        # CPU inference: the fused kernel takes the term and the causal mask together (it skips the blocks above
        # the diagonal and masks the rest itself), so the term needs no -inf mask and the masked half costs nothing
        # (no gradient flows to its attn_mask, hence inference only)
        out = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            q, k, v, 0.0, True, attn_mask=_inference_bias(mod, q), scale=scale
        )[0]
        return out, None
    if _cpu_half_training(q, v):  # the term in fp32, not rounded to q's dtype
        return _fp32_training_attention(q, k, v, _masked_bias(q, mod, 0, k.shape[2], torch.float32), scale), None
    return F.scaled_dot_product_attention(q, k, v, attn_mask=_masked_bias(q, mod, 0, k.shape[2]), scale=scale), None


def attention_banded(q, k, v, mod: ScoreMod, scale: float):
    """Exact attention for a logit term that is constant (per query) beyond ``mod.band`` keys back.

    Keys at distance >= W form a plain causal attention of queries W.. over keys ..T-W (fused flash
    kernel, O(T) memory, with its log-sum-exp); the W nearest keys are scored explicitly; the two
    parts are merged by their log-sum-exps. Inference only (the fused kernel gives no gradient
    through its log-sum-exp). Returns (out, lse).
    """
    B, H, T, D = q.shape
    W = min(mod.band, T)
    b, h = _grid(q, 0, 1, 1)[:2]
    i = torch.arange(T, device=q.device).view(1, 1, T, 1)
    d = torch.arange(W, device=q.device).view(1, 1, 1, W)
    zero = torch.zeros((), dtype=q.dtype, device=q.device)
    s_band = band_scores(q, k, W) * scale + mod(zero, b, h, i, i - d)
    s_band = s_band.masked_fill(d > i, float("-inf"))
    lse_band = torch.logsumexp(s_band, dim=-1)
    if T > W:
        out_far, lse_far = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            q[:, :, W:], k[:, :, : T - W], v[:, :, : T - W], 0.0, True, scale=scale
        )[:2]
        far_term = mod(zero, b, h, i[:, :, W:], i[:, :, W:] - W).squeeze(-1)  # same for every far key
        lse_far = F.pad(lse_far + far_term, (W, 0), value=float("-inf"))
        out_far = F.pad(out_far, (0, 0, W, 0))
        lse = torch.logaddexp(lse_band, lse_far)
        far_weight = torch.exp(lse_far - lse).unsqueeze(-1)
    else:
        lse, far_weight, out_far = lse_band, 0.0, 0.0
    p_band = torch.exp(s_band - lse.unsqueeze(-1))
    return band_values(p_band, v) + out_far * far_weight, lse


def _diagonals(buf: torch.Tensor, BH: int, T: int, W: int) -> torch.Tensor:
    """A [BH, T, W] view of the W diagonals of the [BH, T, T] matrices stored at ``buf[W - 1:]``:
    element (n, i, e) is entry (i, i - d) of matrix n, for distance d = W - 1 - e.

    Row i starts at i * T, so stepping to row i + 1 and column + 1 is a stride of T + 1. Where d > i (no
    such key) the view points into row i - 1 above its diagonal, where scores are -inf and probabilities
    and their gradients exactly 0, so those entries read as 0 and writes there change nothing that is
    used. Row 0 is the exception: it points back into the last row of matrix n - 1 (or the
    uninitialised pad), so callers zero what they write there and what they read from there."""
    return buf.as_strided((BH, T, W), (T * T, T + 1, 1))  # keeps buf's storage offset


class _RelativeAttention(torch.autograd.Function):
    """softmax(q k^T * scale + band logits, causal) v + band values, for [BH, T, D] inputs.

    ``rk``/``rv`` ([W, D], row e for distance d = W - 1 - e) are the relative key/value vectors minus
    the far vector: the far logit is one constant per query (softmax ignores it) and the far value
    vector is added by the caller, because the probabilities of a row sum to one. Memory: one [BH, T, T]
    matrix kept for the backward and one more during it; the extra work is O(T * W * D)."""

    @staticmethod
    def forward(ctx, q, k, v, rk, rv, scale):
        BH, T, _ = q.shape
        W = rk.shape[0]
        dev, dt = q.device, q.dtype
        causal = torch.full((T, T), float("-inf"), device=dev, dtype=dt).triu_(1)
        sbuf = torch.empty(W - 1 + BH * T * T, device=dev, dtype=dt)
        s = sbuf[W - 1 :].view(BH, T, T)
        torch.baddbmm(causal, q, k.transpose(1, 2), alpha=scale, out=s)
        _diagonals(sbuf, BH, T, W).add_(_row0_zeroed((q @ rk.t()).mul_(scale)))
        pbuf = _like_or_same(sbuf)
        p = pbuf[W - 1 :].view(BH, T, T)
        torch.ops.aten._softmax.out(s, -1, False, out=p)
        del sbuf, s
        p_band = _row0_zeroed(_diagonals(pbuf, BH, T, W).clone())  # p[i, i - d], 0 where i < d
        out = torch.bmm(p, v).add_(p_band @ rv)
        ctx.save_for_backward(q, k, v, rk, rv, pbuf, p_band)
        ctx.scale = scale
        return out

    @staticmethod
    def backward(ctx, d_out):
        q, k, v, rk, rv, pbuf, p_band = ctx.saved_tensors
        scale = ctx.scale
        BH, T, _ = q.shape
        W = rk.shape[0]
        d_out = d_out.contiguous()
        p = pbuf[W - 1 :].view(BH, T, T)
        d_v = torch.bmm(p.transpose(1, 2), d_out)
        d_rv = (p_band.transpose(1, 2) @ d_out).sum(0)
        # d p = d_out . (v_j + rv[d]); then the softmax backward gives d scores.
        dpbuf = torch.empty_like(pbuf)
        dp = dpbuf[W - 1 :].view(BH, T, T)
        torch.bmm(d_out, v.transpose(1, 2), out=dp)
        _diagonals(dpbuf, BH, T, W).add_(_row0_zeroed(d_out @ rv.t()))
        dsbuf = _like_or_same(dpbuf)
        ds = dsbuf[W - 1 :].view(BH, T, T)
        torch.ops.aten._softmax_backward_data.out(dp, p, -1, p.dtype, grad_input=ds)
        del dpbuf, dp
        ds_band = _row0_zeroed(_diagonals(dsbuf, BH, T, W).clone())
        d_q = torch.bmm(ds, k).add_(ds_band @ rk).mul_(scale)
        d_k = torch.bmm(ds.transpose(1, 2), q).mul_(scale)
        d_rk = (ds_band.transpose(1, 2) @ q).sum(0).mul_(scale)
        return d_q, d_k, d_v, d_rk, d_rv, None


def _row0_zeroed(band: torch.Tensor) -> torch.Tensor:
    """Zero row 0's entries for distances d > 0 (see ``_diagonals``), in place."""
    band[:, 0, :-1] = 0.0
    return band


def _like_or_same(buf: torch.Tensor) -> torch.Tensor:
    """Where the softmax (and its backward) may write over its input: on CPU each row is read before it
    is written (pinned by a test), which saves a fresh T x T buffer and its page faults per call."""
    return buf if buf.device.type == "cpu" else torch.empty_like(buf)


def attention_relative(q, k, v, mod: ScoreMod, scale: float) -> torch.Tensor:
    """Exact attention with Shaw-style relative vectors (logit and value terms), differentiable by hand.
    Computes in float32 at least (under autocast too). Returns the output, value term included."""
    B, H, T, D = q.shape
    rel = mod.relative
    W = min(rel.key.shape[0] - 1, T)  # distances >= T never occur
    dt = torch.promote_types(q.dtype, torch.float32)
    with torch.autocast(q.device.type, enabled=False):
        key, value = rel.key.to(dt), rel.value.to(dt)
        rk = (key[:W] - key[-1]).flip(0)
        rv = (value[:W] - value[-1]).flip(0)
        flat = [t.to(dt).reshape(B * H, T, D) for t in (q, k, v)]
        out = _RelativeAttention.apply(*flat, rk, rv, scale)
        return (out.view(B, H, T, D) + value[-1]).to(q.dtype)


@functools.lru_cache(maxsize=32)
def _block_mask(T: int, device: str, span: Optional[Span] = None):
    """The causal block mask (within ``span``, where one is given): blocks nobody sees are skipped."""
    from torch.nn.attention.flex_attention import create_block_mask

    mask = (lambda b, h, qi, ki: qi >= ki) if not span else (lambda b, h, qi, ki: span.visible(qi, ki))
    return create_block_mask(mask, None, None, T, T, device=device)


@functools.lru_cache(maxsize=1)
def _flex_fn(compiled: bool):
    from torch.nn.attention.flex_attention import flex_attention

    return torch.compile(flex_attention, dynamic=False) if compiled else flex_attention


def attention_flex(q, k, v, mod: Optional[ScoreMod], scale: float):
    T = q.shape[2]
    fn = _flex_fn(_compile_flex)
    kwargs = dict(score_mod=mod, block_mask=_block_mask(T, str(q.device)), scale=scale)
    if mod is not None and mod.needs_lse:
        from torch.nn.attention.flex_attention import AuxRequest

        out, aux = fn(q, k, v, return_aux=AuxRequest(lse=True), **kwargs)
        return out, aux.lse
    return fn(q, k, v, **kwargs), None


def choose_backend(device_type: str, seq_len: int, mod: Optional[ScoreMod], training: bool) -> str:
    """The fastest exact backend for this call (measured by `pebench bench`)."""
    if mod is None:
        return "sdpa"
    limit = min(MATERIALIZE_MAX_LEN, mod.max_materialize or MATERIALIZE_MAX_LEN)
    if training:  # short training contexts: a materialized bias is cheap and differentiable everywhere
        if seq_len > limit:
            return "chunked"
        return "relative" if mod.relative is not None else "sdpa"
    if not mod.flex_ok:  # a term FlexAttention cannot run (CoPE's row sums, FIRE's MLP per score)
        return "sdpa" if seq_len <= limit else "chunked"
    if device_type == "cuda":
        return "flex"  # returns the log-sum-exp on CUDA too, so Shaw uses it as well
    if mod.relative is not None and seq_len <= min(RELATIVE_MAX_BANDS * mod.band, MATERIALIZE_MAX_LEN):
        return "relative"  # short: explicit scores with the band on their diagonals
    if mod.needs_lse:  # compiled flex on CPU cannot return the log-sum-exp
        return "banded" if mod.band is not None else "chunked"
    return "sdpa" if seq_len <= MATERIALIZE_MAX_LEN else "flex"


def _runnable(backend: str, q: torch.Tensor, mod: Optional[ScoreMod]) -> str:
    """A forced backend that cannot serve this call falls back to the exact path that can."""
    cpu = q.device.type == "cpu"
    if backend == "flex" and mod is not None and not mod.flex_ok:
        return "chunked"
    if backend == "flex" and cpu and mod is not None and mod.needs_lse and _compile_flex:
        backend = "banded"  # compiled flex on CPU cannot return the log-sum-exp
    if backend == "banded" and (mod is None or mod.band is None or not cpu):
        return "chunked"  # nothing banded to exploit, or no fused CPU kernel for the far part
    if backend == "relative" and (mod is None or mod.relative is None):
        return "sdpa"  # no relative vectors: the materialized-bias path
    return backend


def attend_from(
    q, k, v, mod: Optional[ScoreMod], start: int, sink: Optional[torch.Tensor] = None, span: Optional[Span] = None
) -> torch.Tensor:
    """Causal attention of the queries ``start`` .. T-1 only, against all T keys ([B, H, T, d_h] in, [B, H,
    T - start, d_h] out): the rows ``attend`` gives there, for any logit term (its materialized bias on the
    [T - start, T] block, a value term from the log-sum-exp; rows before ``start`` get no probability mass), and
    any span (only the keys it shows, a block of queries at a time). Computed in float32 under autocast too (the
    block is small; fused kernels accumulate in float32 as well)."""
    dt = q.dtype
    with torch.autocast(q.device.type, enabled=False):
        q, k, v = q.float(), k.float(), v.float()
        scale = q.shape[-1] ** -0.5
        if span:
            out, lse = attention_spanned(q, k, v, mod, scale, span, start)
            return (out if sink is None else with_sink(out, lse, sink.float())).to(dt)
        if sink is None and (mod is None or not mod.needs_lse):  # the fused kernel, the term and mask as attn_mask
            q = q[:, :, start:]
            return F.scaled_dot_product_attention(
                q, k, v, attn_mask=_masked_bias(q, mod, start, k.shape[2]), scale=scale
            ).to(dt)
        s = _causal_scores(q[:, :, start:], k, mod, scale, start, materialize=True).to(q.dtype)
        p, lse = _weights(s)
        out = p @ v
        if mod is not None and mod.needs_lse:
            lse_all = F.pad(lse, (start, 0), value=float("inf"))  # exp(s - inf) = 0: the skipped rows stay finite
            out = out + mod.value_term(q, k, lse_all, scale)[:, :, start:]
        if sink is not None:
            out = with_sink(out, lse, sink.float())
    return out.to(dt)


def attend_normalised(
    q, k, v, pe, layer: int = 0, x=None, start: int = 0, chunk: int = 0, span: Optional[Span] = None
) -> torch.Tensor:
    """Causal attention that a scheme computes itself (``PositionalEncoding.owns_attention``: its
    ``attention_scores`` and ``normalise``), one block of queries (``chunk``, default the scheme's
    ``query_block``) at a time against the keys up to the block's end: O(block x T) memory at any length,
    differentiable, any device. Rows ``start`` .. T-1 only. A span's hidden keys get score -inf before the
    scheme normalises (softmax and stick-breaking give them weight 0 and, in stick-breaking, nothing to break)."""
    chunk = chunk or pe.query_block
    outs = []
    for s0 in range(start, q.shape[2], chunk):
        e = min(q.shape[2], s0 + chunk)
        s = pe.attention_scores(q[:, :, s0:e], k[:, :, :e], layer, x, s0)
        if span:
            qi = torch.arange(s0, e, device=q.device)[:, None]
            s = s.masked_fill(~span.visible(qi, torch.arange(e, device=q.device)[None, :]), float("-inf"))
        outs.append(pe.normalise(s).to(v.dtype) @ v[:, :, :e])
    return torch.cat(outs, dim=2)


def with_sink(out: torch.Tensor, lse: torch.Tensor, sink: torch.Tensor) -> torch.Tensor:
    """Attention with one more always-present term of logit ``sink`` (per head) and no value: every weight times
    Z / (Z + e^s) = sigmoid(lse - s), applied to the output (the value term's too)."""
    return out * torch.sigmoid(lse - sink.view(1, -1, 1).to(lse.dtype)).unsqueeze(-1).to(out.dtype)


def attend(
    q,
    k,
    v,
    mod: Optional[ScoreMod] = None,
    backend: str = "auto",
    sink: Optional[torch.Tensor] = None,
    span: Optional[Span] = None,
) -> torch.Tensor:
    """Causal attention of q, k, v ([B, H, T, d_h]) with an optional logit term, an optional sink logit per
    head (computed on the exact chunked path, which gives the log-sum-exp the sink needs) and an optional span
    (``attend_spanned``)."""
    scale = q.shape[-1] ** -0.5
    if span:
        return attend_spanned(q, k, v, mod, backend, sink, span)
    if sink is not None:
        backend = "chunked"  # the sink needs every row's log-sum-exp
    elif backend == "auto":
        backend = choose_backend(q.device.type, q.shape[2], mod, torch.is_grad_enabled() and q.requires_grad)
    else:
        backend = _runnable(backend, q, mod)
    if backend == "relative":
        return attention_relative(q, k, v, mod, scale)  # value term included
    if backend == "sdpa":
        out, lse = attention_sdpa(q, k, v, mod, scale)
    elif backend == "flex":
        out, lse = attention_flex(q, k, v, mod, scale)
    elif backend == "chunked":
        out, lse = attention_math(q, k, v, mod, scale, chunk=CHUNK)
    elif backend == "banded":
        out, lse = attention_banded(q, k, v, mod, scale)
    elif backend == "math":
        out, lse = attention_math(q, k, v, mod, scale)
    else:
        raise UsageError(f"unknown attention backend {backend!r}; valid: {', '.join(BACKENDS)}")
    if mod is not None and mod.needs_lse:
        out = out + mod.value_term(q, k, lse, scale)
    return out if sink is None else with_sink(out, lse, sink)


def attend_spanned(q, k, v, mod: Optional[ScoreMod], backend: str, sink: Optional[torch.Tensor], span: Span):
    """``attend`` within a span (a window, a chunk, kept first tokens), exact in every backend: ``math`` scores the
    whole matrix and masks it (the reference); ``sdpa`` (and ``auto`` while training at short lengths) hands the
    fused kernel the term with -inf outside the span; ``flex`` runs the span as its block mask; everything else
    (``auto`` at evaluation, ``chunked``, and whatever needs a log-sum-exp: a sink, Shaw's value vectors) scores a
    block of queries against only the keys it can see (``attention_spanned``), O(block x (block + window)) memory."""
    scale = q.shape[-1] ** -0.5
    T, direct = q.shape[2], sink is None and (mod is None or not mod.needs_lse)
    training = torch.is_grad_enabled() and q.requires_grad
    if backend == "auto":
        backend = ("flex" if q.device.type == "cuda" else "chunked") if not training else "sdpa"
        if training and T > min(MATERIALIZE_MAX_LEN, (mod.max_materialize if mod else 0) or MATERIALIZE_MAX_LEN):
            backend = "chunked"
    if backend == "flex" and direct and (mod is None or mod.flex_ok) and not (q.device.type == "cpu" and training):
        fn = _flex_fn(_compile_flex)
        return fn(q, k, v, score_mod=mod, block_mask=_block_mask(T, str(q.device), span), scale=scale)
    if backend in ("sdpa", "math") and direct:
        b, h, qi, ki = _grid(q, 0, T, T)
        fp32 = backend == "sdpa" and _cpu_half_training(q, v)  # the fp32 training path, its term in fp32
        dt = torch.float32 if fp32 else q.dtype
        term = torch.zeros((), dtype=dt, device=q.device) if mod is None else mod.bias(b, h, qi, ki).to(dt)
        if backend == "math":
            s = (q @ k.transpose(-1, -2)) * scale + term
            return torch.softmax(s.masked_fill(~span.visible(qi, ki), float("-inf")), dim=-1) @ v
        mask = term.masked_fill(~span.visible(qi, ki), float("-inf"))
        if fp32:
            return _fp32_training_attention(q, k, v, mask, scale)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
    out, lse = attention_spanned(q, k, v, mod, scale, span)
    return out if sink is None else with_sink(out, lse, sink)


@_no_autocast
def attention_spanned(q, k, v, mod: Optional[ScoreMod], scale: float, span: Span, start: int = 0, chunk: int = CHUNK):
    """Exact attention of the queries ``start`` .. T-1 within ``span``: each block of ``chunk`` queries against
    only the keys it can see (``Span.keys``), the scheme's term on those (query, key) pairs, and Shaw-style
    relative value vectors from the block's own probabilities. Differentiable, any device. Returns (out, lse) for
    those rows."""
    if mod is not None and mod.needs_lse and mod.relative is None:
        raise UsageError("a span with a value term needs the term's relative vectors (ScoreMod.relative)")
    T, dt = q.shape[2], v.dtype
    q, k, v = _fp32(q, k, v)
    b, h = _grid(q, 0, 1, 1)[:2]
    outs, lses = [], []
    for s0 in range(start, T, chunk):
        e = min(T, s0 + chunk)
        idx = span.keys(s0, e, q.device)
        qi, ki = torch.arange(s0, e, device=q.device).view(1, 1, -1, 1), idx.view(1, 1, 1, -1)
        s = (q[:, :, s0:e] @ k[:, :, idx].transpose(-1, -2)) * scale
        if mod is not None:
            s = s + mod.bias(b, h, qi, ki)
        s = s.masked_fill(~span.visible(qi, ki), float("-inf"))
        p, lse = _weights(s)
        out = p.to(v.dtype) @ v[:, :, idx]
        if mod is not None and mod.needs_lse:  # sum_j p_ij value[min(i - j, band)]
            rel = mod.relative.value
            dist = (qi - ki).clamp(0, rel.shape[0] - 1)[0, 0]
            out = out + torch.einsum("bhnm,nmd->bhnd", p.to(rel.dtype), rel[dist]).to(out.dtype)
        outs.append(out)
        lses.append(lse)
    return torch.cat(outs, dim=2).to(dt), torch.cat(lses, dim=2)
