"""Settings as dataclasses, loaded from YAML with validation that names the bad key (and the flag, where a flag set
it): ``load_config`` reads a config and its overlays, ``resolve_config`` applies a command's ``ConfigFlags``."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import yaml

from .data.corpora import check_corpus_spec
from .data.needles import DOC_KINDS
from .util.errors import UsageError
from .util.parsing import parse_list
from .util.yamlio import load_yaml


def _config_dir() -> Path:
    """The built-in configs: ``pebench/configs`` in an installed wheel, the checkout's top-level ``configs/``
    (mapped to ``pebench.configs`` by pyproject.toml) in an editable install or a plain source tree."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("pebench.configs")
    except ImportError:
        spec = None
    for loc in (spec.submodule_search_locations or []) if spec else []:
        if Path(loc, "tiny.yaml").is_file():
            return Path(loc)
    return Path(__file__).resolve().parent.parent / "configs"


CONFIG_DIR = _config_dir()


@dataclass
class ModelConfig:
    vocab_size: int = 256
    d_model: int = 128
    n_layers: int = 4
    n_heads: int = 4
    d_mlp: int = 512
    dropout: float = 0.0
    context: int = 128  # training context length
    pe: str = "rope"
    pe_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    pe_source: str = ""  # where a scheme from outside the package comes from (file.py:Class, entry-point:NAME)
    # Logits multiplied per query beyond the training context: a name in logit_scales.LOGIT_SCALES (none, logn,
    # drope, ...), checked where the model is built.
    logit_scale: str = "none"
    logit_scale_c: float = 0.412
    # A learned sink logit per layer and head (GPT-OSS): the softmax gets one extra always-present term with no value,
    # so a head can give its attention to nothing. Trained with it, evaluated with it.
    attention_sinks: bool = False
    # Scalable-Softmax (Nakanishi 2025): every logit times s_h ln(n), n the keys a query sees, s learned per layer and
    # head (from 0.43), so attention does not flatten as n grows.
    ssmax: bool = False
    # The output gate of gated attention (Qiu et al. 2025, arXiv 2505.06708, in Qwen3-Next): each head's output times
    # sigmoid(x W_g), x the block's normed input at the query, W_g learned per head; elementwise (a gate per output
    # channel, the paper's best) or headwise (one per head); empty: no gate.
    output_gate: str = ""
    # Selective attention (Leviathan et al. 2025, arXiv 2410.02703; pebench.model.selective): head 0's rectified
    # logits, summed over the queries before, lower every head's logit of the keys they select; parameter-free.
    selective: bool = False
    # Scale-invariant attention (Anson et al. 2025, arXiv 2505.17083; pebench.model.scale_invariant): every logit at
    # distance t becomes a_t logit + m_t, tau the scale below which it stays as it is; 0: off.
    scale_invariant_tau: float = 0.0
    # Canon layers (Allen-Zhu 2025, arXiv 2512.17351; pebench.model.canon): a residual causal depthwise convolution over
    # the last 4 tokens at the points named, a subset of ABCD (A: attention input, B: q/k/v, C: MLP input, D: MLP
    # hidden); empty: none.
    canon: str = ""
    # The attention's normaliser (pebench.model.entmax): softmax, alpha-entmax (sparse: exact zeros for keys far below
    # the best), or ASEntmax (Vasylenko et al. 2025, arXiv 2506.16640: entmax with a learned, length-scaled query
    # temperature); entmax_alpha its alpha (1 is softmax, 2 sparsemax).
    normaliser: str = "softmax"
    entmax_alpha: float = 1.5
    # ASEntmax's two scale projections with a bias (the authors' reproduction commands set attn_scale_proj_bias=True);
    # off by default: the committed ASEntmax runs (results/wave2026), and the predictions registered on them, have none.
    asentmax_bias: bool = False
    # A scheme and a span per layer (pebench.model.patterns.LayerSpec as a dict: pe, options, window, chunk,
    # logit_scale, ssmax); empty: ``pe`` in every layer. With a list, ``pe`` is the runs' name for it (a pattern's
    # name).
    layers: list = field(default_factory=list)

    def validate(self):
        for name in ("vocab_size", "d_model", "n_layers", "n_heads", "d_mlp", "context"):
            if getattr(self, name) < 1:
                raise UsageError(f"model.{name} must be >= 1, got {getattr(self, name)}")
        if self.d_model % self.n_heads:
            raise UsageError(f"model.d_model ({self.d_model}) must be divisible by model.n_heads ({self.n_heads})")
        if not 0 <= self.dropout < 1:
            raise UsageError(f"model.dropout must be in [0, 1), got {self.dropout}")
        if self.output_gate not in OUTPUT_GATES:
            allowed = ", ".join(repr(g) for g in OUTPUT_GATES)
            raise UsageError(f"model.output_gate must be one of {allowed}, got {self.output_gate!r}")
        if any(p not in CANON_POINTS for p in self.canon) or len(set(self.canon)) != len(self.canon):
            raise UsageError(
                f"model.canon must be letters of {CANON_POINTS}, each at most once (e.g. ABCD, AC), got {self.canon!r}"
            )
        if self.normaliser not in NORMALISERS:
            raise UsageError(f"model.normaliser must be one of {', '.join(NORMALISERS)}, got {self.normaliser!r}")
        if self.asentmax_bias and self.normaliser != "asentmax":
            raise UsageError(f"model.asentmax_bias applies to model.normaliser asentmax, not {self.normaliser!r}")
        if not self.entmax_alpha >= 1:
            raise UsageError(
                f"model.entmax_alpha must be >= 1 (1: softmax, 1.5, 2: sparsemax), got {self.entmax_alpha}"
            )
        if self.scale_invariant_tau < 0:
            raise UsageError(f"model.scale_invariant_tau must be > 0 (or 0: off), got {self.scale_invariant_tau:g}")
        if self.layers and len(self.layers) != self.n_layers:
            raise UsageError(f"model.layers has {len(self.layers)} entries for model.n_layers {self.n_layers}")


