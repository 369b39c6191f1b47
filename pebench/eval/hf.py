"""Outside models: a Hugging Face causal LM (``pip install 'pebench[hf]'``) opened so pebench's tasks, protocols,
records and reports apply to it unchanged (``pebench eval --hf``), its RoPE scalings set the way users deploy them
(through the model's own config), and what a scaling does printed beside pebench's own implementation
(``pebench rope --hf``). ``transformers`` is imported only here and only when used.

Scalings: ``NAME[:key=value[:key=value...]]``, NAME one of linear, dynamic-ntk, yarn, llama3, longrope; keys: factor,
original (the original context), beta_fast, beta_slow, attention_factor, mscale, mscale_all_dim, low_freq_factor,
high_freq_factor, short_factor, long_factor (lists as 1.0/1.1/...). ``factor`` defaults to length / original context
(dynamic: 1, since dynamic NTK follows the sequence length itself).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Callable, Optional

import numpy as np
import torch

from ..util.errors import PebenchError, UsageError
from ..util.fsutil import file_sha256
from ..util.parsing import parse_context, parse_list

if TYPE_CHECKING:
    from transformers import PretrainedConfig, PreTrainedTokenizerBase

HF_SCALINGS = {
    "linear": ("factor",),
    "dynamic": ("factor", "original"),
    "yarn": (
        "factor",
        "original",
        "beta_fast",
        "beta_slow",
        "attention_factor",
        "mscale",
        "mscale_all_dim",
        "truncate",
    ),
    "llama3": ("factor", "original", "low_freq_factor", "high_freq_factor"),
    "longrope": ("factor", "original", "attention_factor", "short_factor", "long_factor"),
    "clip-soft": ("n", "original"),  # pebench's own (transformers has no such type): set on the built frequencies
    "clip-hard": ("n", "original"),
    "string": ("offset", "local"),  # pebench's own: set as the scaled layers' attention (eval.outside_string)
}
CLIPS = ("clip-soft", "clip-hard")  # the clipped frequencies of model.pe.rope, on the model's default RoPE
UNSCALED = CLIPS + ("string",)  # no rope_parameters of transformers' for these: the config stays as it is
HF_ALIASES = {"dynamic-ntk": "dynamic"}  # pebench's spelling of Hugging Face's scaling
PEBENCH_NAME = {"linear": "linear", "dynamic": "dynamic-ntk", "yarn": "yarn", "llama3": "llama3"}  # same maths here
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass(frozen=True)
class Scaling:
    """A scaling under transformers' name, its settings, and the layers it applies to where a model gives its RoPE
    per layer type: ``global`` (the global layers only, the default) or ``all``."""

    name: str
    params: dict[str, Any] = field(default_factory=dict)
    layers: str = "global"

    @property
    def label(self) -> str:
        """pebench's name of the scaling (``dynamic-ntk`` for transformers' ``dynamic``) and its settings."""
        return (
            PEBENCH_NAME.get(self.name, self.name)
            + "".join(f":{k}={v:g}" if isinstance(v, float) else f":{k}={v}" for k, v in sorted(self.params.items()))
            + (":layers=all" if self.layers == "all" else "")
        )


LAYERS = ("global", "all")  # a scaling's layers= on a model with RoPE per layer type


def _value(key: str, text: str):
    if key == "layers":
        if text not in LAYERS:
            raise UsageError(f"--rope-scaling ...:layers={text}: one of {', '.join(LAYERS)} (global: the default)")
        return text
    if key in ("short_factor", "long_factor"):
        return [float(x) for x in text.split("/")]
    if key == "truncate":
        if text.lower() not in ("true", "false"):
            raise ValueError(text)
        return text.lower() == "true"
    return int(text) if key in ("original", "n", "local") else float(text)


def parse_hf_scalings(spec: Optional[str]) -> list[Scaling]:
    """``--rope-scaling`` for an outside model: a comma list of NAME[:key=value...] under pebench's names (the form
    its own runs take; ``dynamic-ntk`` is Hugging Face's ``dynamic``, and ``dynamic`` is read as it, with a note
    from the command line), each a Scaling under transformers' name."""
    from ..util.parsing import canonical_scaling, parse_scaling

    out = []
    for given in parse_list(spec, "--rope-scaling") or []:
        item = canonical_scaling(given)[0]
        name = item.split(":")[0].strip()
        name = HF_ALIASES.get(name, name)
        if name not in HF_SCALINGS:
            known = ", ".join(PEBENCH_NAME.get(n, n) for n in HF_SCALINGS)
            raise UsageError(f"--rope-scaling {given}: unknown scaling {name!r}; with --hf: {known}")
        params = parse_scaling(item, HF_SCALINGS[name] + ("layers",), _value)
        out.append(Scaling(name, params, params.pop("layers", "global")))
    return out


def require_transformers():
    try:
        import transformers
    except ImportError:
        raise PebenchError("--hf needs transformers: pip install 'pebench[hf]'") from None
    return transformers


# ----- the model ----------------------------------------------------------------------------------------------------


class OutsidePE:
    """What evaluate asks of a scheme, for an outside model: the longest position it can represent (learned absolute
    positions) and the scaling in force, written into each record as ``pe_state``."""

    def __init__(self, limit: Optional[int], state: Optional[dict] = None):
        self.limit, self.state = limit, state or {}

    def max_positions(self) -> Optional[int]:
        return self.limit

    def describe(self, seq_len: int) -> dict:
        return dict(self.state)


