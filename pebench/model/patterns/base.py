"""What a layer pattern is and how a model config lists its layers: ``LayerSpec``, the registry ``PATTERNS`` (each
pattern a function of the model's shape, in its own module), and the parsers and helpers of ``--layers``."""

from __future__ import annotations

import inspect
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Callable

from ...util.errors import UsageError
from ...util.parsing import parse_list, parse_spec, typed_value
from ...util.registry import Registry
from ..spans import Span

__all__ = [
    "EXPLICIT",
    "PATTERNS",
    "LayerSpec",
    "default_span",
    "describe",
    "every",
    "expand_pattern",
    "explicit_name",
    "is_pattern",
    "layers_config",
    "layers_of",
    "model_for",
    "model_variants",
    "parse_layer",
    "parse_layers",
    "pattern_settings",
    "uniform_scheme",
    "with_layers",
]

EXPLICIT = "layers"  # the scheme name of a run whose layers were listed one by one (plus a short hash)


@dataclass(frozen=True)
class LayerSpec:
    """One layer: its scheme (with options over the config's ``pe_options`` for it), its span, and its own logit
    scale ('' : the model's) and Scalable-Softmax."""

    pe: str
    options: dict[str, Any] = field(default_factory=dict)
    window: int = 0
    chunk: int = 0
    logit_scale: str = ""
    ssmax: bool = False

    @property
    def scheme_key(self) -> tuple:
        """What makes two layers share one scheme module: the scheme and its options."""
        return self.pe, tuple(sorted(self.options.items()))

    @property
    def span(self) -> Span:
        return Span(window=self.window, chunk=self.chunk)

    def text(self) -> str:
        """The command-line form ('rope:base=1000000@w32')."""
        opts = "".join(f":{k}={v}" for k, v in sorted(self.options.items()))
        return f"{self.pe}{opts}" + (f"@{self.span.label()}" if self.span else "")

    @classmethod
    def from_dict(cls, d: Any, where: str) -> "LayerSpec":
        if not isinstance(d, dict) or "pe" not in d:
            raise UsageError(f"{where} must be a mapping with a 'pe' key, got {d!r}")
        allowed = {f.name for f in fields(cls)}
        if unknown := sorted(set(d) - allowed):
            raise UsageError(f"{where}: unknown key {unknown[0]!r}; allowed: {', '.join(sorted(allowed))}")
        spec = cls(**{k: (dict(v) if k == "options" else v) for k, v in d.items()})
        Span(window=spec.window, chunk=spec.chunk)  # a negative or doubled span is one line
        return spec


PatternFn = Callable[..., list[LayerSpec]]
PATTERNS: Registry[PatternFn] = Registry("layer pattern")


def pattern_settings(name: str) -> dict[str, Any]:
    """The settings a named pattern takes (its function's keyword arguments after n_layers and context), with
    their defaults."""
    sig = inspect.signature(PATTERNS.get(name))
    return {p.name: p.default for p in list(sig.parameters.values())[2:]}


def expand_pattern(item: str, n_layers: int, context: int) -> list[LayerSpec]:
    """``NAME[:key=value...]`` -> the pattern's layers for this depth and context."""
    name = item.split(":")[0].strip()
    keys = pattern_settings(name)
    _, texts = parse_spec(item, "--layers", list(keys))
    values = {k: typed_value(v, keys[k], f"--layers {item}: {k}") for k, v in texts.items()}
    return PATTERNS.get(name)(n_layers, context, **values)


def parse_layer(item: str) -> LayerSpec:
    """``SCHEME[:key=value...][@wN|@cN]`` -> a LayerSpec; the scheme's options typed by its Options."""
    from ..pe import SCHEMES

    head, _, span = item.partition("@")
    name = head.split(":")[0].strip()
    cls = SCHEMES.get(name)
    defaults = {f.name: getattr(cls.Options(), f.name) for f in fields(cls.Options)} if cls.Options else {}
    _, texts = parse_spec(head, "--layers", list(defaults))
    options = {k: typed_value(v, defaults[k], f"--layers {item}: {k}") for k, v in texts.items()}
    window = chunk = 0
    if span:
        kind, n = span[:1], span[1:]
        if kind not in ("w", "c") or not n.isdigit() or int(n) < 1:
            raise UsageError(f"--layers {item}: a span is @wN (a window of N tokens) or @cN (chunks of N)")
        window, chunk = (int(n), 0) if kind == "w" else (0, int(n))
    return LayerSpec(name, options, window, chunk)