PRECISIONS = ("auto", "fp32", "bf16")


def check_precision(value: str, name: str) -> str:
    """``value`` if it is a precision (auto, fp32, bf16), else the one-line error naming ``name`` (the setting)."""
    if value not in PRECISIONS:
        raise UsageError(f"{name} must be one of {', '.join(PRECISIONS)}, got {value!r}")
    return value


OUTPUT_GATES = ("", "elementwise", "headwise")
NORMALISERS = ("softmax", "entmax", "asentmax")
CANON_POINTS = "ABCD"  # Canon layers' points in a block (pebench.model.canon)
MAX_SEED = 2**63 - 1  # torch.manual_seed's range (a seed also names the run: -s<seed>)
MAX_STEPS = 10**9  # a billion optimizer steps: beyond any run this tool plans; a larger number is a typo


@dataclass
class TrainConfig:
    steps: int = 600
    batch_size: int = 32
    lr: float = 3e-3
    min_lr_ratio: float = 0.1
    warmup: int = 60
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.95
    grad_clip: float = 1.0
    seed: int = 0
    data: str = "sotu"
    text_field: str = "text"
    log_every: int = 25
    checkpoint_every: int = 200
    compile: bool = False  # torch.compile the model for training (measured by `pebench bench`)
    # auto: bf16 autocast on CUDA and on CPUs with native bf16 matmuls (AVX512-BF16, AMX), fp32 elsewhere; fp32 | bf16
    # force one (device.train_precision; the one used is in every record's provenance as train_precision)
    precision: str = "auto"
    grad_accum: int = 1  # micro-batches per step (per rank), when a rank's share of the batch does not fit
    lr_by_scheme: dict[str, float] = field(default_factory=dict)  # scheme -> learning rate (written by `pebench tune`)
    eval_every: int = 0  # learning curve: evaluate at 1x and the longest multiple every N steps (0: off)
    # training options on any scheme that `pebench list` shows: a field with a help (set in a config or an overlay)
    random_positions: int = field(
        default=0, metadata={"help": "M >= context: train on sorted random positions from [0, M) (Ruoss 2023); 0: off"}
    )
    random_positions_float: bool = field(
        default=False,
        metadata={
            "help": "Random Float Sampling (arXiv 2602.14050): the random positions are sorted uniform floats, in "
            "training and at evaluation (one seeded draw per length); RoPE, ALiBi, sinusoidal, none"
        },
    )
    # Retrieval data: this fraction of training windows are passkey documents and repeated random strings of
    # needle_lengths [lo, hi] bytes (data/needles.py), keys from the training seed's own stream; 0: off.
    needles: float = 0.0
    needle_lengths: list[int] = field(default_factory=lambda: [16, 64])
    # kind (data.needles.DOC_KINDS) -> weight; {}: passkey and copy, half each
    needle_kinds: dict[str, float] = field(default_factory=dict)
    # Induction warm-up: the first induction_steps of the steps train on windows of random strings each followed by
    # its repeat (induction_lengths [lo, hi] bytes), at lr held after its warmup; the language-model phase (the rest,
    # with the needles above) starts its warmup and cosine schedule afresh. 0: off.
    induction_steps: int = 0
    induction_lengths: list[int] = field(default_factory=lambda: [4, 16])
    induction_kinds: dict[str, float] = field(default_factory=lambda: {"pairs": 1})  # kind -> weight, as needle_kinds

    def validate(self):
        check_corpus_spec(self.data)  # its form; the corpus, when read
        if not 1 <= self.steps <= MAX_STEPS:
            raise UsageError(f"train.steps must be between 1 and {MAX_STEPS:,}, got {self.steps:,}")
        if self.batch_size < 1:
            raise UsageError(f"train.batch_size must be >= 1, got {self.batch_size}")
        if not 0 < self.lr < math.inf:
            raise UsageError(f"train.lr must be a finite number > 0, got {self.lr}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed <= MAX_SEED:
            raise UsageError(f"train.seed must be an integer in [0, {MAX_SEED}], got {self.seed!r}")
        check_precision(self.precision, "train.precision")
        if self.grad_accum < 1 or self.batch_size % self.grad_accum:
            raise UsageError(f"train.grad_accum must be >= 1 and divide train.batch_size ({self.batch_size})")
        if self.warmup < 0 or self.log_every < 1 or self.checkpoint_every < 1:
            raise UsageError("train.warmup must be >= 0, log_every and checkpoint_every >= 1")
        for scheme, lr in self.lr_by_scheme.items():
            if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not 0 < lr < math.inf:
                raise UsageError(f"train.lr_by_scheme.{scheme} must be a finite learning rate > 0, got {lr!r}")
        if self.random_positions_float and not self.random_positions:
            raise UsageError("train.random_positions_float needs train.random_positions M (the range [0, M))")
        if self.random_positions < 0:
            raise UsageError(f"train.random_positions must be 0 (off) or M >= the context, got {self.random_positions}")
        if not 0.0 <= self.needles <= 1.0:
            raise UsageError(f"train.needles must be a fraction in [0, 1], got {self.needles}")
        for key in ("needle_lengths", "induction_lengths"):
            nl = getattr(self, key)
            if (
                not isinstance(nl, (list, tuple))
                or len(nl) != 2
                or not all(isinstance(v, int) for v in nl)
                or not 1 <= nl[0] <= nl[1]
            ):
                raise UsageError(f"train.{key} must be [lo, hi] with 1 <= lo <= hi, got {nl!r}")
        if (
            isinstance(self.induction_steps, bool)
            or not isinstance(self.induction_steps, int)
            or not 0 <= self.induction_steps < self.steps
        ):
            raise UsageError(
                f"train.induction_steps must be 0 (off) or a number of steps below train.steps "
                f"({self.steps}), got {self.induction_steps!r}"
            )
        for key in ("needle_kinds", "induction_kinds"):
            kinds = getattr(self, key)
            for kind, w in kinds.items():
                if kind not in DOC_KINDS or isinstance(w, bool) or not isinstance(w, (int, float)) or w < 0:
                    raise UsageError(
                        f"train.{key}: {kind!r}: {w!r}; kinds are {', '.join(DOC_KINDS)} with weights >= 0"
                    )
            if (kinds or key == "induction_kinds") and not sum(kinds.values()) > 0:
                raise UsageError(f"train.{key}: the weights sum to 0")
        if self.eval_every < 0:
            raise UsageError(f"train.eval_every must be >= 0 (0: no learning curve), got {self.eval_every}")


@dataclass
class EvalConfig:
    multiples: list[float] = field(default_factory=lambda: [1, 2, 4, 8, 16])
    max_tokens: int = 65536  # evaluation stream length (tokens of the validation split)
    batch_tokens: int = 16384  # windows per forward pass: as many as fit this many tokens
    curve_tokens: int = 8192  # learning curve (train.eval_every): the first this many validation tokens

    def validate(self):
        if not self.multiples or any((not isinstance(m, (int, float))) or m <= 0 for m in self.multiples):
            raise UsageError("eval.multiples must be a non-empty list of positive numbers")
        if self.max_tokens < 2 or self.batch_tokens < 1:
            raise UsageError("eval.max_tokens must be >= 2 and eval.batch_tokens >= 1")


# The keys added after the first runs, each left out of the config hash while it changes nothing: dotted key -> whether
# it is left out, decided on the config as a dict. A key added later goes here with its rule; tests/test_config_hash.py
# reproduces the hash of every committed record.
HASH_OMITTED: dict[str, Callable[[dict], bool]] = {
    "model.attention_sinks": lambda d: not d["model"]["attention_sinks"],
    "model.ssmax": lambda d: not d["model"]["ssmax"],
    "model.output_gate": lambda d: not d["model"]["output_gate"],
    "model.selective": lambda d: not d["model"]["selective"],
    "model.scale_invariant_tau": lambda d: not d["model"]["scale_invariant_tau"],
    "model.canon": lambda d: not d["model"]["canon"],
    "train.random_positions_float": lambda d: not d["train"]["random_positions_float"],
    "model.normaliser": lambda d: d["model"]["normaliser"] == "softmax",
    "model.entmax_alpha": lambda d: d["model"]["normaliser"] == "softmax",
    "model.asentmax_bias": lambda d: not d["model"]["asentmax_bias"],
    "model.layers": lambda d: not d["model"]["layers"],
    "train.needles": lambda d: not d["train"]["needles"],
    "train.needle_lengths": lambda d: not d["train"]["needles"],
    "train.needle_kinds": lambda d: not d["train"]["needles"],
    "train.precision": lambda d: d["train"]["precision"] == "auto",  # the precision used is provenance
    "train.induction_steps": lambda d: not d["train"]["induction_steps"],
    "train.induction_lengths": lambda d: not d["train"]["induction_steps"],
    # the default came after the first warm-ups
    "train.induction_kinds": lambda d: (
        not d["train"]["induction_steps"] or d["train"]["induction_kinds"] == {"pairs": 1}
    ),
}

# The schemes whose rates lr_by_scheme held when the first runs were hashed. A rate is resolved into train.lr (which
# the hash holds), so the rate of a scheme added later never changes the hash of another scheme's runs.
LR_HASHED = ("none", "sinusoidal", "learned", "shaw", "t5", "rope", "alibi")
LR_HASHED += ("kerple", "fire", "xpos", "p-rope", "sandwich", "fox", "cope")


@dataclass
class Config:
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    name: str = "custom"

    def validate(self) -> "Config":
        self.model.validate()
        self.train.validate()
        self.eval.validate()
        if 0 < self.train.random_positions < self.model.context:
            raise UsageError(
                f"train.random_positions ({self.train.random_positions}) must be >= model.context "
                f"({self.model.context}): positions are drawn from [0, M)"
            )
        return self

    def to_dict(self) -> dict:
        return asdict(self)

    def hash(self) -> str:
        """Hash of what determines the trained model (not the name, not the evaluation settings). Keys added after
        the first runs are left out while they change nothing (``HASH_OMITTED``), so the runs from before keep their
        hashes."""
        d = self.to_dict()
        d.pop("name", None)
        d.pop("eval", None)
        omit = [key for key, unchanged in HASH_OMITTED.items() if unchanged(d)]  # decided before anything is dropped
        for key in omit:
            section, name = key.split(".")
            d[section].pop(name)
        d["train"]["lr_by_scheme"] = {k: v for k, v in d["train"]["lr_by_scheme"].items() if k in LR_HASHED}
        return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]


