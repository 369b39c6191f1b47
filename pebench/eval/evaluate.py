"""Evaluation: run tasks on a finished run, at each length (and evaluation-time variant of its scheme, and logit
scale), under a protocol; write one record per (task, variant, length). The scoring itself is ``scoring.py``'s,
the measuring each task's (``eval/tasks/``)."""

from __future__ import annotations

import copy
import json
import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

import torch

from ..data import prepare_corpus
from ..model.checkpoint import load_run_model
from ..model.device import cpu_name, eval_precision, resolve_device, tune_cpu_allocator
from ..model.logit_scales import check_logit_scale
from ..model.spans import Span
from ..results import (
    EVAL_SPLITS,
    SCHEMA_VERSION,
    ResultsDir,
    environment,
    now,
    peak_rss_mb,
    protocol_key,
    training_provenance,
)
from ..util.errors import PebenchError, PositionOutOfRange, UsageError
from ..util.parsing import parse_list, parse_scaling, parse_spec, typed_value
from ..util.progress import Reporter
from ..util.registry import unknown_name_message
from .flags import EvalSettings
from .scoring import Journal, Protocol
from .tasks import TASKS, EvalContext, Task, resolve_tasks, task_names, task_options

if TYPE_CHECKING:
    import numpy as np

    from ..config import Config
    from ..data.dataset import PreparedCorpus


@dataclass(frozen=True)
class EvalRequest(EvalSettings):
    """What to measure on a run: the settings as given (``EvalSettings``: lengths, None for the config's multiples of
    its context; the stream's max tokens and split; device, backend, precision; a fixed RoPE factor, None for
    automatic; an evaluation-time logit scale and window; whether records already written are reused) and what the
    command's text parses into: the protocol, the scheme's evaluation-time variants (``["all"]``: each run's own
    list), the tasks (default ``ppl``) with their options, and ``only_lengths``: a worker's share of the lengths
    (None: all), measured exactly as the whole list would measure them."""

    protocol: Protocol = Protocol()
    variants: list[str] = field(default_factory=list)
    tasks: list[Task] = field(default_factory=list)
    options: Optional[dict[str, dict[str, Any]]] = None
    only_lengths: Optional[list[int]] = None

    def validate(self) -> "EvalRequest":
        self.check()
        return self

    def span(self) -> Optional[Span]:
        """The evaluation-time window (None without ``--window``)."""
        return Span(self.window, keep=4 if self.keep is None else self.keep) if self.window else None

    def resolved_tasks(self) -> tuple[list[Task], dict]:
        tasks = self.tasks or resolve_tasks("ppl")
        return tasks, self.options or task_options(tasks, {})


def parse_variants(spec: Optional[str], factor: Optional[float] = None) -> list[str]:
    """Evaluation-time variants, ``NAME[:key=value...]`` each (``yarn:factor=4:beta_fast=16``, the form ``--hf``
    takes), checked against every scheme's list and the variant's settings; ``all`` means each run's own list.
    ``factor`` (``--rope-factor``) is ``:factor=F`` on every variant. A variant with settings is named by them
    (``yarn:factor=4``), so its records never take the place of the automatic factor's."""
    from ..model.pe import all_variants
    from ..util.parsing import canonical_scaling

    if not spec:
        return []
    names = parse_list(spec, "--rope-scaling")
    if names == ["all"]:
        return names
    known, out = all_variants(), []
    for item in (canonical_scaling(x)[0] for x in names):
        name = item.split(":")[0].strip()
        if name not in known:
            raise UsageError(unknown_name_message("RoPE scaling", name, known + ["all"]))
        keys = variant_settings(name)
        given = {"factor": repr(float(factor))} if factor is not None and "factor" in keys else None
        values = parse_scaling(
            item,
            list(keys),
            lambda k, v, item=item, keys=keys: typed_value(v, keys[k], f"--rope-scaling {item}: {k}"),
            given,
        )
        out.append(variant_spec(name, values))
    return out


def variant_settings(name: str) -> dict[str, Any]:
    """The settings ``NAME:key=value`` may give a variant, with their defaults: the factor (0: automatic) and the
    variant function's own options (RoPE's scalings read them off their signatures)."""
    from ..model.pe.rope import ROPE_VARIANTS, canonical_variant, variant_options

    if canonical_variant(name) == "default":
        return {}  # the rotation as trained: nothing to set
    own = variant_options(name) if canonical_variant(name) in ROPE_VARIANTS.names() else {}
    return {"factor": 0.0, **own}