LOSS_CHUNK = 1024  # positions whose logits exist at once when an outside model's losses are scored in chunks
STREAM_CHUNK = 4096  # tokens per forward pass when an outside model reads a window through its KV cache


class HFLM(torch.nn.Module):
    """A causal LM as pebench's tasks call a model: token ids [B, T] -> logits [B, T, V] (float32). Where the head
    is a plain projection of the decoder's last hidden state (``chunkable``), ``token_losses`` and ``logits_at``
    run the head over ``LOSS_CHUNK`` positions at a time, so a window's memory does not grow with T x vocabulary (a
    49,152-token vocabulary at 32,768 positions is 6.4 GB of float32 logits); and a window longer than ``stream``
    tokens is streamed: read ``stream`` tokens per forward pass through the model's KV cache (a sliding-window
    layer's cache keeps its window only), so attention's memory grows with the window, not its square. Streaming
    gives the one-pass numbers (tests/test_streaming.py) except under dynamic scaling, whose frequencies follow the
    longest position seen: there a key keeps the rotation of the pass it was cached in, as in ``generate``. Answers
    tried in one slot (the ranking tasks) share the prompt before it: ``logits_from`` runs that part once."""

    def __init__(self, model, pe: OutsidePE, stream: Optional[int] = STREAM_CHUNK):
        super().__init__()
        self.inner, self.pe, self.stream = model, pe, stream

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.inner(input_ids=idx, use_cache=False).logits.float()

    @property
    def chunkable(self) -> bool:
        """The logits are the output embedding of the decoder's last hidden state and nothing more (no soft cap, no
        scale), so computing them in chunks gives the model's own numbers."""
        cfg = self.inner.config
        plain = not any(getattr(cfg, k, None) for k in ("final_logit_softcapping", "logits_scaling", "logit_scale"))
        return (
            plain
            and callable(getattr(self.inner, "get_decoder", None))
            and self.inner.get_output_embeddings() is not None
        )

    def _hidden(self, idx: torch.Tensor, on_tokens: Optional[Callable[[int], None]] = None) -> torch.Tensor:
        """The decoder's last hidden state [B, T, H]: in one pass, or streamed ``stream`` tokens at a time through
        a KV cache (``on_tokens(t)`` after each pass: t positions of every row done)."""
        decoder, T = self.inner.get_decoder(), idx.shape[1]
        if self.stream is None or T <= self.stream:
            return decoder(input_ids=idx, use_cache=False).last_hidden_state
        return self._passes(idx, self._cache(), 0, on_tokens)

    def _cache(self):
        from transformers import DynamicCache

        return DynamicCache(config=self.inner.config)

    def _passes(self, idx: torch.Tensor, cache, start: int, on_tokens: Optional[Callable[[int], None]] = None):
        """The last hidden state of ``idx``, the tokens at positions ``start`` on, read through ``cache`` (which
        holds the positions before ``start``) ``stream`` tokens per pass (one pass where ``stream`` is None)."""
        decoder, T = self.inner.get_decoder(), idx.shape[1]
        step, out = self.stream or T, []
        for a in range(0, T, step):
            b = min(a + step, T)
            pos = torch.arange(start + a, start + b, device=idx.device)
            h = decoder(input_ids=idx[:, a:b], **{_cache_name(decoder): cache}, use_cache=True, cache_position=pos)
            out.append(h.last_hidden_state)
            if on_tokens is not None:
                on_tokens(start + b)
        return torch.cat(out, 1)

    def logits_from(
        self, idx: torch.Tensor, start: int, sizes: Optional[list[int]] = None, stop: Optional[int] = None
    ) -> torch.Tensor:
        """``self(idx)[:, start:stop]`` (float32) for groups of consecutive rows (``sizes``: rows per group) that
        share their first ``start`` tokens: answers tried in one slot of a prompt. A group's shared part runs once,
        through the KV cache as a window streams; then its rows run from ``start`` to ``stop`` together, on that
        cache repeated once per row. Tokens from ``stop`` on are never run: no logit before them reads them. Under
        dynamic scaling the rows' pass is one more pass (its frequencies follow its own last position)."""
        n, T = idx.shape
        stop, sizes = stop or T, sizes or [n]
        if not 0 < start < stop <= T or sum(sizes) != n:
            raise UsageError(f"logits_from: need 0 < start < stop <= {T} and sizes summing to {n}")
        if not self.chunkable:
            return self.forward(idx[:, :stop])[:, start:stop]
        out, row = [], 0
        for size in sizes:
            rows, row, cache = idx[row : row + size, :stop], row + size, self._cache()
            self._passes(rows[:1, :start], cache, 0)
            cache.batch_repeat_interleave(size)
            out.append(self.inner.get_output_embeddings()(self._passes(rows[:, start:], cache, start)).float())
        return torch.cat(out)

    def logits_at(self, idx: torch.Tensor, positions: list[torch.Tensor]):
        """Yields ``(row, i, logits)``: row ``row``'s logits (float32) at ``positions[row][i : i + LOSS_CHUNK]``, the
        rows' decoder read once (streamed as ``_hidden`` reads it) and the head applied to ``LOSS_CHUNK`` positions
        at a time, so memory grows with a chunk, not with the positions scored times the vocabulary (Gemma 3's
        262,144 tokens at 8,192 positions are 8.6 GB of float32 logits a row). Where the head is not a plain
        projection, from the whole logits."""
        if not self.chunkable:
            whole = self.forward(idx)
            for row, p in enumerate(positions):
                yield row, 0, whole[row, p]
            return
        h, head = self._hidden(idx), self.inner.get_output_embeddings()
        for row, p in enumerate(positions):
            for i in range(0, len(p), LOSS_CHUNK):
                yield row, i, head(h[row, p[i : i + LOSS_CHUNK]]).float()

    def token_losses(
        self, idx: torch.Tensor, start: int, on_tokens: Optional[Callable[[int], None]] = None
    ) -> Optional[torch.Tensor]:
        """Cross-entropy of the targets ``start + 1`` .. T-1 [B, T - 1 - start] (float32), the head applied to
        ``LOSS_CHUNK`` positions at a time; None where the head is not a plain projection (score whole logits)."""
        if not self.chunkable:
            return None
        h, head = self._hidden(idx, on_tokens), self.inner.get_output_embeddings()
        out, T = [], idx.shape[1]
        for i in range(start, T - 1, LOSS_CHUNK):
            j = min(i + LOSS_CHUNK, T - 1)
            logits = head(h[:, i:j]).float()
            nll = torch.nn.functional.cross_entropy(
                logits.reshape(-1, logits.shape[-1]), idx[:, i + 1 : j + 1].reshape(-1), reduction="none"
            )
            out.append(nll.view(idx.shape[0], -1))
            del logits
        return torch.cat(out, 1)