def config_diff(a: "Config", b: "Config") -> list[str]:
    """Dotted keys whose values differ between two configs, among those that determine the trained model (of the
    options, only those of the config's own scheme count)."""

    def flat(c: "Config") -> dict:
        d = c.to_dict()
        d["model"]["pe_options"] = d["model"]["pe_options"].get(d["model"]["pe"]) or {}
        out = {f"{sec}.{k}": v for sec in ("model", "train") for k, v in d[sec].items()}
        return out

    ignored = {"train.lr_by_scheme", "train.eval_every", "train.log_every", "train.checkpoint_every"}  # resolved
    # into train.lr, or bookkeeping that leaves the trained weights alone (tested bitwise for eval_every)
    da, db = flat(a), flat(b)
    return [k for k in sorted(set(da) | set(db)) if k not in ignored and da.get(k) != db.get(k)]


def type_matches(value: Any, default: Any) -> bool:
    """Whether a user-given value fits the type of a field's default (ints are accepted for floats,
    bools are never taken for numbers)."""
    expected = type(default)
    if isinstance(value, bool) and expected is not bool:
        return False
    return isinstance(value, expected) or (expected is float and isinstance(value, int))


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _build(cls, data: Any, where: str):
    if not isinstance(data, dict):
        raise UsageError(f"config section {where or 'top level'} must be a mapping, got {type(data).__name__}")
    known = {f.name: f for f in fields(cls)}
    kwargs = {}
    for key, value in data.items():
        path = f"{where}.{key}" if where else str(key)
        if key not in known:
            raise UsageError(f"unknown config key {path!r}; allowed: {', '.join(known)}")
        f = known[key]
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        if dataclasses.is_dataclass(default):
            kwargs[key] = _build(type(default), value, path)
            continue
        if not type_matches(value, default):
            hint = ""
            if isinstance(default, float) and isinstance(value, str) and _is_number(value):
                hint = f" (YAML reads {value} as text: write it with a decimal point, e.g. {float(value)!r})"
            raise UsageError(f"config key {path!r} must be {type(default).__name__}, got {value!r}{hint}")
        kwargs[key] = float(value) if isinstance(default, float) else value
    return cls(**kwargs)


