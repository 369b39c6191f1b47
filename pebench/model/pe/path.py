"""PaTH (Yang, Shen, Wen, Tan, Mishra, Ren, Panda & Kim 2025, "PaTH Attention: Position Encoding via Accumulating
Householder Transformations"): a data-dependent position encoding. Every token t carries a Householder-like
transform H_t = I - beta_t w_t w_t^T, with w_t a unit vector and beta_t = 2 sigmoid(.) in (0, 2), both read from the
token (a linear map of the layer's input per head), and the score of query i and key j runs through the transforms
of the tokens between them:

    s_ij = q_i^T (H_i H_{i-1} ... H_{j+1}) k_j / sqrt(d_h)      (j <= i; the empty product is I at j = i),

so what lies between key and query, not how many tokens, sets the rotation (RoPE is the case of fixed rotations).
Softmax then weighs the scores as usual (``attention_scores``; the scheme ``owns_attention``). Two exact forms:

- ``path_scores_ut`` (up to ``ut_max`` keys in training, ``ut_max_eval`` without gradients): the UT form the
  paper's chunked kernel uses. With A = diag(1/beta) + the strictly lower part of W W^T (T x T, lower triangular),
  the product over any run of tokens (j, i] is I - W_S^T (A_SS)^-1 W_S, and a diagonal block of a triangular
  matrix's inverse is the inverse of that block, so every pair's score comes from one solve:
  S = Q K^T - (Q W^T masked to a <= i) A^-1 (W K^T masked to b > j). Batched matrix products and one triangular
  solve: O(T^2 d + T^3), a training step about twice RoPE's at T = 128.
- ``path_scores`` (beyond them; faster than the solve at long evaluation): the naive O(T^2 d_h) form: for a block
  of queries, r_i = q_i is carried back key by key (s_ij = k_j . r_i, then r_i <- H_j r_i), one step per distance,
  batched over the block, with one [block, T] score matrix in memory.

How w_t is read from the token follows the paper's reference layer (fla-org/flash-linear-attention,
``fla/layers/path_attn.py``), the default: a low-rank projection of the layer's input (``rank``, 32: d_model -> 32 ->
H d_h), then a causal depthwise convolution over the last ``conv`` tokens (3) with SiLU, then per head a unit vector.
``path:rank=0:conv=0`` is the form pebench used before (records of results/patterns): one full linear map and no
convolution. beta_t = 2 sigmoid(x_t W_b + b) either way."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from ...util.errors import UsageError
from ..canon import causal_depthwise_conv
from .base import SCHEMES, PositionalEncoding


def householder_factors(x: torch.Tensor, w_raw: torch.Tensor, b_proj: torch.Tensor, b_bias: torch.Tensor):
    """(w [B, H, T, d_h] unit vectors, beta [B, H, T] in (0, 2)) of the layer input x [B, T, d_model], w_raw
    [B, T, H d_h] the directions before normalisation (``PaTH.directions``)."""
    B, T, _ = x.shape
    H = b_proj.shape[-1]
    w = w_raw.view(B, T, H, -1).transpose(1, 2)
    beta = 2 * torch.sigmoid(x @ b_proj + b_bias).transpose(1, 2)
    return F.normalize(w, dim=-1), beta


def path_scores(q, k, w, beta, start: int) -> torch.Tensor:
    """Scores [B, H, n, T'] of queries start .. start + n - 1 (q [B, H, n, d]) against keys 0 .. T'-1 (k [B, H, T',
    d]), w [B, H, T', d] and beta [B, H, T'] the transforms of the tokens 0 .. T'-1; -inf above the diagonal.
    One step per distance m = i - j: the scores of that distance for every query of the block, then each carried
    query moves one transform on. Without gradients each step writes its scores in place (one [n, T'] block in
    memory); with them the steps' scores are stacked and laid out by key at the end (one gather)."""
    B, H, n, d = q.shape
    T = k.shape[2]
    i = torch.arange(start, start + n, device=q.device)
    dist = i[:, None] - torch.arange(T, device=q.device)[None, :]  # [n, T]: the distance of each (query, key)
    grad = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, w, beta))
    s = None if grad else torch.full((B, H, n, T), float("-inf"), dtype=q.dtype, device=q.device)
    by_distance, r, rows = [], q, torch.arange(n, device=q.device)
    for m in range(start + n):  # rows whose key j = i - m is below 0 compute unused values, never read
        j = (i - m).clamp(min=0)
        score = (k[:, :, j] * r).sum(-1)  # k_j . (H_{j+1} ... H_i q_i)
        if grad:
            by_distance.append(score)
        else:
            live = rows[i - m >= 0]
            s[:, :, live, j[live]] = score[:, :, live]
        wj = w[:, :, j]
        r = r - beta[:, :, j, None] * wj * (wj * r).sum(-1, keepdim=True)  # r <- H_j r
    if grad:
        s = torch.stack(by_distance, dim=-1).gather(-1, dist.clamp(0, len(by_distance) - 1).expand(B, H, n, T))
        s = s.masked_fill(dist < 0, float("-inf"))
    return s / math.sqrt(d)