def _cache_name(decoder) -> str:
    """The keyword a decoder takes its KV cache by: ``cache`` (transformers 5.25 on) or ``past_key_values``."""
    import inspect

    return "cache" if "cache" in inspect.signature(decoder.forward).parameters else "past_key_values"


@dataclass
class Outside:
    name: str
    model: HFLM
    tokenizer: PreTrainedTokenizerBase
    config: PretrainedConfig
    context: int
    rope: bool  # the model applies rotary embeddings (a RoPE scaling can apply)
    provenance: dict[str, Any]


def _is_local(spec: str) -> bool:
    """A file or folder here; one that is written as a path but is not here is an error (never a Hub request)."""
    if Path(spec).exists():
        return True
    if spec.endswith(".json") or is_gguf(spec):
        raise UsageError(f"--hf {spec}: no such {'GGUF ' if is_gguf(spec) else ''}file")
    if spec.count("/") > 1 or spec.startswith(("/", ".", "~")):  # a path; a Hub id is gpt2 or owner/name
        raise UsageError(f"--hf {spec}: no such file or folder (a Hub model is named owner/name)")
    return False


def is_gguf(spec: str) -> bool:
    """A GGUF file (llama.cpp's format): loaded through transformers' GGUF support and dequantized."""
    return str(spec).lower().endswith(".gguf")


def require_gguf(spec: str) -> None:
    """The GGUF extra is installed (transformers reads the file with the ``gguf`` package; ``accelerate`` loads it)."""
    for module in ("gguf", "accelerate"):
        try:
            __import__(module)
        except ImportError:
            raise PebenchError(
                f"--hf {spec}: a GGUF file needs the {module} package: pip install 'pebench[gguf]'"
            ) from None
    if not Path(spec).is_file():
        raise UsageError(f"--hf {spec}: no such GGUF file")


def gguf_provenance(path: Path, model) -> dict:
    """What a record says of a GGUF file: its SHA-256, its tensors' quantization types (with counts) and whether
    the loaded model holds every weight dequantized (read from the model: no parameter left in packed integer
    blocks)."""
    import collections

    from gguf import GGUFReader

    kinds = collections.Counter(t.tensor_type.name for t in GGUFReader(str(path)).tensors)
    return {"gguf_sha256": file_sha256(path), "gguf_types": dict(sorted(kinds.items())), "dequantized": dense(model)}


def dense(model) -> bool:
    """True when every parameter of ``model`` is a float tensor: no weight kept in packed integer blocks."""
    return all(p.dtype.is_floating_point for p in model.parameters())


def gguf_load_kw(tf) -> dict:
    """The keyword that asks transformers to dequantize a GGUF's weights at load. transformers 5.x can instead keep
    them packed, computing every matmul in fp32 through a kernel fetched from the Hub when one is published for the
    machine; pebench's records state the dtype the model ran in, so it asks for the dense model (older releases
    always dequantize and have no such config)."""
    config = getattr(tf, "GgufConfig", None)
    return {"quantization_config": config(dequantize=True)} if config is not None else {}


def _gguf_args(spec: str) -> tuple[str, dict]:
    """(the folder transformers reads, the keyword that names the file in it) for a GGUF spec; else (spec, {})."""
    if not is_gguf(spec):
        return spec, {}
    require_gguf(spec)
    return str(Path(spec).resolve().parent), {"gguf_file": Path(spec).name}