def config_from_dict(data: dict, name: str = "custom") -> Config:
    cfg = _build(Config, data, "")
    if "name" not in data:
        cfg.name = name
    return cfg.validate()


def builtin_configs() -> list[str]:
    return sorted(p.stem for p in CONFIG_DIR.glob("*.yaml"))


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _read_yaml(path: Path, spec: str) -> dict:
    try:
        data = load_yaml(path.read_text())
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise UsageError(f"config {spec} is not valid YAML{at}: {problem}") from e
    if data is None:
        raise UsageError(
            f"config {spec} is empty: give the sections it changes (model, train, eval), or a built-in name"
        )
    if not isinstance(data, dict):
        raise UsageError(f"config {spec} must be a mapping of sections, got {type(data).__name__}")
    return data


def load_config(spec: str = "tiny", overlays: tuple = ()) -> Config:
    """``spec`` is a built-in name (tiny, small) or a path to a YAML file; each overlay (a partial YAML, such as
    the one `pebench tune` writes) is merged over it, and its file name joins the config name, so runs trained
    with an overlay never take the names of runs trained without it."""
    path = Path(spec)
    if not (spec.endswith((".yaml", ".yml")) or path.exists()):
        path = CONFIG_DIR / f"{spec}.yaml"
        if not path.exists():
            from .util.registry import unknown_name_message

            raise UsageError(unknown_name_message("config", spec, builtin_configs()) + " or a path to a .yaml file")
    if not path.is_file():
        raise UsageError(f"config file not found: {spec}")
    data = _read_yaml(path, spec)
    data.pop("launcher", None)  # where to run, not what: read by config_section, never part of the config's hash
    name = data.pop("name", path.stem)
    data, name = _overlaid(data, name, overlays)
    return config_from_dict(data, name=name)


