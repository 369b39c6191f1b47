"""STRING (``model.pe.rope_string``) on an outside model (``eval --hf --rope-scaling string``): the same position map,
set as a transformers attention function on the layers the scaling names (a Gemma 3 model's global layers unless
``layers=all``; every layer of a model with one set of RoPE settings), the other layers attending as they did.

transformers hands the attention function the queries and keys already rotated (the keys with the KV cache's), so
the band's scores are theirs as given, and the rest's come from the queries rotated back by S - W positions with that
layer type's frequencies (the partial rotary dimensions only): the same two passes before one softmax as pebench's
own models. Queries go a block at a time (O(block x keys) memory), so a streamed window keeps the cache's linear
memory. The mask transformers builds for SDPA (True where a key is seen; None where it leaves the causal rule to the
kernel) is honoured; the causal rule is applied here too. S is set from the window's length, as for pebench's models.
A sliding layer under ``layers=all`` keeps its own attention: its distances stay below its window, which S exceeds
at every length pebench reads an outside model at (STRING changes nothing there).
"""

from __future__ import annotations

import torch

from ..model.pe.rope import rotate_half
from ..model.pe.rope_string import string_shift
from ..util.errors import UsageError

NAME = "pebench_string"
BLOCK = 512
ATTR = "_pebench_string"  # set on each attention module STRING acts on: (inv_freq, rotary dim, S, W)


def _base(module, *args, **kwargs):
    """The layer's own attention (transformers' SDPA function)."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    return ALL_ATTENTION_FUNCTIONS["sdpa"](module, *args, **kwargs)


def string_attention(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
    """transformers' attention-function interface: STRING on the layers installed for, the layer's own elsewhere."""
    setting = getattr(module, ATTR, None)
    if setting is None:
        return _base(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs)
    inv, dim, shift, local = setting
    groups = query.shape[1] // key.shape[1]
    k = key.repeat_interleave(groups, dim=1) if groups > 1 else key
    v = value.repeat_interleave(groups, dim=1) if groups > 1 else value
    n_q, n_k = query.shape[2], k.shape[2]
    ang = (local - shift) * inv.to(query.device, torch.float64)
    cos = torch.cat([ang.cos(), ang.cos()]).to(query.dtype)
    sin = torch.cat([ang.sin(), ang.sin()]).to(query.dtype)
    back = torch.cat([query[..., :dim] * cos + rotate_half(query[..., :dim]) * sin, query[..., dim:]], dim=-1)
    outs = []
    kt = k.transpose(-1, -2)
    for s0 in range(0, n_q, BLOCK):
        e = min(n_q, s0 + BLOCK)
        d = (n_k - n_q + torch.arange(s0, e, device=query.device))[:, None] - torch.arange(n_k, device=query.device)
        s = torch.where(d >= shift, back[:, :, s0:e] @ kt, query[:, :, s0:e] @ kt).float() * scaling
        hidden = d < 0
        if attention_mask is not None:
            m = attention_mask[..., s0:e, :n_k]
            hidden = hidden | ~m if m.dtype == torch.bool else hidden
            s = s if m.dtype == torch.bool else s + m.float()
        w = torch.softmax(s.masked_fill(hidden, float("-inf")), dim=-1)
        outs.append(w.to(v.dtype) @ v)
    return torch.cat(outs, dim=2).transpose(1, 2).contiguous(), None


def _register() -> None:
    """The function and its masks under ``NAME`` in transformers' global registries (a mask function only a local
    mapping holds is skipped: the model would attend with no mask at all)."""
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS

    AttentionInterface.register(NAME, string_attention)
    AttentionMaskInterface.register(NAME, ALL_MASK_ATTENTION_FUNCTIONS["sdpa"])  # boolean masks, as for SDPA


def install(model, layer_freqs: dict[int, tuple[torch.Tensor, int]], length: int, params: dict) -> dict:
    """STRING on ``model`` for windows of ``length`` tokens on the layers of ``layer_freqs`` (index -> the
    inverse frequencies of its type and the rotary dimension), with the scaling's ``offset`` and ``local``; returns
    S and W for the record."""
    if not layer_freqs:
        raise UsageError("--rope-scaling string: no layer of this model attends with RoPE over its whole context")
    shift, local = string_shift(length, float(params.get("offset", 0.33)), int(params.get("local", 128)))
    _register()
    for m in attention_modules(model):
        if m.layer_idx in layer_freqs:
            setattr(m, ATTR, (*layer_freqs[m.layer_idx], shift, local))
    model.set_attn_implementation(NAME)
    return {"shift": shift, "local": local}


def attention_modules(model) -> list:
    """The model's attention modules (each knows its ``layer_idx``)."""
    return [m for m in model.modules() if type(m).__name__.endswith("Attention") and hasattr(m, "layer_idx")]


def installed(model) -> dict[int, tuple]:
    """Layer index -> STRING's setting on it (empty: not installed)."""
    return {m.layer_idx: getattr(m, ATTR) for m in attention_modules(model) if hasattr(m, ATTR)}


def uninstall(model) -> None:
    """The model's own attention back (SDPA), if STRING was installed on it."""
    mods = [m for m in attention_modules(model) if hasattr(m, ATTR)]
    for m in mods:
        delattr(m, ATTR)
    if mods:
        model.set_attn_implementation("sdpa")
