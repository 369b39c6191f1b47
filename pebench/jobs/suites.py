"""Named suites of ``pebench run``: which config, schemes, evaluation tasks and results folder a suite means.

``default`` is the README's main job (perplexity of the classic seven); ``context`` trains the same schemes with
retrieval data (``configs/context.yaml``) and measures whether they use the context: perplexity with ppl_far,
passkey retrieval, copying, RULER-style needles, variable tracking and associative recall; ``patterns`` trains the
layer patterns long-context models ship (``pebench.model.patterns``) and the three 2025 schemes beside RoPE and
ALiBi at the default config and budget, measured by perplexity, passkey and copying (``scripts/patterns.sh`` adds
the sink variants and the evaluation-time temperature, and packs ``results/patterns``); ``scale`` trains the
classic seven at the points of four axes around the default (``Point``: the training budget, the width at fixed
tokens per parameter, the width at the default's 500 steps, the training context), each evaluated from 1x to 16x
its own training context.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Optional

from ..config import Config, config_from_dict
from ..util.errors import UsageError


@dataclass(frozen=True)
class Point:
    """One point of a suite's scale axes: the suite's config with some keys set (``model.d_model``: 64), its name
    joined to the config's (``tiny-d64``), so each point's runs are named apart. The empty name is the config."""

    axis: str  # budget | width | width-steps | context, or "" for the config itself (every axis's middle point)
    name: str
    settings: tuple[tuple[str, Any], ...] = ()  # (dotted key, value)

    def without(self, key: str) -> "Point":
        """The point with ``key`` left to the config (a flag that sets it for every point wins over the point)."""
        return replace(self, settings=tuple(kv for kv in self.settings if kv[0] != key))

    def apply(self, cfg: Config) -> Config:
        if not self.name:
            return cfg
        data = cfg.to_dict()
        data.pop("name", None)
        for key, value in self.settings:
            section, field_ = key.split(".")
            data[section][field_] = value
        return config_from_dict(data, name=f"{cfg.name}-{self.name}")


@dataclass(frozen=True)
class Suite:
    name: str
    config: str
    pe: str
    tasks: str
    results: str
    trials: Optional[int] = None  # passkey and copy prompts per cell (None: the tasks' default)
    protocol: tuple[str, Optional[int]] = ("nonoverlap", None)  # ppl's protocol and its stride (sliding)
    max_tokens: Optional[int] = None  # evaluation stream (None: the config's)
    task_opts: tuple[
        str, ...
    ] = ()  # --task-opt settings of the suite's tasks (a user's --task-opt of the same key wins)
    description: str = ""
    points: tuple[Point, ...] = ()  # the scale axes' points (empty: the config alone)


# The scale suite: the default point (tiny: width 128, 500 steps of 32 x 128, 2.49 tokens per parameter, context
# 128) and more points on each axis, four or more per axis with the default (a slope is stated on at least four).
# Budget: 2x, 4x and 8x the steps (5, 10 and 20 tokens per parameter).
# Width: 64, 192 and 256 (4 heads, MLP 4x, as tiny) at the default's 2.49 tokens per parameter (130, 1,108 and 1,957
# steps), so a wider model also trains longer; "width-steps" holds the widths at the default's 500 steps instead, so
# the two axes tell model size from training length apart.
# Training context: 64, 256 and 512 at the default's 2,048,000 tokens (the batch 64, 16 and 8). The costliest points
# train compiled (train.compile): in the suite's layout (a process per core, one thread each, bf16) the compiled step
# is the lever that pays (results/scale/levers.md and levers-d256.md, scripts/speed_levers.py --suite), its compile
# a few tens of seconds per run; the points measured before it keep the eager configs their records were hashed with.
SCALE_POINTS = (
    Point("", ""),
    Point("budget", "steps1000", (("train.steps", 1000), ("train.checkpoint_every", 250))),
    Point("budget", "steps2000", (("train.steps", 2000), ("train.checkpoint_every", 500))),
    Point("budget", "steps4000", (("train.steps", 4000), ("train.checkpoint_every", 1000), ("train.compile", True))),
    Point("width", "d64", (("model.d_model", 64), ("model.d_mlp", 256), ("train.steps", 130))),
    Point(
        "width",
        "d256",
        (("model.d_model", 256), ("model.d_mlp", 1024), ("train.steps", 1957), ("train.compile", True)),
    ),
    Point(
        "width",
        "d192",
        (("model.d_model", 192), ("model.d_mlp", 768), ("train.steps", 1108), ("train.compile", True)),
    ),
    Point("width-steps", "d64s500", (("model.d_model", 64), ("model.d_mlp", 256))),
    Point("width-steps", "d192s500", (("model.d_model", 192), ("model.d_mlp", 768), ("train.compile", True))),
    Point("width-steps", "d256s500", (("model.d_model", 256), ("model.d_mlp", 1024), ("train.compile", True))),
    Point("context", "ctx64", (("model.context", 64), ("train.batch_size", 64))),
    Point("context", "ctx256", (("model.context", 256), ("train.batch_size", 16))),
    Point("context", "ctx512", (("model.context", 512), ("train.batch_size", 8))),
)


SUITES = {
    "default": Suite(
        "default",
        "tiny",
        "classic",
        "ppl",
        "results",
        description="perplexity of the classic seven from 1x to 16x (the README's main job)",
    ),
    "context": Suite(
        "context",
        "context",
        "classic",
        "ppl,passkey,copy,niah,vt,mqar,pairs,count,list,common,decoy",
        "results/context-runs",  # its runs and records; the committed set results/context takes them by `pack`
        trials=20,
        protocol=("sliding", 64),
        max_tokens=16384,
        task_opts=("niah.form=compact", "vt.form=compact", "niah.trials=10", "vt.trials=40", "mqar.trials=40"),
        description="the classic seven trained with retrieval data: ppl and ppl_far scored with "
        "long context (sliding, S = 64), passkey, copy, RULER's needles (compact form), "
        "variable tracking, MQAR, and the tiered tasks (minimal pairs, counting, a latent list, common words, "
        "decoys a RoPE wavelength from the needle)",
    ),
    "patterns": Suite(
        "patterns",
        "tiny",
        "irope,local-global,swan,nope-rope-alt,pope,stick-breaking,path,rope,alibi",
        "ppl,passkey,copy",
        "results/patterns-runs",  # its runs and records; the committed set results/patterns takes them by `pack`
        description="the layer patterns (irope, local-global, swan, nope-rope-alt) and PoPE, stick-breaking and PaTH "
        "beside RoPE and ALiBi at the tiny config: ppl, passkey and copy from 1x to 16x (--sinks: the sink variants)",
    ),
    "scale": Suite(
        "scale",
        "tiny",
        "classic",
        "ppl",
        "results/scale-runs",  # its runs and records; the committed set results/scale takes them by `pack`
        description="the classic seven along four axes from the default point: training budget (500, 1,000, 2,000 "
        "and 4,000 steps), width (64, 128, 192, 256 at 2.49 tokens per parameter), width at the default's 500 steps "
        "(64, 128, 192, 256) and training context (64, 128, 256, 512 at 2.05M tokens), each point from 1x to 16x its "
        "own context",
        points=SCALE_POINTS,
    ),
}


def get_suite(name: Optional[str]) -> Suite:
    if name is None:
        return SUITES["default"]
    if name not in SUITES:
        from ..util.registry import unknown_name_message

        raise UsageError(unknown_name_message("suite", name, list(SUITES)))
    return SUITES[name]