def config_section(spec: str, section: str) -> dict:
    """A section of a config file that is not part of the run's config (``launcher``); {} for a built-in name
    without it."""
    path = Path(spec) if (spec.endswith((".yaml", ".yml")) or Path(spec).exists()) else CONFIG_DIR / f"{spec}.yaml"
    if not path.is_file():
        return {}
    value = _read_yaml(path, spec).get(section) or {}
    if not isinstance(value, dict):
        raise UsageError(f"config {spec}: section {section} must be a mapping, got {type(value).__name__}")
    return value


def _overlaid(data: dict, name: str, overlays: tuple) -> tuple[dict, str]:
    for o in overlays:
        op = Path(o)
        if not op.is_file():
            raise UsageError(f"--overlay file not found: {o}")
        over = _read_yaml(op, str(o))
        over.pop("name", None)
        data = _merge(data, over)
        name = f"{name}-{op.stem}"
    return data, name


def with_overlays(cfg: Config, overlays: tuple) -> tuple[Config, list[str]]:
    """A built config with overlays merged over it (a run continued from another: ``train --init-from``), and
    the overlays' file names."""
    data = cfg.to_dict()
    data.pop("name", None)
    data, _ = _overlaid(data, cfg.name, overlays)
    return config_from_dict(data, name=cfg.name), [Path(o).stem for o in overlays]