def open_model(
    spec: str,
    dtype: str = "float32",
    context: Optional[str] = None,  # N tokens or Kx the context its config states
    revision: Optional[str] = None,
    device: str = "cpu",
) -> Outside:
    """Load a causal LM and its tokenizer: offline from a local folder; from the Hub when online (else one line)."""
    tf = require_transformers()
    if dtype not in DTYPES:
        raise UsageError(f"--dtype {dtype!r}; one of {', '.join(DTYPES)}")
    local = _is_local(spec)
    offline = local or os.environ.get("HF_HUB_OFFLINE") == "1"
    source, gguf_kw = _gguf_args(spec)
    if local and not gguf_kw and not (Path(spec) / "config.json").is_file():
        raise UsageError(
            f"--hf {spec}: not a model folder (no config.json); give a folder saved by save_pretrained or a Hub id"
        )
    if not local and os.environ.get("HF_HUB_OFFLINE") == "1":
        raise UsageError(f"--hf {spec}: no such folder, and with HF_HUB_OFFLINE=1 a Hub id cannot be downloaded")
    kw = {"revision": revision, "local_files_only": offline, **gguf_kw}
    try:
        config = tf.AutoConfig.from_pretrained(source, **kw)
        load = gguf_load_kw(tf) if gguf_kw else {}
        model = tf.AutoModelForCausalLM.from_pretrained(source, config=config, dtype=DTYPES[dtype], **kw, **load)
        tok = tf.AutoTokenizer.from_pretrained(source, **kw)
    except (OSError, ValueError, KeyError, NotImplementedError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        what = "a GGUF file transformers can dequantize" if gguf_kw else "a causal LM and its tokenizer"
        raise UsageError(f"--hf {spec}: cannot load {what} ({first})") from None
    model.eval().to(device)
    stated = original_context(config)
    if not stated and (context is None or str(context).endswith("x")):
        raise UsageError(f"--hf {spec}: the config states no context length; give --context N (tokens)")
    ctx = parse_context(context, stated) if context is not None else stated
    rope = has_rope(config)
    name = Path(spec).name if local else spec.split("/")[-1]
    prov = {
        "model": str(Path(spec).resolve()) if local else spec,
        "revision": revision_of(spec, config, local),
        "dtype": dtype,
        "model_type": config.model_type,
        "architecture": type(model).__name__,
        "context": ctx,
        "context_from": "--context" if context else "config",
        "tokenizer": type(tok).__name__,
        "vocab_size": len(tok),
        "config": summary(config),
        "libraries": library_versions(),
        **(gguf_provenance(Path(spec), model) if gguf_kw else {}),
    }
    return Outside(name, HFLM(model, OutsidePE(absolute_limit(config))), tok, config, ctx, rope, prov)


def library_versions() -> dict[str, Optional[str]]:
    """The versions of the libraries an outside model's numbers depend on (the loader, the RoPE code, the GGUF
    reader, the tokenizer); None for one not installed."""
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, Optional[str]] = {}
    for name in ("transformers", "tokenizers", "gguf", "accelerate"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def original_context(config) -> Optional[int]:
    params = rope_params(config) or {}
    return (
        params.get("original_max_position_embeddings")
        or getattr(config, "max_position_embeddings", None)
        or getattr(config, "n_positions", None)
    )


def absolute_limit(config) -> Optional[int]:
    """Learned absolute positions (GPT-2's n_positions, OPT's table): the longest sequence the model can position."""
    if config.model_type in ("gpt2", "gpt_neo", "opt", "gptj", "biogpt", "bloom") and not has_rope(config):
        return getattr(config, "n_positions", None) or getattr(config, "max_position_embeddings", None)
    return None


def has_rope(config) -> bool:
    return (
        rope_params(config) is not None
        or getattr(config, "rope_theta", None) is not None
        or getattr(config, "rotary_emb_base", None) is not None
    )


GLOBAL_TYPES = ("full_attention",)  # the layer types that attend to every earlier token (Gemma 3, Qwen 3, ...)


def per_layer_type(config) -> bool:
    """Whether the config gives its RoPE settings per layer type (transformers 5.x: Gemma 3's ``rope_parameters`` is
    ``{"sliding_attention": {...}, "full_attention": {...}}``, keyed by the layer types the config lists)."""
    params = getattr(config, "rope_parameters", None)
    types = set(getattr(config, "layer_types", None) or ())
    return (
        isinstance(params, dict)
        and bool(types)
        and set(params) <= types
        and all(isinstance(v, dict) or v is None for v in params.values())
    )


def rope_types(config) -> dict[str, dict]:
    """The RoPE settings of each layer type, ``{type: params}``; a config with one set for every layer is
    ``{"all": params}``. Types whose layers apply no RoPE are left out."""
    if per_layer_type(config):
        return {t: dict(p) for t, p in config.rope_parameters.items() if p}
    one = rope_params(config)
    return {"all": one} if one is not None else {}


def global_type(config) -> str:
    """The layer type a scaling applies to by default and whose settings state the model's context: the one that
    attends globally (``full_attention``), or ``all``."""
    types = rope_types(config)
    return next((t for t in GLOBAL_TYPES if t in types), next(iter(types), "all"))


def rope_params(config) -> Optional[dict]:
    """The config's RoPE settings, whichever attribute the installed transformers uses (rope_parameters in 5.x,
    rope_scaling + rope_theta before); for a config with settings per layer type, the global layers' ones."""
    if per_layer_type(config):
        return rope_types(config).get(global_type(config))
    if hasattr(config, "rope_parameters") and config.rope_parameters:
        return dict(config.rope_parameters)
    if getattr(config, "rope_theta", None) is not None:
        return {
            "rope_type": "default",
            "rope_theta": config.rope_theta,
            **(getattr(config, "rope_scaling", None) or {}),
        }
    return None


def revision_of(spec: str, config, local: bool) -> str:
    """The Hub commit, or for a local folder a hash of its weight files (sha256, first 16 hex)."""
    if not local:
        return getattr(config, "_commit_hash", None) or "unknown"
    if is_gguf(spec):
        return "sha256:" + file_sha256(Path(spec))[:16]
    h = hashlib.sha256()
    for p in sorted(Path(spec).glob("*.safetensors")) + sorted(Path(spec).glob("*.bin")):
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return "sha256:" + h.hexdigest()[:16]


def summary(config) -> dict:
    keys = (
        "model_type",
        "hidden_size",
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        "max_position_embeddings",
        "n_positions",
        "rope_theta",
        "rope_scaling",
        "rope_parameters",
        "rotary_emb_base",
        "rotary_pct",
        "partial_rotary_factor",
        "vocab_size",
    )
    return {k: getattr(config, k) for k in keys if getattr(config, k, None) is not None}


# ----- scalings through the model's own config ------------------------------------------------------------------------


def scaling_params(s: Scaling, length: int, context: int) -> dict:
    """The rope parameters a user would put in the config for ``s`` at ``length`` (factor default L / context)."""
    p = dict(s.params)
    if s.name == "string":  # its shift follows the window's length (eval.outside_string)
        return {"rope_type": "string", "offset": float(p.get("offset", 0.33)), "local": int(p.get("local", 128))}
    if s.name in CLIPS:  # the same at every length: no factor
        return {
            "rope_type": s.name,
            "n": int(p.get("n", 0)),
            "original_max_position_embeddings": int(p.get("original", context)),
        }
    factor = p.pop("factor", 1.0 if s.name == "dynamic" else max(1.0, length / context))
    out = {"rope_type": s.name, "factor": float(factor)}
    if s.name in ("yarn", "llama3", "longrope", "dynamic"):
        out["original_max_position_embeddings"] = int(p.pop("original", context))
    if s.name == "llama3":
        out.setdefault("low_freq_factor", p.pop("low_freq_factor", 1.0))
        out.setdefault("high_freq_factor", p.pop("high_freq_factor", 4.0))
    out.update(p)
    return out


def scaled_types(config, s: Scaling) -> list[str]:
    """The layer types ``s`` applies to: the global layers' (``layers=global``, the default: how Gemma 3 ships its
    long context), or every type (``layers=all``); a config with one set of settings has the one type ``all``."""
    types = list(rope_types(config))
    if not per_layer_type(config) or s.layers == "all":
        return types
    return [global_type(config)]


def scaled_config(config, s: Optional[Scaling], length: int, context: int):
    """A copy of the config with the scaling set where the installed transformers reads it (on the layer types
    ``scaled_types`` names, each keeping its own base)."""
    import copy

    cfg = copy.deepcopy(config)
    if s is None or s.name in UNSCALED:  # set on the built module's frequencies or attention (apply_scaling)
        return cfg
    params = scaling_params(s, length, context)
    if s.name == "longrope":
        half = rope_dim(config) // 2
        params.setdefault("short_factor", [1.0] * half)
        params.setdefault("long_factor", [params["factor"]] * half)
    if s.name == "dynamic":
        cfg.max_position_embeddings = params["original_max_position_embeddings"]  # dynamic reads it from here
    elif s.name in ("yarn", "llama3", "longrope"):
        cfg.max_position_embeddings = max(getattr(cfg, "max_position_embeddings", 0) or 0, length)
    if per_layer_type(config):
        cfg.rope_parameters = {
            t: (_with_scaling(p, params, p.get("rope_theta", 10000.0)) if t in scaled_types(config, s) else p)
            for t, p in config.rope_parameters.items()
        }
    elif hasattr(cfg, "rope_parameters"):
        base = rope_params(config) or {}
        cfg.rope_parameters = _with_scaling(base, params, base.get("rope_theta", getattr(config, "rope_theta", 1e4)))
    else:
        cfg.rope_scaling = {"type": s.name, **params}  # transformers 4.x reads type or rope_type
    return cfg


def _with_scaling(own: dict, params: dict, theta: float) -> dict:
    """One layer type's settings with a scaling: its base (and partial rotary fraction) kept, the scaling's over."""
    kept = {k: v for k, v in own.items() if k in ("rope_theta", "partial_rotary_factor")}
    return {**kept, "rope_theta": theta, **params}


def rope_dim(config) -> int:
    head = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    frac = (
        (rope_params(config) or {}).get("partial_rotary_factor")
        or getattr(config, "partial_rotary_factor", None)
        or getattr(config, "rotary_pct", None)
        or 1.0
    )
    return int(head * frac)


def rotary_modules(model) -> list[tuple[object, str, torch.nn.Module]]:
    """(parent, attribute, module) of every rotary-embedding module in the model (one per model or per layer)."""
    out = []
    for _, parent in model.named_modules():
        for attr, child in parent.named_children():
            if "Rotary" in type(child).__name__:
                out.append((parent, attr, child))
    return out


def require_rope(o: Outside) -> None:
    if not o.rope:
        raise UsageError(
            f"{o.name} applies no rotary embedding ({o.config.model_type}); --rope-scaling does not apply to it"
        )


def apply_scaling(o: Outside, s: Optional[Scaling], length: int) -> dict:
    """Rebuild the model's rotary modules from the config with ``s`` at ``length`` (fresh state each time: dynamic
    scaling's cached frequencies never leak from one length to the next). Returns the record's pe_state."""
    from . import outside_string

    if s is not None:
        require_rope(o)
    outside_string.uninstall(o.model.inner)
    cfg = scaled_config(o.config, s, length, o.context)
    mods = rotary_modules(o.model.inner)
    if o.rope and not mods:
        raise PebenchError(f"found no rotary-embedding module in {type(o.model.inner).__name__}")
    built = []
    for parent, attr, mod in mods:
        dev = next((b.device for b in mod.buffers()), torch.device("cpu"))
        try:
            new = type(mod)(config=cfg)
        except TypeError:  # the rotary modules of older transformers also take the device
            new = type(mod)(config=cfg, device=dev)
        setattr(parent, attr, new.to(dev))
        built.append(new)
        if s is not None and s.name in CLIPS:
            _clip_frequencies(o.config, new, s, o.context)
    state = {"variant": s.name if s else "default", "context": o.context}
    if s is not None and s.name == "string":
        freqs = _string_layers(o.config, built[0], s)
        state["string"] = outside_string.install(o.model.inner, freqs, length, s.params)
    if s is not None:
        state["rope_parameters"] = scaling_params(s, length, o.context)
        state["attention_factor"] = _attention_factor(built[0], scaled_types(o.config, s))
        if per_layer_type(o.config):
            state["layers"] = scaled_types(o.config, s)  # the layer types scaled; the others as trained
    o.model.pe.state = state
    return state


def _string_layers(config, module, s: Scaling) -> dict[int, tuple[torch.Tensor, int]]:
    """STRING's layers: index -> (its type's inverse frequencies on the built rotary module, the rotary dimension),
    for every layer of a type ``s`` scales that attends over its whole context (no sliding window)."""
    per_type, types = per_layer_type(config), scaled_types(config, s)
    kinds = getattr(config, "layer_types", None) or ["all"] * config.num_hidden_layers
    out = {}
    for i, kind in enumerate(kinds):
        t = kind if per_type else "all"
        if t in types and "sliding" not in kind:
            out[i] = (getattr(module, f"{t}_inv_freq" if per_type else "inv_freq").double().cpu(), rope_dim(config))
    return out


def _clip_frequencies(config, module, s: Scaling, context: int) -> None:
    """A clip's frequencies (``model.pe.rope``'s clip-soft or clip-hard, by pebench's own function) set on a built
    rotary module, on each layer type it scales, from that type's base; the rotated dimensions beyond the rotary
    fraction are left alone."""
    from ..model.pe.rope import rope_frequencies

    for t in scaled_types(config, s):
        prefix = f"{t}_" if per_layer_type(config) else ""
        theta = float(rope_types(config)[t].get("rope_theta", 10000.0))
        original = int(s.params.get("original", context))
        inv, _ = rope_frequencies(s.name, rope_dim(config), theta, 1.0, original, n=int(s.params.get("n", 0)))
        for name in (f"{prefix}inv_freq", f"{prefix}original_inv_freq"):
            if isinstance(getattr(module, name, None), torch.Tensor):
                getattr(module, name).copy_(inv.to(getattr(module, name).dtype))


def _attention_factor(module, types: list[str]) -> float:
    """The attention factor a scaling set on the rotary module (per layer type where it has them: the scaled
    types')."""
    per_type = [getattr(module, f"{t}_attention_scaling", None) for t in types]
    found = [float(v) for v in per_type if v is not None]
    return found[0] if found else float(getattr(module, "attention_scaling", 1.0))


# ----- tokenized evaluation text --------------------------------------------------------------------------------------


def tokenize_split(tok, byte_tokens: np.ndarray, max_tokens: int) -> tuple[np.ndarray, np.ndarray]:
    """The evaluation split's text (pebench's byte stream, documents split at byte 0) as the model's token ids and,
    per token, the UTF-8 bytes it covers (bits per byte divides by their sum), cut to ``max_tokens``."""
    text_bytes = bytes(np.asarray(byte_tokens, dtype=np.uint8))
    docs = [d for d in text_bytes.split(b"\x00") if d]
    ids, nbytes = [], []
    eos = getattr(tok, "eos_token_id", None)
    for d in docs:
        text = d.decode("utf-8", errors="replace")
        enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
        raw = text.encode("utf-8")
        starts = [len(text[:a].encode("utf-8")) for a, _ in enc["offset_mapping"]]
        ends = starts[1:] + [len(raw)]
        ids += enc["input_ids"]
        nbytes += [e - s for s, e in zip(starts, ends)]
        if eos is not None:  # documents separated as the byte stream separates them (byte 0 counts as one byte)
            ids.append(eos)
            nbytes.append(1)
        if len(ids) >= max_tokens:
            break
    return np.asarray(ids[:max_tokens], dtype=np.int64), np.asarray(nbytes[:max_tokens], dtype=np.int64)


OUTSIDE_MAX_TOKENS = 32768  # an outside model's evaluation stream, in its own tokens, unless --max-tokens says


def eval_config(o: Outside, batch_tokens: int):
    """The slice of a pebench config that tasks and records read, for an outside model."""
    return SimpleNamespace(
        model=SimpleNamespace(context=o.context, pe=f"hf:{o.config.model_type}"),
        train=SimpleNamespace(seed=0, steps=None),
        eval=SimpleNamespace(batch_tokens=batch_tokens, max_tokens=OUTSIDE_MAX_TOKENS),
    )


# ----- what a scaling does: pebench rope --hf -------------------------------------------------------------------------


@dataclass
class RopeReport:
    rows: list[dict[str, Any]]  # per frequency pair: {dim, inv_freq, scaled, ratio, wavelength, pebench, rel_diff}
    facts: dict[
        str, Any
    ]  # rope_type, factor, original context, attention factor (transformers and pebench), max length
    warnings: list[str]


def load_hf_config(spec: str):
    """A model's config (folder, Hub id or a config.json file) without loading its weights."""
    tf = require_transformers()
    path = Path(spec)
    local = _is_local(spec)
    try:
        if is_gguf(spec):
            source, kw = _gguf_args(spec)
            return tf.AutoConfig.from_pretrained(source, local_files_only=True, **kw)
        if path.is_file():
            import json

            d = json.loads(path.read_text())
            return tf.AutoConfig.for_model(d.pop("model_type"), **d)
        return tf.AutoConfig.from_pretrained(spec, local_files_only=local or os.environ.get("HF_HUB_OFFLINE") == "1")
    except (OSError, ValueError, KeyError) as e:
        raise UsageError(
            f"--hf {spec}: cannot read a model config ({str(e).strip().splitlines()[0] if str(e) else e})"
        ) from None


def transformers_frequencies(config, length: int, layer_type: Optional[str] = None) -> tuple[torch.Tensor, float]:
    """(inv_freq, attention factor) by transformers' own function for the config's rope type (of ``layer_type``'s
    layers where the config gives RoPE per layer type; default the global ones), at ``length``."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    per_type = per_layer_type(config)
    layer_type = layer_type or global_type(config)
    params = rope_types(config).get(layer_type) if per_type else rope_params(config) or {}
    kind = params.get("rope_type", params.get("type", "default"))
    if kind == "default":
        base, dim = params.get("rope_theta", 10000.0), rope_dim(config)
        return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)), 1.0
    kw = {"layer_type": layer_type} if per_type else {}
    inv, att = ROPE_INIT_FUNCTIONS[kind](config, torch.device("cpu"), seq_len=length, **kw)
    return inv.double(), float(att)


def _pebench_frequencies(cfg, p: dict, kind: str, factor: float, original: int, L: int):
    """pebench's own frequencies and attention factor for the variant a config names ((None, None) where pebench
    has no implementation of it)."""
    from ..model.pe.rope import rope_frequencies

    if not (kind in PEBENCH_NAME or kind == "default"):
        return None, None
    opts = {k: float(p[k]) for k in ("beta_fast", "beta_slow", "low_freq_factor", "high_freq_factor") if k in p}
    opts = {k: v for k, v in opts.items() if (kind == "yarn") == (k.startswith("beta"))}
    if kind == "dynamic":
        opts["seq_len"] = L
    return rope_frequencies(
        PEBENCH_NAME.get(kind, "default"), rope_dim(cfg), float(p.get("rope_theta", 10000.0)), factor, original, **opts
    )


def rope_report(spec: str, scaling: Optional[str], length=None) -> RopeReport:
    """What the model's (or the given) scaling does at ``length``: per-dimension frequencies against the unscaled
    ones, the attention factor, the longest length it is meant for, pebench's own implementation of the same
    variant, and the known traps; for a model with RoPE per layer type (Gemma 3), one block of rows per type (the
    column ``layer_type``) and the facts of the global type, the others' prefixed by their type."""
    config = load_hf_config(spec)
    if not has_rope(config):
        raise UsageError(f"{spec}: {config.model_type} applies no rotary embedding")
    scalings = parse_hf_scalings(scaling) if scaling else []
    if len(scalings) > 1:
        raise UsageError("pebench rope takes one --rope-scaling")
    own = rope_params(config) or {}
    ctx = int(own.get("original_max_position_embeddings") or config.max_position_embeddings)
    L = parse_context(length, ctx) if length is not None else None  # N tokens or Kx the context, as --lengths
    L = L or (int(round(scalings[0].params.get("factor", 4.0) * ctx)) if scalings else ctx)
    cfg = scaled_config(config, scalings[0], L, ctx) if scalings else config
    rows, facts = [], {}
    clip = scalings[0] if scalings and scalings[0].name in CLIPS else None
    for lt in rope_types(cfg):
        type_rows, type_facts = _type_report(
            config, cfg, lt, L, ctx, clip if clip and lt in scaled_types(cfg, clip) else None
        )
        head = lt == global_type(cfg)
        rows += [({"layer_type": lt} if per_layer_type(cfg) else {}) | r for r in type_rows]
        facts |= {(k if head else f"{lt}.{k}"): v for k, v in type_facts.items()}
    if scalings and scalings[0].name == "string":  # the frequencies as trained; the positions read change
        facts |= _string_facts(scalings[0], L)
    return RopeReport(rows, facts, traps(config, cfg, scalings[0] if scalings else None))


