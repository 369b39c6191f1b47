"""Evaluation: windows over the validation stream, per-token loss, per-position buckets, records.

Convention: a window is L consecutive tokens fed to the model at once; the logit at window index p-1
predicts the token at index p, which therefore has p tokens of context (p = 1 .. L-1).

Protocols (each averages per-token losses over all scored tokens, never window means):
- ``nonoverlap``: windows start every L-1 tokens (sharing one boundary token), every index scored, so
  each stream token after the first is scored exactly once (the ALiBi paper's protocol); a last window
  flush with the end of the stream scores only the leftover tail, so every length scores the same tokens.
- ``sliding``: windows start every S tokens; the first scores every index, later ones only their last S,
  so every later token has at least L-S tokens of context.
- ``fixed``: the same K target tokens at every length, each the last token of its own window, i.e. with
  exactly L-1 tokens of context; lengths then differ only in context.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Iterable, Optional

import numpy as np
import torch
import torch.nn.functional as F

from .data import prepare_corpus
from .errors import PebenchError, PositionOutOfRange, UsageError
from .model import DecoderLM
from .progress import Progress
from .results import EVAL_SPLITS, SCHEMA_VERSION, ResultsDir, environment, now, protocol_key
from .train import CHECKPOINT, autocast_for, build_model, check_compatible, load_checkpoint, resolve_device

PROTOCOLS = ("nonoverlap", "sliding", "fixed")


@dataclass(frozen=True)
class Protocol:
    name: str = "nonoverlap"
    stride: Optional[int] = None
    targets: Optional[int] = None

    def validate(self) -> "Protocol":
        if self.name not in PROTOCOLS:
            from .registry import unknown_name_message

            raise UsageError(unknown_name_message("protocol", self.name, list(PROTOCOLS)))
        if self.name == "sliding" and (self.stride is None or self.stride < 1):
            raise UsageError("--protocol sliding needs --stride S with S >= 1")
        if self.name == "fixed" and (self.targets is None or self.targets < 1):
            raise UsageError("--protocol fixed needs --targets K with K >= 1")
        return self

    def params(self) -> dict:
        return {"stride": self.stride} if self.name == "sliding" else \
            {"targets": self.targets} if self.name == "fixed" else {}


def windows(n_tokens: int, length: int, protocol: Protocol, max_length: Optional[int] = None):
    """(starts, first_scored_index) for windows of ``length`` over a stream of ``n_tokens`` tokens.

    Targets of a window starting at a are stream tokens a+p for p in [first, length-1].
    """
    L = length
    if L < 2:
        raise UsageError(f"evaluation length must be >= 2, got {L}")
    if L > n_tokens:
        raise UsageError(f"evaluation length {L} is longer than the evaluation stream ({n_tokens} tokens)")
    if protocol.name == "nonoverlap":
        starts = np.arange(0, n_tokens - L + 1, L - 1)
        first = np.ones(len(starts), dtype=np.int64)
        covered = starts[-1] + L - 1  # last stream index scored so far
        if covered < n_tokens - 1:  # one more window, flush with the end, scores only the uncovered tail
            starts = np.append(starts, n_tokens - L)
            first = np.append(first, covered + 1 - (n_tokens - L))
    elif protocol.name == "sliding":
        S = protocol.stride
        if S > L - 1:
            raise UsageError(f"--stride {S} must be at most length - 1 = {L - 1}")
        starts = np.arange(0, n_tokens - L + 1, S)
        first = np.full(len(starts), L - S, dtype=np.int64)
        first[0] = 1
    else:
        Lmax = max(max_length or L, L)
        targets = fixed_targets(n_tokens, Lmax, protocol.targets)
        starts = targets - (L - 1)
        first = np.full(len(starts), L - 1, dtype=np.int64)
    return starts, first


def fixed_targets(n_tokens: int, max_length: int, k: int) -> np.ndarray:
    """K target positions, evenly spread over the stream, each with room for max_length-1 tokens before it."""
    lo, hi = max_length - 1, n_tokens - 1
    if hi - lo + 1 < k:
        raise UsageError(f"the stream ({n_tokens} tokens) has room for only {max(0, hi - lo + 1)} fixed targets "
                         f"at length {max_length}; lower --targets or the lengths")
    return lo + (np.arange(k) * (hi - lo + 1)) // k


def bucket_edges(length: int) -> list[int]:
    """Log-spaced context-length buckets [1,2), [2,4), ... covering 1 .. length-1."""
    edges = [1]
    while edges[-1] < length:
        edges.append(edges[-1] * 2)
    return edges


def score_stream(model: DecoderLM, stream: np.ndarray, length: int, protocol: Protocol,
                 batch_tokens: int, device: torch.device, max_length: Optional[int] = None,
                 progress: Optional[Progress] = None, title: str = "", far: Optional[np.ndarray] = None) -> dict:
    """Run every window and return loss sums in total and per position bucket (and, given ``far``, a boolean mask
    over stream indices, the mean loss over the scored tokens it marks). ``progress`` hears the cost
    (windows x length token positions) first, then the positions done after every batch."""
    starts, first = windows(len(stream), length, protocol, max_length)
    if progress is not None:
        progress.start(title, len(starts) * length, f"{len(starts):,} windows of {length:,} tokens "
                       f"({len(starts) * length:,} token positions)", "tokens")
    edges = bucket_edges(length)
    pos = np.arange(1, length)
    bucket_of = np.searchsorted(edges, pos, side="right") - 1  # bucket of each target index
    n_b = len(edges) - 1
    loss_sum = torch.zeros(n_b, dtype=torch.float64)
    count = torch.zeros(n_b, dtype=torch.float64)
    bucket_t = torch.from_numpy(bucket_of).to(device)
    far_sum, far_n = 0.0, 0
    per_batch = max(1, batch_tokens // length)
    offsets = np.arange(length)
    with torch.inference_mode():
        for i in range(0, len(starts), per_batch):
            s, f = starts[i:i + per_batch], first[i:i + per_batch]
            chunk = torch.from_numpy(np.asarray(stream[s[:, None] + offsets[None, :]]).astype(np.int64)).to(device)
            with autocast_for(device):
                logits = model(chunk)
            tok_loss = F.cross_entropy(logits[:, :-1].float().reshape(-1, logits.shape[-1]),
                                       chunk[:, 1:].reshape(-1), reduction="none").view(len(s), length - 1)
            mask = torch.from_numpy(pos[None, :] >= f[:, None]).to(device)
            tok_loss = (tok_loss * mask).double()
            if far is not None:
                fm = torch.from_numpy(far[s[:, None] + offsets[None, 1:]]).to(device) & mask
                far_sum += float(tok_loss[fm].sum())
                far_n += int(fm.sum())
            loss_sum += torch.zeros(n_b, dtype=torch.float64, device=device).index_add_(
                0, bucket_t, tok_loss.sum(0)).cpu()
            count += torch.zeros(n_b, dtype=torch.float64, device=device).index_add_(
                0, bucket_t, mask.sum(0).double()).cpu()
            if progress is not None:
                progress.update((i + len(s)) * length)
    if progress is not None:
        progress.finish()
    total, n = float(loss_sum.sum()), int(count.sum())
    buckets = [
        {"lo": edges[b], "hi": min(edges[b + 1], length) - 1, "tokens": int(count[b]),
         "loss": float(loss_sum[b] / count[b]) if count[b] else None}
        for b in range(n_b)
    ]
    out = {"loss": total / n, "tokens_scored": n, "windows": len(starts), "position_buckets": buckets}
    if far is not None:
        out["far"] = {"loss": far_sum / far_n if far_n else None, "tokens": far_n}
    return out


def score_spans(ctx: "EvalContext", rows: np.ndarray, start: int, stop: int,
                choices: Optional[np.ndarray] = None) -> tuple[np.ndarray, np.ndarray]:
    """Teacher-forced scoring of target indices [start, stop) of each row (windows of equal length): whether the
    model's top prediction is the target (among ``choices`` only, when given) and the loss, both (rows, stop -
    start) numpy arrays."""
    L = rows.shape[1]
    per = max(1, ctx.cfg.eval.batch_tokens // L)
    correct, losses = [], []
    if ctx.progress is not None:
        ctx.progress.start(ctx.title, len(rows) * L, f"{len(rows):,} prompts of {L:,} tokens", "tokens")
    with torch.inference_mode():
        for i in range(0, len(rows), per):
            x = torch.from_numpy(rows[i:i + per].astype(np.int64)).to(ctx.dev)
            with autocast_for(ctx.dev):
                logits = ctx.model(x)[:, start - 1:stop - 1].float()
            tgt = x[:, start:stop]
            losses.append(F.cross_entropy(logits.transpose(1, 2), tgt, reduction="none").cpu().numpy())
            if choices is not None:
                ch = torch.from_numpy(choices.astype(np.int64)).to(ctx.dev)
                pred = ch[logits[..., ch].argmax(-1)]
            else:
                pred = logits.argmax(-1)
            correct.append((pred == tgt).cpu().numpy())
            if ctx.progress is not None:
                ctx.progress.update((i + len(x)) * L)
    if ctx.progress is not None:
        ctx.progress.finish()
    return np.concatenate(correct), np.concatenate(losses)


def load_run_model(results: ResultsDir, run: str, device: torch.device):
    cfg, meta = results.run_config(run)
    state = results.status(run)
    if state.get("state") != "finished":
        raise PebenchError(f"run {run!r} is not finished (state: {state.get('state')}); train or resume it first")
    ckpt = load_checkpoint(results.run_dir(run) / CHECKPOINT)
    check_compatible(ckpt["config"], cfg, results.run_dir(run) / CHECKPOINT)
    model = build_model(cfg)
    try:
        model.load_state_dict(ckpt["model"])
    except RuntimeError as e:
        raise PebenchError(f"checkpoint of run {run!r} does not fit its config: {str(e).splitlines()[0][:200]}")
    return cfg, meta, model.to(device).eval()


def parse_scalings(spec: Optional[str]) -> list[str]:
    """Evaluation-time variant names (RoPE's scalings today), checked against every scheme's list; ``all``
    means each run's own full list."""
    from .pe import all_variants
    from .registry import unknown_name_message

    if not spec:
        return []
    names = [s.strip() for s in spec.split(",") if s.strip()]
    if not names:
        raise UsageError("--rope-scaling is empty; give names like none,yarn (or all)")
    if names == ["all"]:
        return names
    known = all_variants()
    for n in names:
        if n not in known:
            raise UsageError(unknown_name_message("RoPE scaling", n, known + ["all"]))
    if len(set(names)) != len(names):
        raise UsageError(f"--rope-scaling lists a name twice: {spec}")
    return names


def variant_label(cfg, pe, meta: dict, logit_scale: Optional[str] = None) -> tuple[str, str]:
    """(variant, row label): 'rope+yarn', with ' ftN' for a fine-tuned run, ' from-S' for a run continued from a
    scheme S (DroPE) and ' rpM' for one trained on random positions; an evaluation-time logit scale joins the
    variant ('none+drope', 'rope+yarn+logn')."""
    v = getattr(pe, "variant", "default")
    v = "none" if v == "default" else v
    if logit_scale and logit_scale not in ("none", cfg.model.logit_scale):
        v = logit_scale if v == "none" else f"{v}+{logit_scale}"
    label = cfg.model.pe + ("" if v == "none" else f"+{v}")
    if cfg.train.random_positions:
        label += f" rp{cfg.train.random_positions}"  # trained on random positions from [0, M)
    if meta.get("recalibration"):
        return v, label + f" from-{meta['recalibration']['from_scheme']}"
    return v, label + (f" ft{cfg.model.context}" if meta.get("parent") else "")


@dataclass
class EvalContext:
    """What a task measures with: the model (with its scheme or variant), its config, the evaluation stream (the
    split cut to max_tokens) and the whole split, the protocol, this task's options and the progress display."""

    model: DecoderLM
    cfg: object
    dev: torch.device
    stream: np.ndarray
    split_tokens: np.ndarray
    protocol: Protocol
    max_length: int
    options: dict
    seed: int = 0  # evaluation stream seed (prompt keys, strings, offsets)
    progress: Optional[Progress] = None
    title: str = ""
    state: dict = field(default_factory=dict)  # what a task's prepare() keeps for its measure()


def _measure(task, ctx: EvalContext, L: int) -> dict:
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
        raise PebenchError(f"out of device memory evaluating {ctx.title}; lower eval.batch_tokens or the length")


def _open_run(results: ResultsDir, run: str, dev, backend: str, logit_scale: Optional[str], split: str,
              max_tokens: Optional[int]):
    """(cfg, meta, model, corpus, split tokens, stream) of a finished run, the model set up for evaluation."""
    if split not in EVAL_SPLITS:
        from .registry import unknown_name_message

        raise UsageError(unknown_name_message("split", split, list(EVAL_SPLITS)))
    cfg, meta, model = load_run_model(results, run, dev)
    model.set_attention_backend(backend)
    if logit_scale is not None:
        from .config import LOGIT_SCALES

        if logit_scale not in LOGIT_SCALES:
            raise UsageError(f"--logit-scale must be one of {', '.join(LOGIT_SCALES)}, got {logit_scale!r}")
        model.logit_scale = logit_scale
    corpus = prepare_corpus(cfg.train.data, results.cache, cfg.train.text_field)
    tokens = corpus.tokens(split)
    if len(tokens) < 2:
        raise PebenchError(f"corpus {corpus.spec!r} has no {split} documents to evaluate on")
    stream = tokens[:min(len(tokens), max_tokens or cfg.eval.max_tokens)]
    return cfg, meta, model, corpus, tokens, stream


def evaluate_run(results: ResultsDir, run: str, lengths: Optional[list[int]] = None,
                 protocol: Protocol = Protocol(), scalings: Iterable[str] = (), rope_factor: Optional[float] = None,
                 max_tokens: Optional[int] = None, device: str = "auto", backend: str = "auto",
                 on_record=None, skip_existing: bool = False, progress: Optional[Progress] = None,
                 split: str = "validation", logit_scale: Optional[str] = None, tasks: Optional[list] = None,
                 options: Optional[dict] = None) -> list[dict]:
    """Evaluate one finished run with each task (default ``ppl``) at each length (and RoPE scaling, and
    evaluation-time logit scale) on the validation or test split; write and return the records. ``options``:
    task name -> its options (``tasks.task_options``)."""
    from .tasks import resolve_tasks, task_options

    protocol.validate()
    tasks = tasks or resolve_tasks("ppl")
    options = options or task_options(tasks, {})
    dev = resolve_device(device)
    cfg, meta, model, corpus, tokens, stream = _open_run(results, run, dev, backend, logit_scale, split, max_tokens)
    T = cfg.model.context
    lengths = lengths or [int(round(m * T)) for m in cfg.eval.multiples]
    for task in tasks:  # check every setting before computing anything
        task.check(options[task.name], lengths, T, len(stream), protocol)
    scalings = list(scalings)
    if scalings == ["all"]:
        scalings = model.pe.variants()
    if scalings and not model.pe.variants():
        raise PebenchError(f"run {run!r} uses {cfg.model.pe!r}: RoPE scaling applies to rope runs only")
    prov = {**environment(str(dev)), "seed": cfg.train.seed, "steps": cfg.train.steps,
            "params": model.num_params(), "corpus": corpus.spec, "corpus_fingerprint": corpus.fingerprint,
            "config_hash": cfg.hash(), "config_name": cfg.name, "parent": meta.get("parent")}
    records = []
    base_pe = model.pe
    for variant in scalings or [None]:
        model.pe = pe = base_pe if variant is None else base_pe.with_variant(variant, rope_factor)
        v, label = variant_label(cfg, pe, meta, logit_scale)
        if variant is not None and (cfg.model.pe_options.get(cfg.model.pe) or {}).get("scaling"):
            label += f" eval-{variant}"  # a scaling applied over the one baked in: never the baked run's label
        for task in tasks:
            ctx = EvalContext(model, cfg, dev, stream, tokens, protocol, max(lengths), options[task.name],
                              progress=progress)
            prot, params = task.protocol(ctx.options, protocol)
            prepared = False
            for L in lengths:
                t0 = time.time()
                rec = {"schema": SCHEMA_VERSION, "task": task.name, "run": run, "scheme": cfg.model.pe,
                       "variant": v, "label": label, "seed": cfg.train.seed, "protocol": prot,
                       "protocol_params": params, "length": int(L), "train_context": T, "multiple": L / T,
                       "created": now(), "split": split}
                if skip_existing and results.record_path(rec).exists():
                    records.append(json.loads(results.record_path(rec).read_text()))
                    continue
                if hasattr(pe, "resolved"):
                    inv, att, factor = pe.resolved(L)
                    rec["rope"] = {"variant": v, "factor": factor, "attention_factor": att}
                if not prepared:
                    task.prepare(ctx)
                    prepared = True
                ctx.title = f"{run} {label} {task.name} L={L} {protocol_key(rec)}"
                rec.update(_measure(task, ctx, L))
                rec["provenance"] = {**prov, "wall_s": round(time.time() - t0, 3)}
                results.write_record(rec)
                records.append(rec)
                if on_record:
                    on_record(rec)
    model.pe = base_pe
    return records


def parse_lengths(spec: Optional[str]) -> Optional[list[int]]:
    if spec is None:
        return None
    parts = [p.strip() for p in spec.split(",")]
    if not spec.strip() or any(not p for p in parts):
        raise UsageError(f"--lengths must be a comma-separated list of positive integers, got {spec!r}")
    try:
        values = [int(p) for p in parts]
    except ValueError:
        raise UsageError(f"--lengths must be integers, got {spec!r}")
    if any(v < 2 for v in values):
        raise UsageError(f"--lengths must be >= 2 each, got {spec!r}")
    if len(set(values)) != len(values):
        raise UsageError(f"--lengths has duplicates: {spec!r}")
    return values