def parse_pe(spec: str) -> list[str]:
    """``--pe``'s text as the list every command reads (a name given twice is an error)."""
    return parse_list(spec, "--pe")


def _flag(key: str, flag: str, help: str = "", switch: bool = False):
    """A field that a flag sets: its config key, its flag and, for a flag the commands make from this field
    (``cli.flags.takes``), its help; ``switch``: a boolean with its --no- form."""
    meta = {"key": key, "flag": flag}
    if help:
        meta.update(help=help, decl=f"{flag}/--no-{flag[2:]}" if switch else flag)
    return field(default=None, metadata=meta)


@dataclass(frozen=True)
class ConfigFlags:
    """The command-line settings that change a config, each None when not given. A field with a key sets that
    config key (``resolve_config`` applies them all the same way); a field with a help is also the option itself:
    ``train``, ``run`` and ``tune`` make their options from these fields (``cli.flags.takes``), so a new flag is a
    field here and a line in the docs. The fields without a key (the schemes, the config, overlays, layers) the
    commands resolve themselves; ``--pe`` is a list from the parser on."""

    pe: Optional[list[str]] = field(  # None: the command's default
        default=None,
        metadata={
            "decl": "--pe",
            "help": "comma list of schemes, groups (classic, modern, all) and layer patterns (report: row labels too; "
            "default: train rope, run the suite's, tune and bench classic, report every row)",
            "parse": parse_pe,
        },
    )
    config: Optional[str] = field(  # None: the command's default (tiny, or the suite's)
        default=None,
        metadata={
            "decl": "--config",
            "help": "tiny | small | context | gpt2-small | PATH.yaml (default: tiny; run: the suite's)",
        },
    )
    overlays: tuple[str, ...] = field(
        default=(),
        metadata={
            "decl": "--overlay",
            "help": "YAML merged over the config (repeatable), e.g. the one `pebench tune` writes",
        },
    )
    # also shortens the warmup and checkpoint interval
    steps: Optional[int] = _flag("train.steps", "--steps", "training steps (default: the config's)")
    data: Optional[str] = _flag("train.data", "--data", "sotu | pystdlib | hf:NAME[:CONFIG] | local:PATH")
    text_field: Optional[str] = _flag(
        "train.text_field", "--text-field", "the text column of an hf: or local: corpus (default: text)"
    )
    compile: Optional[bool] = _flag("train.compile", "--compile", "torch.compile the model", switch=True)
    needles: Optional[float] = _flag(  # also joins the config name
        "train.needles", "--needles", "fraction of training windows that are retrieval documents (train.needles)"
    )
    seed: Optional[int] = _flag(
        "train.seed", "--seed", "the training seed (data order and initialisation; default: the config's)"
    )
    lr: Optional[float] = _flag(  # every scheme's rate (the tuned ones set aside); joins the name
        "train.lr",
        "--lr",
        "one learning rate for every scheme (default: each scheme's tuned rate); joins the run names",
    )
    precision: Optional[str] = _flag(
        "train.precision", "--precision", "training: auto (bf16 on CUDA and on CPUs with native bf16) | fp32 | bf16"
    )
    sinks: Optional[bool] = _flag(  # also joins the config name
        "model.attention_sinks",
        "--sinks",
        "a learned attention-sink logit per layer and head (model.attention_sinks)",
        switch=True,
    )
    ssmax: Optional[bool] = _flag(  # also joins the config name
        "model.ssmax", "--ssmax", "Scalable-Softmax: logits times a learned s ln n (model.ssmax)", switch=True
    )
    gate: Optional[str] = _flag(  # also joins the config name
        "model.output_gate",
        "--gate",
        "gated attention's output gate: elementwise | headwise (model.output_gate; default: none)",
    )
    selective: Optional[bool] = _flag(  # also joins the config name
        "model.selective",
        "--selective",
        "selective attention: head 0's rectified logits mask what later tokens see (model.selective)",
        switch=True,
    )
    scale_invariant: Optional[float] = _flag(  # also joins the config name
        "model.scale_invariant_tau",
        "--scale-invariant",
        "scale-invariant attention with this tau (tokens; the paper pairs it with p-rope; model.scale_invariant_tau)",
    )
    canon: Optional[str] = _flag(  # also joins the config name
        "model.canon", "--canon", "Canon layers at the points named: ABCD or a subset (model.canon; default: none)"
    )
    normaliser: Optional[str] = _flag(  # also joins the config name
        "model.normaliser",
        "--normaliser",
        "attention weights: softmax | entmax | asentmax (entmax with a learned length-scaled temperature; "
        "model.normaliser)",
    )
    layers: Optional[str] = field(  # a pattern or a list, one layer each (sets model.layers and model.pe)
        default=None,
        metadata={
            "decl": "--layers",
            "help": "a scheme and span per layer: a pattern (irope, local-global, swan, nope-rope-alt, NAME:key=value) "
            "or a list, one per layer (rope@w32,rope@c32,none)",
        },
    )

    def given(self) -> dict[str, tuple[str, Any]]:
        """Config key -> (flag, value) of every flag given."""
        return {
            f.metadata["key"]: (f.metadata["flag"], getattr(self, f.name))
            for f in fields(self)
            if "key" in f.metadata and getattr(self, f.name) is not None
        }