def variant_spec(name: str, values: dict[str, Any]) -> str:
    """The canonical text of a variant with settings: ``yarn:beta_fast=16:factor=4`` (keys sorted, numbers
    with ``%g``); the bare name without them."""
    return name + "".join(f":{k}={v:g}" if isinstance(v, float) else f":{k}={v}" for k, v in sorted(values.items()))


def split_variant(spec: str) -> tuple[str, dict[str, Any]]:
    """A canonical variant text back into (name, settings typed as their defaults)."""
    name, texts = parse_spec(spec, "--rope-scaling", list(variant_settings(spec.split(":")[0])))
    keys = variant_settings(name)
    return name, {k: typed_value(v, keys[k], f"--rope-scaling {spec}: {k}") for k, v in texts.items()}


def variant_label(
    cfg, pe, meta: dict, logit_scale: Optional[str] = None, spec: Optional[str] = None, span: Optional[Span] = None
) -> tuple[str, str]:
    """(variant, row label): 'rope+yarn', with ' ftN' for a fine-tuned run, ' from-S' for a run continued from a
    scheme S (DroPE) and ' rpM' for one trained on random positions; an evaluation-time logit scale and window join
    the variant ('none+drope', 'rope+yarn+logn', 'irope+llama4@none', 'rope+w64+k4')."""
    v = spec or ("none" if pe.variant == "default" else pe.variant)  # with settings: 'yarn:factor=4'
    for extra in (
        logit_scale if logit_scale not in (None, "none", cfg.model.logit_scale) else "",
        span and span.label(),
    ):
        if extra:
            v = extra if v == "none" else f"{v}+{extra}"
    label = cfg.model.pe + ("" if v == "none" else f"+{v}")
    if cfg.train.random_positions:
        # trained on random positions from [0, M): integers, or floats (Random Float Sampling)
        label += f" rp{'f' if cfg.train.random_positions_float else ''}{cfg.train.random_positions}"
    if cfg.model.attention_sinks:
        label += " sink"  # trained with a sink logit per head
    if cfg.model.ssmax:
        label += " ssmax"  # trained with Scalable-Softmax
    if cfg.model.output_gate:  # trained with gated attention's output gate
        label += " gate" + ("" if cfg.model.output_gate == "elementwise" else f"-{cfg.model.output_gate}")
    if cfg.model.normaliser != "softmax":  # trained with entmax attention (its alpha where not 1.5)
        label += f" {cfg.model.normaliser}" + ("" if cfg.model.entmax_alpha == 1.5 else f"{cfg.model.entmax_alpha:g}")
    if cfg.model.selective:  # trained with selective attention
        label += " selective"
    if cfg.model.scale_invariant_tau:  # trained with scale-invariant attention at this tau
        label += f" si{cfg.model.scale_invariant_tau:g}"
    if cfg.model.canon:  # trained with Canon layers at these points
        label += " canon" + ("" if cfg.model.canon == "ABCD" else f"-{cfg.model.canon}")
    if meta.get("recalibration"):
        return v, label + f" from-{meta['recalibration']['from_scheme']}"
    return v, label + (f" ft{cfg.model.context}" if meta.get("parent") else "")


def _measure(task: Task, ctx: EvalContext, L: int) -> dict:
    """The measured part of one record: the task's result, or undefined with the reason (a length the scheme
    cannot represent)."""
    limit = ctx.model.pe.max_positions()
    try:
        if limit is not None and L > limit:
            raise PositionOutOfRange(f"{ctx.cfg.model.pe} represents positions 0..{limit - 1} only")
        return task.measure(ctx, L)
    except PositionOutOfRange as e:
        return task.undefined(str(e))
    except torch.OutOfMemoryError:
        raise PebenchError(
            f"out of device memory evaluating {ctx.title}; lower eval.batch_tokens or the length"
        ) from None


@dataclass
class _Opened:
    """A finished run opened for evaluation: its config, metadata, model, corpus, split tokens and stream."""

    cfg: Config
    meta: dict[str, Any]
    model: torch.nn.Module
    corpus: PreparedCorpus
    tokens: np.ndarray
    stream: np.ndarray


