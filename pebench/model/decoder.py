"""A tiny decoder-only language model (pre-norm transformer), nanoGPT style.

The positional encoding is a module with five hooks (see ``pebench.model.pe.base``): the model adds its
embedding term, lets it rotate q and k, and passes its logit term to the attention backend; a scheme that
owns its attention (``owns_attention``) gives the scores or the weights itself. Nothing
here depends on which scheme is in use, and no buffer is sized to the training context, so the model
runs at any length its scheme can represent. The options any scheme takes live here, each off by default: a sink
logit, Scalable-Softmax, the output gate, Canon layers (``canon``), entmax weights (``entmax``), selective attention
(``selective``), scale-invariant attention (``scale_invariant``) and Random Float Sampling's positions.
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from ..config import ModelConfig
from ..util.errors import UsageError
from .attention import attend, attend_from, attend_normalised
from .canon import KERNEL, canon_at
from .entmax import AdaptiveScale, attend_entmax, check_normaliser
from .logit_scales import check_logit_scale, logit_scale_factors
from .patterns import LayerSpec, layers_of
from .pe import PEContext, PositionalEncoding, build_pe
from .pe.base import at_positions, scaled
from .pe.layered import LayeredPE
from .scale_invariant import attend_scale_invariant
from .selective import selected, selection
from .spans import Span, combined

SSMAX_INIT = 0.43  # Scalable-Softmax's s at the start (Nakanishi 2025)


EVAL_POSITIONS_SEED = 20_260_214  # Random Float Sampling's evaluation draw: one per length, the same for every model


def float_positions(gen: torch.Generator, T: int, M: int) -> torch.Tensor:
    """Random Float Sampling (arXiv 2602.14050): T sorted uniform floats from [0, M) (float32)."""
    return (torch.rand(T, generator=gen, dtype=torch.float64) * M).sort().values.float()


def scheme_options(cfg: ModelConfig) -> dict:
    """``pe_options`` maps scheme name -> options, so one config serves every scheme of a sweep."""
    return dict(cfg.pe_options.get(cfg.pe, {}) or {})


def check_attention_options(cfg: ModelConfig, owns_attention: bool) -> None:
    """Selective and scale-invariant attention act on softmax logits that the backends compute: neither with a scheme
    that computes its attention itself, with entmax weights, a sink or each other (one line naming the pair)."""
    for on, name in ((cfg.selective, "model.selective"), (cfg.scale_invariant_tau, "model.scale_invariant_tau")):
        if not on:
            continue
        clash = (
            (owns_attention, f"the scheme {cfg.pe!r}, which computes its attention itself"),
            (cfg.normaliser != "softmax", f"model.normaliser {cfg.normaliser}"),
            (cfg.attention_sinks, "model.attention_sinks"),
            (cfg.selective and cfg.scale_invariant_tau, "the other of model.selective and model.scale_invariant_tau"),
        )
        for bad, what in clash:
            if bad:
                raise UsageError(f"{name} transforms softmax's logits and cannot be combined with {what}")


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: ModelConfig, layer: int, spec: Optional[LayerSpec] = None):
        super().__init__()
        self.layer, self.n_heads = layer, cfg.n_heads
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=False)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
        self.backend = "auto"
        self.eval_span: Optional[Span] = None  # an evaluation-time window for a layer without its own
        self.sink = nn.Parameter(torch.zeros(cfg.n_heads)) if cfg.attention_sinks else None  # one logit per head
        ssmax = cfg.ssmax or (spec is not None and spec.ssmax)
        self.ssmax = nn.Parameter(torch.full((cfg.n_heads,), SSMAX_INIT)) if ssmax else None  # s per head
        width = {"elementwise": cfg.d_model, "headwise": cfg.n_heads}.get(cfg.output_gate)
        self.gate = nn.Linear(cfg.d_model, width, bias=False) if width else None  # gated attention's W_g
        self.canon_b = canon_at(cfg.canon, "B", 3 * cfg.d_model)  # Canon-B on q, k and v (identity without)
        self.normaliser, self.alpha = cfg.normaliser, cfg.entmax_alpha  # softmax, or entmax weights
        self.selective, self.si_tau = cfg.selective, cfg.scale_invariant_tau  # selective / scale-invariant attention
        self.adaptive = (
            AdaptiveScale(cfg.d_model, cfg.n_heads, bias=cfg.asentmax_bias) if cfg.normaliser == "asentmax" else None
        )

    def gated(self, y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """Gated attention's output gate (Qiu et al. 2025): each head's output y [B, H, T, d_h] times sigmoid(x W_g),
        x [B, T, C] the block's normed input at the same queries; a gate per channel of each head (elementwise) or
        one per head (headwise). Without a gate, y as it is."""
        if self.gate is None:
            return y
        B, H, T, _ = y.shape
        g = torch.sigmoid(self.gate(x)).view(B, T, H, -1).transpose(1, 2)  # [B, H, T, d_h or 1]
        return y * g.to(y.dtype)

    def span(self, pe: PositionalEncoding) -> Optional[Span]:
        """The keys this layer's queries see beyond the causal rule: its own span, else an evaluation window."""
        return combined(pe.span(self.layer), self.eval_span)

    def qkv_and_term(
        self,
        x: torch.Tensor,
        pe: PositionalEncoding,
        positions: torch.Tensor,
        logit_scale: Optional[torch.Tensor] = None,
    ):
        """q, k, v [B, H, T, d_h] after the scheme's rotation, and its logit term (analysis reads these too)."""
        B, T, C = x.shape
        q, k, v = self.canon_b(self.qkv(x)).view(B, T, 3, self.n_heads, C // self.n_heads).permute(2, 0, 3, 1, 4)
        scheme, j = pe.at_layer(self.layer)  # this layer's scheme and its index for it (a pattern's layers differ)
        q, k = scheme.rotate(q, k, positions, j)  # RoPE acts here
        if self.adaptive is not None:  # ASEntmax: each query times its learned, length-scaled temperature
            q = q * self.adaptive(x).to(q.dtype)
        mod = scheme.score_mod(q, j, k, x)  # ALiBi / T5 / Shaw / ... act here (None for the others)
        if not scheme.consecutive:
            mod = at_positions(mod, positions)  # random training positions: the term at those positions
        if self.ssmax is not None:  # Scalable-Softmax: logits times s_h ln(n), n = the keys a query sees
            span = self.span(pe)
            n = span.counts(T, x.device) if span else torch.arange(1, T + 1, device=x.device, dtype=torch.float32)
            f = self.ssmax[:, None] * torch.log(n)[None]
            logit_scale = f if logit_scale is None else f * logit_scale[None]  # [H, T]
        if logit_scale is not None:  # whole logits times a per-query (per-head) factor: q scaled, and the term
            q = q * (logit_scale[:, None] if logit_scale.dim() == 1 else logit_scale[..., None]).to(q.dtype)
            mod = scaled(mod, logit_scale)
        if self.selective:  # head 0's selections lower every head's logits of the keys they select
            mod = selected(mod, selection(q, k, mod, q.shape[-1] ** -0.5))
        return q, k, v, mod

    def forward(
        self,
        x: torch.Tensor,
        pe: PositionalEncoding,
        positions: torch.Tensor,
        logit_scale: Optional[torch.Tensor] = None,
    ) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v, mod = self.qkv_and_term(x, pe, positions, logit_scale)
        scheme, j = pe.at_layer(self.layer)
        if scheme.owns_attention:  # stick-breaking, PaTH: its scores and weights, a block of queries at a time
            y = attend_normalised(q, k, v, scheme, j, x, span=self.span(pe))
        elif self.si_tau:  # scale-invariant attention: every logit transformed by its distance
            y = attend_scale_invariant(q, k, v, mod, self.si_tau, self.span(pe))
        elif self.normaliser != "softmax":  # entmax weights on the materialised scores, a block at a time
            y = attend_entmax(q, k, v, mod, self.alpha, self.span(pe))
        else:
            y = attend(q, k, v, mod, self.backend, self.sink, self.span(pe))
        return self.proj(self.gated(y, x).transpose(1, 2).reshape(B, T, C))

    def forward_from(self, x, pe, positions, logit_scale, start: int) -> torch.Tensor:
        """The output at positions ``start`` .. T-1 only (keys and the scheme's term from the whole of x)."""
        B, T, C = x.shape
        q, k, v, mod = self.qkv_and_term(x, pe, positions, logit_scale)
        scheme, j = pe.at_layer(self.layer)
        if scheme.owns_attention:
            y = attend_normalised(q, k, v, scheme, j, x, start, span=self.span(pe))
        elif self.si_tau:
            y = attend_scale_invariant(q, k, v, mod, self.si_tau, self.span(pe), start)
        elif self.normaliser != "softmax":
            y = attend_entmax(q, k, v, mod, self.alpha, self.span(pe), start)
        else:
            y = attend_from(q, k, v, mod, start, self.sink, self.span(pe))
        return self.proj(self.gated(y, x[:, start:]).transpose(1, 2).reshape(B, T - start, C))


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig, layer: int, spec: Optional[LayerSpec] = None):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(cfg.d_model), nn.LayerNorm(cfg.d_model)
        self.attn = CausalSelfAttention(cfg, layer, spec)
        self.mlp = nn.Sequential(
            nn.Linear(cfg.d_model, cfg.d_mlp, bias=False), nn.GELU(), nn.Linear(cfg.d_mlp, cfg.d_model, bias=False)
        )
        self.drop = nn.Dropout(cfg.dropout)
        # Canon layers A, C, D (the identity where model.canon does not name them; B sits in the attention)
        self.canon_a, self.canon_c = canon_at(cfg.canon, "A", cfg.d_model), canon_at(cfg.canon, "C", cfg.d_model)
        self.canon_d = canon_at(cfg.canon, "D", cfg.d_mlp)
        # tokens back the MLP reads (K - 1 for each of Canon-C and D, one after the other)
        self.mlp_reach = (KERNEL - 1) * sum(p in cfg.canon for p in "CD")

    def ffn(self, x):
        """The MLP of the normed input x (with Canon-C on its input and Canon-D on its hidden layer, where set)."""
        up, act, down = self.mlp
        return down(act(self.canon_d(up(self.canon_c(x)))))

    def forward(self, x, pe, positions, logit_scale=None):
        x = x + self.drop(self.attn(self.canon_a(self.ln1(x)), pe, positions, logit_scale))
        return x + self.drop(self.ffn(self.ln2(x)))

    def forward_from(self, x, pe, positions, logit_scale, start: int):
        """The block's output at positions ``start`` .. T-1 of x (its input at every position). With Canon-C or D the
        MLP also reads the K - 1 tokens before ``start`` (each), so the attention runs from there."""
        s0 = max(0, start - self.mlp_reach)
        x_out = x[:, s0:] + self.drop(self.attn.forward_from(self.canon_a(self.ln1(x)), pe, positions, logit_scale, s0))
        return (x_out + self.drop(self.ffn(self.ln2(x_out))))[:, start - s0 :]