def _string_facts(s: Scaling, length: int) -> dict:
    """What STRING reads at ``length``: its shift S and local window W, and the largest relative position."""
    from ..model.pe.rope_string import string_shift

    shift, local = string_shift(length, float(s.params.get("offset", 0.33)), int(s.params.get("local", 128)))
    return {
        "rope_type": "string",
        "string_shift": shift,
        "string_local": local,
        "max_position_read": length - 1 - shift + local,
    }


def _type_report(config, cfg, lt: str, L: int, ctx: int, clip: Optional[Scaling] = None) -> tuple[list[dict], dict]:
    """The rows and facts of one layer type (``all`` for a model with one set of RoPE settings); ``clip``: a clip
    on this type, pebench's alone (transformers has none), so its frequencies are pebench's on both sides."""
    from ..model.pe.rope import rope_frequencies

    base_inv, _ = transformers_frequencies(_unscaled(config), L, lt)  # against plain RoPE, the own scaling too
    inv, att = transformers_frequencies(cfg, L, lt)
    p = rope_types(cfg).get(lt) or {}
    kind = p.get("rope_type", p.get("type", "default"))
    factor = float(p.get("factor", 1.0) or 1.0)
    original = int(p.get("original_max_position_embeddings") or ctx)
    ours, our_att = _pebench_frequencies(cfg, p, kind, factor, original, L)
    if clip is not None:
        theta, n = float(p.get("rope_theta", 10000.0)), int(clip.params.get("n", 0))
        inv, att = rope_frequencies(clip.name, rope_dim(cfg), theta, 1.0, original, n=n)
        ours, our_att, kind = inv, att, clip.name
    rows = []
    for i in range(len(inv)):
        row = {
            "pair": i,
            "inv_freq": float(base_inv[i]),
            "scaled": float(inv[i]),
            "ratio": float(inv[i] / base_inv[i]),
            "wavelength": float(2 * torch.pi / inv[i]) if inv[i] else float("inf"),  # a clipped pair never turns
        }
        if ours is not None:
            row["pebench"] = float(ours[i])
            row["rel_diff"] = float(abs(ours[i] - inv[i]) / inv[i]) if inv[i] else float(abs(ours[i]))
        rows.append(row)
    mx = None if kind == "dynamic" else int(round(factor * original)) if kind != "default" else original
    facts = {
        "rope_type": kind,
        "rope_theta": p.get("rope_theta"),
        "factor": factor,
        "original_context": original,
        "length": L,
        "attention_factor": att,
        "logit_scale": att * att,
        "pebench_attention_factor": our_att,
        "max_length": mx if mx is not None else "unbounded (follows the sequence)",
        "max_rel_diff": max((r["rel_diff"] for r in rows), default=None) if ours is not None else None,
    }
    if ours is None:
        facts["pebench"] = "no pebench implementation of this variant"
    return rows, facts