def _open_run(results: ResultsDir, run: str, dev, req: EvalRequest) -> _Opened:
    if req.split not in EVAL_SPLITS:
        raise UsageError(unknown_name_message("split", req.split, list(EVAL_SPLITS)))
    cfg, meta, model = load_run_model(results, run, dev)
    model.set_attention_backend(req.backend)
    model.set_eval_span(req.span())
    if req.logit_scale is not None:
        check_logit_scale(req.logit_scale)  # one line naming the valid ones
        model.logit_scale = req.logit_scale
    corpus = prepare_corpus(cfg.train.data, results.cache, cfg.train.text_field)
    tokens = corpus.tokens(req.split)
    if len(tokens) < 2:
        raise PebenchError(f"corpus {corpus.spec!r} has no {req.split} documents to evaluate on")
    check_cap(req.max_tokens, len(tokens), f"the {req.split} split of {corpus.spec!r}")
    stream = tokens[: min(len(tokens), req.max_tokens or cfg.eval.max_tokens)]
    return _Opened(cfg, meta, model, corpus, tokens, stream)


def check_cap(asked: Optional[int], holds: int, what: str) -> None:
    """``--max-tokens`` beyond what the split holds would key a new stream that is the whole split: one line."""
    if asked is not None and asked > holds:
        raise UsageError(
            f"--max-tokens {asked:,} is more than {what} holds ({holds:,} tokens): give at most {holds:,}, or leave"
            " it out for the config's own cap"
        )


def _variants(run: str, o: _Opened, req: EvalRequest) -> list:
    """The scheme variants to evaluate, canonical ``NAME[:key=value...]`` texts ([None]: the run as trained)."""
    variants = list(req.variants)
    if variants == ["all"]:
        variants = o.model.pe.variants()
    if variants and not o.model.pe.variants():
        raise PebenchError(
            f"run {run!r} uses {o.cfg.model.pe!r}, which has no evaluation-time variants "
            "(--rope-scaling applies to the RoPE family)"
        )
    return parse_variants(",".join(variants), req.rope_factor) if variants else [None]


def _existing(results: ResultsDir, rec: dict, task: Task) -> Optional[dict]:
    """The record already written for this cell, if it was measured by this version of the task."""
    path = results.record_path(rec)
    if not path.exists():
        return None
    old = json.loads(path.read_text())
    return old if old.get("task_version", 1) == task.version else None


def evaluate_run(
    results: ResultsDir, run: str, req: EvalRequest = EvalRequest(), reporter: Optional[Reporter] = None
) -> list[dict]:
    """Evaluate one finished run as ``req`` says; write and return the records (each told to ``reporter.record``
    as it is written, the progress of long scoring to ``reporter.progress``)."""
    reporter = reporter or Reporter.quiet()
    req.protocol.validate()
    tasks, options = req.resolved_tasks()
    dev = resolve_device(req.device)
    precision = eval_precision(dev, req.eval_precision)
    tune_cpu_allocator()
    o = _open_run(results, run, dev, req)
    T = o.cfg.model.context
    lengths = eval_lengths(o.cfg, req.lengths)
    for task in tasks:  # check every setting before computing anything
        task.check(options[task.name], lengths, T, len(o.stream), req.protocol)
    todo = _share(lengths, req.only_lengths)
    prov = {
        **environment(str(dev)),
        "seed": o.cfg.train.seed,
        "steps": o.cfg.train.steps,
        "params": o.model.num_params(),
        "corpus": o.corpus.spec,
        "corpus_fingerprint": o.corpus.fingerprint,
        "config_hash": o.cfg.hash(),
        "config_name": o.cfg.name,
        "parent": o.meta.get("parent"),
        **training_provenance(results.run_dir(run)),
        **({"train_precision": o.meta["precision"]} if "precision" in o.meta else {}),
        "eval_precision": precision,
    }
    records, base_pe, measured = [], o.model.pe, {}
    try:
        for variant in _variants(run, o, req):
            name, settings = split_variant(variant) if variant is not None else (None, {})
            o.model.pe = base_pe if name is None else base_pe.with_variant(name, **settings)
            v, label = variant_label(
                o.cfg, o.model.pe, o.meta, req.logit_scale, variant if settings else None, req.span()
            )
            if variant is not None and base_pe.variant != "default":
                label += f" eval-{variant}"  # a variant applied over the one baked in: never the baked run's label
            for task in tasks:
                ctx = EvalContext(
                    o.model,
                    o.cfg,
                    dev,
                    o.stream,
                    o.tokens,
                    req.protocol,
                    max(lengths),
                    options[task.name],
                    progress=reporter.progress,
                    precision=precision,
                )
                head = {"run": run, "label": label, "variant": v}
                records += _evaluate_task(results, task, ctx, head, todo, req, prov, reporter.record, shared=measured)
    finally:
        o.model.pe = base_pe
    return records