def parse_layers(spec: str, n_layers: int, context: int) -> tuple[str, list[LayerSpec]]:
    """``--layers``: a named pattern (``irope``, ``swan:window=16``) or an explicit list with one entry per layer ->
    (the runs' scheme name, the layers)."""
    items = parse_list(spec, "--layers", unique=False)
    if len(items) == 1 and items[0].split(":")[0] in PATTERNS:
        name, texts = parse_spec(items[0], "--layers", list(pattern_settings(items[0].split(":")[0])))
        label = name + "".join(f"_{k}{v}" for k, v in sorted(texts.items()))  # 'swan_window16': its own runs
        return label, expand_pattern(items[0], n_layers, context)
    if len(items) == 1 and items[0].split(":")[0] not in PATTERNS:  # one word: a pattern's name, misspelt
        from ...util.registry import unknown_name_message

        raise UsageError(
            unknown_name_message("layer pattern", items[0].split(":")[0], PATTERNS.names())
            + f", or a list of {n_layers} layers"
        )
    if len(items) != n_layers:
        raise UsageError(
            f"--layers {spec}: {len(items)} layer(s) for a model of {n_layers}; give one per layer, or a pattern "
            f"({', '.join(PATTERNS.names())})"
        )
    layers = [parse_layer(i) for i in items]
    return explicit_name(layers), layers


def explicit_name(layers: list[LayerSpec]) -> str:
    """'layers-' and a short hash of the list: two different lists never share a run name."""
    import hashlib

    text = ",".join(layer.text() for layer in layers)
    return f"{EXPLICIT}-{hashlib.sha256(text.encode()).hexdigest()[:6]}"


def with_layers(model_cfg, spec: str):
    """The model config with ``--layers SPEC``: its layers and, as ``pe``, the runs' name for them."""
    from dataclasses import replace

    label, layers = parse_layers(spec, model_cfg.n_layers, model_cfg.context)
    return replace(model_cfg, pe=label, layers=layers_config(layers))


def is_pattern(name: str) -> bool:
    """Whether a ``--pe`` item or a run's scheme name is a layer pattern ('swan:window=16', 'swan_window16',
    'layers-3fa2c1')."""
    return name.split(":")[0].split("_")[0] in PATTERNS or name.startswith(EXPLICIT + "-")


def model_for(model_cfg, name: str):
    """The model config of scheme or pattern ``name`` (a list already set by ``--layers`` keeps its layers)."""
    from dataclasses import replace

    if model_cfg.layers and name == model_cfg.pe:
        return model_cfg
    if name.split(":")[0] in PATTERNS:
        return with_layers(model_cfg, name)
    return replace(model_cfg, pe=name, layers=[])


def model_variants(model_cfg) -> list[str]:
    """The evaluation-time variants of a model's schemes (a pattern: those of its layers' schemes together)."""
    from ..pe import SCHEMES

    out: list[str] = []
    for layer in layers_of(model_cfg) if model_cfg.layers else [LayerSpec(model_cfg.pe)]:
        out += [v for v in SCHEMES.get(layer.pe).variants() if v not in out]
    return out


def layers_of(model_cfg) -> list[LayerSpec]:
    """Every layer's spec: ``model.layers``, or the model's scheme in each layer (its ``pe_options`` left to the
    model, so a uniform model is today's)."""
    if model_cfg.layers:
        return [LayerSpec.from_dict(d, f"model.layers[{i}]") for i, d in enumerate(model_cfg.layers)]
    return [LayerSpec(model_cfg.pe) for _ in range(model_cfg.n_layers)]


def uniform_scheme(model_cfg) -> str:
    """The one scheme of a layer list whose every layer is that scheme as the plain model has it (no options,
    span, logit scale or Scalable-Softmax of its own), so it trains as ``--pe SCHEME`` would; '' otherwise."""
    if not model_cfg.layers:
        return ""
    plain = {LayerSpec(layer.pe) == layer for layer in layers_of(model_cfg)}
    names = {layer.pe for layer in layers_of(model_cfg)}
    return names.pop() if plain == {True} and len(names) == 1 else ""


def layers_config(layers: list[LayerSpec]) -> list[dict]:
    """The config form of a list: each layer's dict without the keys at their defaults."""
    defaults = asdict(LayerSpec(""))
    return [{k: v for k, v in asdict(layer).items() if k == "pe" or v != defaults[k]} for layer in layers]


def describe(layers: list[LayerSpec]) -> str:
    """A short text for reports: 'rope@c32 x3, none' (runs of equal layers counted)."""
    out: list[list] = []
    for layer in layers:
        t = layer.text() + (f" ({layer.logit_scale})" if layer.logit_scale else "") + (" ssmax" if layer.ssmax else "")
        if out and out[-1][0] == t:
            out[-1][1] += 1
        else:
            out.append([t, 1])
    return ", ".join(t if n == 1 else f"{t} x{n}" for t, n in out)


def every(n_layers: int, period: int) -> list[bool]:
    """Which layers are the pattern's odd ones out: every ``period``-th (the last of each period), and always the
    last layer, so a model shallower than one period still has one."""
    marks = [(i + 1) % period == 0 for i in range(n_layers)]
    marks[-1] = True
    return marks


def default_span(context: int, given: int) -> int:
    """A window or chunk given, or a quarter of the training context (the patterns' default scale)."""
    if given < 0:
        raise UsageError(f"a window or chunk must be >= 1 token, got {given}")
    return given or max(1, context // 4)