def _unscaled(config):
    import copy

    cfg = copy.deepcopy(config)
    base = rope_params(config) or {}
    if per_layer_type(config):
        cfg.rope_parameters = {
            t: {"rope_type": "default", "rope_theta": p.get("rope_theta", 10000.0)} if p else p
            for t, p in config.rope_parameters.items()
        }
    elif hasattr(cfg, "rope_parameters"):
        cfg.rope_parameters = {"rope_type": "default", "rope_theta": base.get("rope_theta", 10000.0)}
    else:
        cfg.rope_scaling = None
    return cfg


def traps(config, scaled, s: Optional[Scaling]) -> list[str]:
    """The known ways a scaling config goes wrong, as warnings."""
    out = []
    given = (
        dict(getattr(config, "rope_scaling", None) or {})
        if not hasattr(config, "rope_parameters")
        else dict(config.rope_parameters or {})
    )
    p = rope_params(scaled) or {}
    kind = p.get("rope_type", p.get("type", "default"))
    if kind in ("yarn", "llama3", "longrope") and s is None and "original_max_position_embeddings" not in given:
        out.append(
            f"original context missing: {kind} then uses max_position_embeddings "
            f"({config.max_position_embeddings}) as the original context; if that was raised to the extended "
            "length, the factor and ramp are computed against the wrong context"
        )
    if kind == "yarn":
        import math

        f = float(p.get("factor") or 1.0)
        att = p.get("attention_factor")
        one = 0.1 * math.log(f) + 1.0 if f > 1 else 1.0
        if att is not None and f > 1 and abs(float(att) - 1.0) < 1e-9:
            out.append("attention_factor = 1: YaRN's temperature (0.1 ln s + 1) is not applied at all")
        if att is not None and f > 1 and abs(float(att) - one * one) < 1e-6:
            out.append(
                f"attention_factor = (0.1 ln s + 1)^2 = {one * one:.4f}: it multiplies cos and sin, so the "
                "logits already scale by its square; this applies the mscale twice"
            )
        if p.get("mscale") and p.get("mscale_all_dim") and p["mscale"] == p["mscale_all_dim"]:
            out.append(
                "mscale = mscale_all_dim: the attention factor cancels to 1 (DeepSeek-style; the temperature "
                "then lives in the softmax scale of the model's own attention)"
            )
    if kind == "dynamic":
        out.append(
            "dynamic scaling with a cache: transformers keeps the frequencies grown for the longest sequence "
            "seen until a sequence shorter than the original context resets them, so a shorter evaluation "
            "after a longer one is scaled for the longer; pebench eval --hf rebuilds the rotary module for "
            "every length"
        )
    return out