def eval_lengths(cfg, lengths: Optional[list]) -> list[int]:
    """The lengths an evaluation measures, in tokens: those asked for (``Kx`` at this run's context), else the
    config's multiples of its context."""
    from ..util.parsing import resolve_lengths

    return resolve_lengths(lengths, cfg.model.context) or [
        int(round(m * cfg.model.context)) for m in cfg.eval.multiples
    ]


def _share(lengths: list[int], only: Optional[list]) -> list[int]:
    """The lengths this call measures: ``only`` of ``lengths`` (the whole list still sets every length-dependent
    choice, such as the fixed protocol's target positions, so a share measures what the whole would)."""
    if only is None:
        return lengths
    if missing := sorted(set(only) - set(lengths)):
        raise UsageError(f"lengths {missing} are not among the evaluation's lengths {lengths}")
    return [L for L in lengths if L in only]


def _evaluate_task(
    results,
    task: Task,
    ctx: EvalContext,
    head: dict,
    lengths: list[int],
    req: EvalRequest,
    prov: dict,
    on_record,
    before=None,
    shared: Optional[dict] = None,
) -> list[dict]:
    """One task at every length: a record each (reused where ``req.skip_existing`` and already measured; a half
    measured one from its journal). ``before(L)``, if given, runs before a length is measured (an outside model's
    scaling follows the length). ``shared`` (one dict per run and request) holds what was measured under each scheme
    signature (``PositionalEncoding.signature``): a variant that computes the same function as one already measured
    at a length copies that measurement (every task forwards rows of exactly L tokens), its provenance naming the
    label measured (``measured_as``)."""
    cfg, pe, T = ctx.cfg, ctx.model.pe, ctx.cfg.model.context
    prot, params = _protocol(task, ctx, req)
    out, prepared = [], False
    for L in lengths:
        t0 = time.time()
        rec = {
            "schema": SCHEMA_VERSION,
            "task": task.name,
            "task_version": task.version,
            **head,
            "scheme": cfg.model.pe,
            "seed": cfg.train.seed,
            "protocol": prot,
            "protocol_params": params,
            "length": int(L),
            "train_context": T,
            "multiple": L / T,
            "created": now(),
            "split": req.split,
        }
        if req.skip_existing and (old := _existing(results, rec, task)) is not None:
            out.append(old)
            continue
        if before is not None:
            before(L)
        state = pe.describe(L)
        if state:
            rec["pe_state"] = state
        ctx.title = f"{head['run']} {head['label']} {task.name} L={L} {protocol_key(rec)}"
        sig = pe.signature(L) if shared is not None else None
        key = None if sig is None else (task.name, int(L), sig)
        if key is not None and key in shared:  # the same function measured under another label: copied
            value, source = shared[key]
            rec.update(copy.deepcopy(value))
            rec["provenance"] = {**prov, "wall_s": 0.0, "measured_as": source}
        else:
            if not prepared:
                task.prepare(ctx)
                prepared = True
            ctx.journal = _journal(results, rec, prov, req)
            value = _measure(task, ctx, L)
            if value["status"] == "ok":
                value["chance"] = task.chances(ctx.options, ctx.vocab, value["metrics"])
            rec.update(value)
            rec["provenance"] = {**prov, **_timing(time.time() - t0, ctx.journal), "peak_rss_mb": peak_rss_mb()}
            if key is not None:
                shared[key] = (copy.deepcopy(value), head["label"])
        task.check_record(rec)
        _require_finite(rec, f"{head['run']}: {task.name} at {int(L)} tokens")
        _write(results, rec, ctx)
        out.append(rec)
        if on_record:
            on_record(rec)
    return out