class DecoderLM(nn.Module):
    def __init__(self, cfg: ModelConfig, max_position: int = 0, continuous: bool = False):
        """``max_position``: the range M of random training positions (0: none); ``continuous``: they are floats
        (Random Float Sampling), and so are the positions the model draws for itself when given none."""
        super().__init__()
        cfg.validate()
        self.continuous = continuous
        self._drawn: dict = {}  # (T, device) -> the evaluation positions drawn for length T
        check_logit_scale(cfg.logit_scale)  # model.logit_scale names a registered scale
        self.cfg = cfg
        self.layer_specs = layers_of(cfg)  # one per layer: its scheme, span, own logit scale
        for spec in self.layer_specs:
            check_logit_scale(spec.logit_scale or "none")
        ctx = PEContext(cfg.d_model, cfg.n_heads, cfg.n_layers, cfg.context, max_position)
        if cfg.layers:  # a pattern: a scheme per distinct layer, behind the one interface
            self.pe = LayeredPE(ctx, self.layer_specs, lambda n, c, o: build_pe(n, c, o, cfg.pe_source), cfg.pe_options)
        else:
            self.pe = build_pe(cfg.pe, ctx, scheme_options(cfg), cfg.pe_source)
        check_normaliser(cfg.normaliser, self.pe.owns_attention, cfg.attention_sinks)
        if continuous and not (max_position and self.pe.continuous_positions):
            raise UsageError(
                f"train.random_positions_float needs train.random_positions and a scheme that reads positions as "
                f"numbers (none, sinusoidal, rope and its family, alibi); {cfg.pe!r} is not one"
            )
        check_attention_options(cfg, self.pe.owns_attention)
        if cfg.attention_sinks and self.pe.owns_attention:
            raise UsageError(f"model.attention_sinks adds a term to softmax; {cfg.pe!r} computes its attention itself")
        self.logit_scale = cfg.logit_scale
        self.tok = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg, i, self.layer_specs[i]) for i in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.head.weight = self.tok.weight  # weight tying, as GPT-2
        self.apply(self._init)
        for name, p in self.named_parameters():
            if name.endswith("proj.weight") or name.endswith("mlp.2.weight"):
                # GPT-2: scale residual projections by depth so the residual stream stays O(1).
                nn.init.normal_(p, 0.0, 0.02 / (2 * cfg.n_layers) ** 0.5)

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, 0.0, 0.02)

    def set_attention_backend(self, backend: str) -> None:
        for block in self.blocks:
            block.attn.backend = backend

    def set_eval_span(self, span: Optional[Span]) -> None:
        """An evaluation-time window (StreamingLLM's, the first tokens kept) on every layer without its own."""
        for block in self.blocks:
            block.attn.eval_span = span if span else None

    def layer_scales(self, T: int, device) -> list[Optional[torch.Tensor]]:
        """Each layer's logit multipliers at length T. ``logit_scale`` 'NAME' applies to the layers without a scale
        of their own; 'NAME@SCHEME' (evaluation: ``llama4@none``, Llama 4's temperature on the NoPE layers) to the
        layers of SCHEME, the others keeping their own."""
        kind, _, target = self.logit_scale.partition("@")
        built: dict[str, Optional[torch.Tensor]] = {}
        out = []
        for spec in self.layer_specs:
            own = spec.logit_scale or ("none" if target else kind)
            name = kind if target and spec.pe == target else own
            if name not in built:
                built[name] = logit_scale_factors(name, T, self.cfg.context, self.cfg.logit_scale_c, device)
            out.append(built[name])
        return out

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def _inputs(self, idx: torch.Tensor, positions: Optional[torch.Tensor] = None):
        """The first block's input, the positions (default 0 .. T-1) and the logit scale for token ids ``idx``."""
        T = idx.shape[1]
        if positions is None and self.continuous:  # Random Float Sampling: evaluation's positions are drawn too
            positions = self.drawn_positions(T, idx.device)
        if self.pe.consecutive != (positions is None):
            self.pe.consecutive = positions is None
        if positions is None:
            positions = torch.arange(T, device=idx.device)
        elif (
            not torch.compiler.is_compiling()
            and positions.numel()
            and int(positions[-1]) >= max(T, self.pe.ctx.positions)
        ):
            raise UsageError(
                f"positions reach {int(positions[-1])}, but the model was built for positions below "
                f"{max(T, self.pe.ctx.positions)} (train.random_positions sets that bound)"
            )
        x = self.drop(self.pe.embed(self.tok(idx), positions))  # sinusoidal / learned act here
        return x, positions, self.layer_scales(T, idx.device)

    def drawn_positions(self, T: int, device) -> torch.Tensor:
        """The positions a Random-Float-Sampling model reads a sequence of T tokens at when given none: one sorted
        uniform draw from [0, M) per length, seeded by it, so every window and every run of a length share it."""
        key = (T, str(device))
        if key not in self._drawn:
            gen = torch.Generator().manual_seed(EVAL_POSITIONS_SEED + T)
            self._drawn[key] = float_positions(gen, T, self.pe.ctx.positions).to(device)
        return self._drawn[key]

    def forward(
        self, idx: torch.Tensor, targets: Optional[torch.Tensor] = None, positions: Optional[torch.Tensor] = None
    ):
        """Logits [B, T, V]; with targets, (logits, mean cross-entropy). ``positions``: sorted training positions
        (random positions); default 0 .. T-1."""
        x, positions, scales = self._inputs(idx, positions)
        for block, scale in zip(self.blocks, scales):
            x = block(x, self.pe, positions, scale)
        logits = self.head(self.ln_f(x))
        if targets is None:
            return logits
        loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.reshape(-1))
        return logits, loss

    @torch.no_grad()
    def logits_tail(self, idx: torch.Tensor, start: int) -> torch.Tensor:
        """``self(idx)[:, start:]``, for scoring only the end of each row: every layer but the last runs whole (its
        states are the next layer's keys and values), the last one and the head only from ``start``."""
        if start <= 0:
            return self(idx)
        x, positions, scales = self._inputs(idx)
        for block, scale in zip(self.blocks[:-1], scales):
            x = block(x, self.pe, positions, scale)
        x = self.blocks[-1].forward_from(x, self.pe, positions, scales[-1], start)
        return self.head(self.ln_f(x))

    @torch.no_grad()
    def logits_from(
        self, idx: torch.Tensor, start: int, sizes: Optional[list[int]] = None, stop: Optional[int] = None
    ) -> torch.Tensor:
        """``self(idx)[:, start:stop]`` for groups of consecutive rows (``sizes``: rows per group; default one group)
        whose rows share their first ``start`` tokens: answers tried in one slot of a prompt. The shared part runs
        once: each group's first row runs whole for the states before ``start`` (causal: every row of the group
        has the same); then every row (the first too: one arithmetic for all, so no row is favoured by rounding)
        runs from ``start``, each layer reading its group's states for its keys and values. Per row this costs
        the layers' qkv projections over T and everything else over T - start (the head over ``stop`` - start)."""
        n, T = idx.shape
        sizes, stop = sizes or [n], stop or T
        if not 0 < start < stop <= T or sum(sizes) != n:
            raise UsageError(
                f"logits_from: need 0 < start < stop <= {T} and sizes summing to {n}; got {start}, {sizes}"
            )
        x, positions, scales = self._inputs(idx)
        groups = torch.split(x, sizes)
        first, shared = torch.stack([g[0] for g in groups]), []  # run whole together: a scheme's bias built once
        for i, block in enumerate(self.blocks):
            shared.append(first[:, :start])
            if i + 1 < len(self.blocks):
                first = block(first, self.pe, positions, scales[i])
        out = []
        for g, rows in enumerate(groups):  # then each group's rows (a small working set)
            rows = rows[:, start:]
            for block, prefix, scale in zip(self.blocks, shared, scales):
                whole = torch.cat([prefix[g : g + 1].expand(len(rows), -1, -1), rows], dim=1)
                rows = block.forward_from(whole, self.pe, positions, scale, start)
            out.append(rows)
        return self.head(self.ln_f(torch.cat(out)[:, : stop - start]))

    def flops_per_token(self, seq_len: int) -> float:
        """Training FLOPs per token (forward + backward = 3x forward) as PaLM (appendix B, 6N + 12LHQT) and
        nanoGPT count them: 6 per weight of every matmul (the tied head included, norms and the scheme's own
        terms not), plus 12 * layers * seq_len * d_model for q.k and a.v over the *full* T x T score matrix.
        The causal mask would halve that attention term; it is deliberately not halved, so an MFU here compares
        with theirs. tests/test_model.py checks this against a count of every matmul the model runs."""
        c = self.cfg
        n = sum(
            p.numel()
            for n_, p in self.named_parameters()
            if p.dim() >= 2 and not n_.startswith("tok.") and not n_.startswith("pe.")
        )
        n += c.vocab_size * c.d_model  # the tied head still costs a matmul
        return 6 * n + 12 * c.n_layers * seq_len * c.d_model