def path_scores_ut(q, k, w, beta, start: int) -> torch.Tensor:
    """``path_scores`` (same arguments, same scores) in the UT form: one triangular solve over the keys' tokens
    (in fp32 at least: A^-1 multiplies the products of many transforms) and three batched matrix products."""
    d, n, T = q.shape[-1], q.shape[2], k.shape[2]
    dt = torch.promote_types(q.dtype, torch.float32)
    q, k, w, beta = q.to(dt), k.to(dt), w.to(dt), beta.to(dt)
    i = torch.arange(start, start + n, device=q.device)[:, None]  # query positions
    t = torch.arange(T, device=q.device)
    A = torch.diag_embed(1 / beta) + torch.tril(w @ w.transpose(-1, -2), -1)
    wk = (w @ k.transpose(-1, -2)).masked_fill(t[:, None] <= t[None, :], 0)  # [b, j]: b > j
    qw = (q @ w.transpose(-1, -2)).masked_fill(t[None, :] > i, 0)  # [i, a]: a <= i
    s = q @ k.transpose(-1, -2) - qw @ torch.linalg.solve_triangular(A, wk, upper=False)
    return (s / math.sqrt(d)).masked_fill(t[None, :] > i, float("-inf"))


def path_reference(q, k, w, beta) -> torch.Tensor:
    """The paper's score, one explicit matrix product per pair (tests): q, k, w [T, d], beta [T] -> [T, T]."""
    T, d = q.shape
    s = torch.full((T, T), float("-inf"), dtype=torch.float64)
    eye = torch.eye(d, dtype=torch.float64)
    for i in range(T):
        for j in range(i + 1):
            P = eye.clone()
            for t in range(i, j, -1):  # H_i H_{i-1} ... H_{j+1}
                P = P @ (eye - float(beta[t]) * torch.outer(w[t].double(), w[t].double()))
            s[i, j] = float(q[i].double() @ P @ k[j].double()) / math.sqrt(d)
    return s


@dataclass
class PaTHOptions:
    rank: int = 32  # the low-rank map's inner width (0: one full linear map)
    conv: int = 3  # the causal depthwise convolution's width, with SiLU (0: none)

    def validate(self):
        for name in ("rank", "conv"):
            if getattr(self, name) < 0:
                raise UsageError(f"path {name} must be >= 0 (0: off), got {getattr(self, name)}")


@SCHEMES.add
class PaTH(PositionalEncoding):
    name = "path"
    description = "data-dependent Householder transforms of the tokens between key and query (Yang 2025)"
    Options = PaTHOptions
    owns_attention = True
    query_block = 256  # the in-place scores of a block: [B, H, 256, T] at most
    # Keys up to which the UT form runs: its solve grows as T^3, the naive form's loop as T (steps of T x d work);
    # training (where the naive form also recomputes in the backward) takes the UT form far longer.
    ut_max = 512
    ut_max_eval = 128

    def __init__(self, ctx, options=None):
        super().__init__(ctx, options)
        L, H, d, D = ctx.n_layers, ctx.n_heads, ctx.head_dim, ctx.d_model
        r, K = self.options.rank, self.options.conv
        if r:  # the reference layer's low-rank map, d_model -> rank -> H d_h
            self.w_down = nn.Parameter(torch.randn(L, D, r) * D**-0.5)
            self.w_up = nn.Parameter(torch.randn(L, r, H * d) * r**-0.5)
        else:
            self.w_proj = nn.Parameter(torch.randn(L, D, H * d) * D**-0.5)
        if K:  # a depthwise convolution's default initialisation, uniform within 1/sqrt(fan-in)
            self.w_conv = nn.Parameter((torch.rand(L, H * d, K) * 2 - 1) * K**-0.5)
        self.b_proj = nn.Parameter(torch.randn(L, D, H) * 0.02)
        self.b_bias = nn.Parameter(torch.zeros(L, H))  # beta starts near 1: halfway to a reflection

    def directions(self, x: torch.Tensor, layer: int) -> torch.Tensor:
        """The directions w_t before normalisation, [B, T, H d_h], of the layer input x [B, T, d_model]."""
        if self.options.rank:
            u = x @ self.w_down[layer].to(x.dtype) @ self.w_up[layer].to(x.dtype)
        else:
            u = x @ self.w_proj[layer].to(x.dtype)
        return F.silu(causal_depthwise_conv(u, self.w_conv[layer])) if self.options.conv else u

    def attention_scores(self, q, k, layer, x, start):
        T = k.shape[2]
        x = x[:, :T].to(q.dtype)
        w, beta = householder_factors(x, self.directions(x, layer), self.b_proj[layer], self.b_bias[layer])
        w, beta = w.to(q.dtype), beta.to(q.dtype)
        grad = torch.is_grad_enabled() and q.requires_grad
        if T <= (self.ut_max if grad else self.ut_max_eval):
            return path_scores_ut(q, k, w, beta, start).to(q.dtype)
        if grad:  # long training: recomputed in the backward, layer by layer
            return checkpoint(path_scores, q, k, w, beta, start, use_reentrant=False)
        return path_scores(q, k, w, beta, start)