def _write(results: ResultsDir, rec: dict, ctx: EvalContext) -> None:
    """Write the record; the journal of its measurement, if any, goes (the record holds it all now)."""
    results.write_record(rec)
    if ctx.journal is not None:
        ctx.journal.path.unlink(missing_ok=True)
        ctx.journal = None


def _timing(segment_s: float, journal: Optional[Journal]) -> dict:
    """A measured cell's time: ``wall_s``, the seconds of the whole measurement; for a cell resumed from its journal
    (``--resume``) also ``resumed`` (the windows the journal held, the seconds spent on them, this process's own),
    where ``wall_s`` adds the journal's seconds to this process's, or is this process's alone when the journal did
    not keep its time (then ``seconds_before`` is None and no tokens per second can be read from the record)."""
    done = None if journal is None else journal.resumed()
    if done is None:
        return {"wall_s": round(segment_s, 3)}
    before = done["seconds_before"]
    total = segment_s if before is None else before + segment_s
    return {"wall_s": round(total, 3), "resumed": {**done, "segment_s": round(segment_s, 3)}}


def _journal(results: ResultsDir, rec: dict, prov: dict, req: EvalRequest) -> Journal:
    """The journal of the cell ``rec`` is about to hold (``scoring.Journal``): beside its record, keyed by the
    record's identity and the model's hash; read only under ``--resume``."""
    path = results.record_path(rec)
    keys = ("run", "label", "task", "task_version", "protocol", "protocol_params", "length", "split")
    key = {k: rec.get(k) for k in keys}
    ids = ("checkpoint_sha256", "gguf_sha256", "model", "revision", "dtype", "eval_precision", "stream")
    key["model"] = {k: prov[k] for k in ids if k in prov}  # a run's checkpoint, an outside model's file, its passes
    return Journal(path.with_name(path.name + ".journal"), key, req.skip_existing)


def _protocol(task: Task, ctx: EvalContext, req: EvalRequest) -> tuple[str, dict]:
    """The task's protocol and the settings that key its records, the stream's cap among them (``stream_cap``) where
    the cap reaches what the task reads (``Task.reads_stream``, or every task where the split is the capped stream:
    ``EvalContext.split_capped``): a cap that cannot change a measurement does not split its records."""
    prot, params = task.protocol(ctx.options, req.protocol)
    reached = task.reads_stream or ctx.split_capped
    if reached and (cap := stream_cap(req.max_tokens)) is not None:
        params = {**params, "max_tokens": cap}  # another stream: another measurement, never the default's
    return prot, params


def stream_cap(asked: Optional[int]) -> Optional[int]:
    """The evaluation stream's cap as a record's key: ``--max-tokens`` when one was given (None otherwise: the
    config's own ``eval.max_tokens``), so a record measured on another stream never takes the place of the default's,
    the same cap given to a run and to an outside model keys both alike, and a report never shows two streams in one
    row (the protocol says ``-mN``). It keys the tasks whose measurement it reaches (``_protocol``)."""
    return None if asked is None else int(asked)


def _require_finite(rec: dict, what: str) -> None:
    """A measured record whose metric is NaN or infinite is an error of the evaluation, never a record (a metric a
    record cannot have is None, not NaN)."""
    if rec.get("status") != "ok":
        return
    for name, v in (rec.get("metrics") or {}).items():
        if isinstance(v, float) and not math.isfinite(v):
            raise PebenchError(
                f"{what} gave {name} = {v}, not a finite number (damaged weights, or an overflow in the evaluation's "
                "precision); no record was written"
            )


def _check_outside(o, tasks: list, scalings: list, lengths: list[int]) -> None:
    """What an outside model can be evaluated with: tasks that take any tokenizer, scalings of a RoPE model only,
    lengths its positions reach."""
    from .hf import require_rope

    if bad := [t.name for t in tasks if not t.any_tokenizer]:
        ok = ", ".join(t for t in task_names() if TASKS.get(t).any_tokenizer)
        raise UsageError(
            f"--hf: {', '.join(bad)} builds byte prompts for pebench's byte-level models; with --hf the tasks are {ok}"
        )
    if scalings:
        require_rope(o)
    if (limit := o.model.pe.max_positions()) is not None and (far := [L for L in lengths if L > limit]):
        raise UsageError(f"{o.name} has learned absolute positions 0..{limit - 1}; it cannot position lengths {far}")