@contextlib.contextmanager
def naming_flags(flags: dict[str, str]) -> Iterator[None]:
    """A validation error about a config key that a flag set names the flag first ('--steps must be >= 1, got 0
    (train.steps)'); ``flags``: config key -> flag."""
    try:
        yield
    except UsageError as e:
        msg = str(e)
        for key, flag in flags.items():
            if msg.startswith(key + " "):
                raise UsageError(f"{flag}{msg[len(key) :]} ({key})") from None
        raise


def short_warmup(warmup: int, steps: int) -> int:
    """The warmup of a run of ``steps`` steps: at most a tenth of them (the one rule for --steps and continuations)."""
    return min(warmup, steps // 10)


def with_steps(cfg: Config, steps: int) -> tuple[Config, list[str]]:
    """The config trained for ``steps`` steps; the warmup (at most a tenth), the checkpoint interval (at most the
    steps) and an induction warm-up (the same share of the steps, and at least one language-model step after it)
    follow, and each change is returned as a note for the user."""
    t = cfg.train
    warm, every = short_warmup(t.warmup, steps), min(t.checkpoint_every, steps)
    induction = t.induction_steps
    if induction and steps != t.steps:
        induction = min(steps - 1, max(1 if steps > 1 else 0, round(induction * steps / t.steps)))
    changed = [
        f"train.{k} {a} -> {b}"
        for k, a, b in (
            ("warmup", t.warmup, warm),
            ("checkpoint_every", t.checkpoint_every, every),
            ("induction_steps", t.induction_steps, induction),
        )
        if a != b
    ]
    notes = [f"--steps {steps} also set {', '.join(changed)}"] if changed else []
    train = replace(t, steps=steps, warmup=warm, checkpoint_every=every, induction_steps=induction)
    return replace(cfg, train=train), notes


def resolve_config(flags: ConfigFlags) -> tuple[Config, list[str]]:
    """The config a command trains with, validated once, and notes on what a flag changed beyond itself. A needles
    fraction, attention sinks, Scalable-Softmax, an output gate, entmax, selective and scale-invariant attention and
    Canon layers join the config name, so such runs never take the names of runs without."""
    given = flags.given()
    with naming_flags({k: f for k, (f, _) in given.items()}):
        cfg = load_config(flags.config or "tiny", tuple(flags.overlays))
        for key, (_, value) in given.items():
            if key == "train.steps":
                continue  # with_steps, below: what follows the steps changes with them
            section, name = key.split(".")
            cfg = replace(cfg, **{section: replace(getattr(cfg, section), **{name: value})})
        if flags.needles is not None:
            cfg = replace(cfg, name=f"{cfg.name}-needles{flags.needles:g}")
        if flags.sinks:
            cfg = replace(cfg, name=f"{cfg.name}-sinks")
        if flags.ssmax:
            cfg = replace(cfg, name=f"{cfg.name}-ssmax")
        if flags.gate:
            cfg = replace(cfg, name=f"{cfg.name}-gate" + ("" if flags.gate == "elementwise" else f"-{flags.gate}"))
        if flags.normaliser and flags.normaliser != "softmax":
            cfg = replace(cfg, name=f"{cfg.name}-{flags.normaliser}")
        if flags.selective:
            cfg = replace(cfg, name=f"{cfg.name}-selective")
        if flags.scale_invariant:
            cfg = replace(cfg, name=f"{cfg.name}-si{flags.scale_invariant:g}")
        if flags.canon:
            cfg = replace(cfg, name=f"{cfg.name}-canon" + ("" if flags.canon == "ABCD" else f"-{flags.canon}"))
        notes: list[str] = []
        if flags.lr is not None:  # one rate for every scheme: runs at it never take the tuned runs' names
            if cfg.train.lr_by_scheme:
                notes.append(f"--lr {flags.lr:g} trains every scheme at it (the config's per-scheme rates set aside)")
            cfg = replace(cfg, name=f"{cfg.name}-lr{flags.lr:g}", train=replace(cfg.train, lr_by_scheme={}))
        if flags.steps is not None:
            cfg, more = with_steps(cfg, flags.steps)
            notes += more
        return cfg.validate(), notes