def _outside_precision(dev, requested: str) -> str:
    """An outside model's autocast: auto is bf16 on CUDA only; on a CPU the model runs in its --dtype (bf16 there is
    asked for by --dtype bfloat16)."""
    return eval_precision(dev, "fp32" if requested == "auto" and dev.type == "cpu" else requested)


OUTSIDE_SPLITS = EVAL_SPLITS + ("train",)  # an outside model never trained on any of them


def _outside_stream(o, corpus, req: EvalRequest, cfg):
    """The evaluation split in the outside model's tokens, cut to ``--max-tokens`` (refused beyond the split's bytes:
    a tokenizer's tokens are never more than its bytes) or the config's cap; and the bytes it covers. The train
    split too: text pebench's own models trained on and an outside model did not, long enough for several windows at
    4x a real model's context where the validation split holds less than one."""
    from .hf import tokenize_split

    if req.split not in OUTSIDE_SPLITS:
        raise UsageError(unknown_name_message("split", req.split, list(OUTSIDE_SPLITS)))

    check_cap(req.max_tokens, len(corpus.tokens(req.split)), f"the {req.split} split of {corpus.spec!r} in bytes")
    return tokenize_split(o.tokenizer, corpus.tokens(req.split), req.max_tokens or cfg.eval.max_tokens)


def _outside_provenance(o, req: EvalRequest, corpus, ids, nbytes, dev) -> dict:
    """What every record of an outside model says of where and how it ran (the model's own provenance included)."""
    return {
        **environment(str(dev)),
        **o.provenance,
        "eval_precision": _outside_precision(dev, req.eval_precision),
        "params": sum(p.numel() for p in o.model.parameters()),
        "corpus": corpus.spec,
        "corpus_fingerprint": corpus.fingerprint,
        "tokens_evaluated": int(len(ids)),
        "bytes_evaluated": int(nbytes.sum()),
        "stream": o.model.stream,  # tokens per pass through the KV cache (None: one pass)
        "cpu": cpu_name(),  # the machine: bf16 kernels round in their own way on each CPU, so answers can flip
    }


def evaluate_outside(
    results: ResultsDir,
    o,
    scalings: list,
    lengths: list[int],
    req: EvalRequest,
    data: str = "sotu",
    reporter: Optional[Reporter] = None,
) -> list[dict]:
    """Evaluate an outside model (hf.Outside) as it is and with each scaling (hf.Scaling), at each length, on
    ``data``'s evaluation split tokenized by its own tokenizer; the records are those of a run named hf-NAME."""
    from .hf import apply_scaling, eval_config

    reporter = reporter or Reporter.quiet()
    req.protocol.validate()
    tasks, options = req.resolved_tasks()
    _check_outside(o, tasks, scalings, lengths)
    corpus = prepare_corpus(data, results.cache, "text")  # a local or hf: corpus is read from its text column
    cfg = eval_config(o, batch_tokens=16384)
    ids, nbytes = _outside_stream(o, corpus, req, cfg)
    for task in tasks:
        task.check(options[task.name], lengths, o.context, len(ids), req.protocol)
    dev = next(o.model.parameters()).device
    if req.stream is not None:
        o.model.stream = req.stream or None  # 0: each window in one pass
    prov = _outside_provenance(o, req, corpus, ids, nbytes, dev)
    run, records = "hf-" + "".join(c if c.isalnum() or c in "-_." else "-" for c in o.name), []
    for s in [None] + list(scalings):
        head = {
            "run": run,
            "label": f"{o.name} (hf)" + ("" if s is None else f"+{s.label}"),
            "variant": "none" if s is None else s.label,
        }
        for task in tasks:
            ctx = EvalContext(
                o.model,
                cfg,
                dev,
                ids,
                ids,
                req.protocol,
                max(lengths),
                options[task.name],
                progress=reporter.progress,
                tokenizer=o.tokenizer,
                token_bytes=nbytes,
                split_capped=True,
                precision=prov["eval_precision"],
            )
            # per length: the factor follows it, and no cached frequencies carry over from the last
            records += _evaluate_task(
                results,
                task,
                ctx,
                head,
                lengths,
                req,
                prov,
                reporter.record,
                before=lambda L, s=s: apply_scaling(o, s, L),
            )
    return records
