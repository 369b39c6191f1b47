"""Training: AdamW, warmup + cosine, gradient clipping, atomic checkpoints, exact resume."""

from __future__ import annotations

import contextlib
import json
import math
import shutil
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional

import torch
import yaml

from .config import Config
from .data import prepare_corpus, sample_batch
from .eval.scoring import Protocol, score_stream
from .model.checkpoint import CHECKPOINT, build_model, check_compatible, load_checkpoint, load_shared_weights
from .model.decoder import DecoderLM, float_positions
from .model.device import resolve_device, train_autocast, train_precision, tune_cpu_allocator
from .results import ResultsDir, environment, now
from .util.errors import PebenchError, TrainingDiverged, UsageError
from .util.fsutil import RunLock, WriteFailed, append_line, atomic_save, atomic_write_text

if TYPE_CHECKING:
    import numpy as np
    from torch.distributed import ProcessGroup

    from .data.dataset import PreparedCorpus


# What a stopped run says: `train` continues it with --resume; `run` and `tune` continue what they find by themselves.
RESUME_HINT = "rerun to continue (pebench train with --resume; run and tune resume by themselves)"


def lr_at(step: int, cfg) -> float:
    """Linear warmup to lr, then cosine decay to min_lr_ratio * lr at the last step. With an induction warm-up
    (``induction_steps``) the warm-up holds lr after its warmup (a decaying rate delays the phase change it waits
    for) and the language-model phase after it has its own warmup and decay."""
    first = cfg.induction_steps
    warming_up = step < first
    if not warming_up:  # the language-model phase counts its own steps
        step, steps = step - first, cfg.steps - first
    if cfg.warmup and step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    if warming_up:
        return cfg.lr
    span = max(1, steps - cfg.warmup)
    progress = min(1.0, (step - cfg.warmup) / span)
    return cfg.lr * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


def needle_settings(tc, step: int) -> tuple:
    """(fraction, lengths, kinds) of the retrieval documents at ``step``: every window during the induction warm-up
    (``induction_kinds``, ``pairs`` by default), then the config's needles."""
    if step < tc.induction_steps:
        return 1.0, tc.induction_lengths, tc.induction_kinds
    return tc.needles, tc.needle_lengths, tc.needle_kinds or None


def decays(model: torch.nn.Module, name: str, param: torch.nn.Parameter) -> bool:
    """Weight decay on matrices, not on norms and biases; the scheme decides for its own parameters."""
    pe = getattr(model, "pe", None)
    if name.startswith("pe.") and pe is not None:
        return pe.decayed(name[3:], param)
    return param.dim() >= 2


def make_optimizer(model: torch.nn.Module, cfg, device: torch.device) -> torch.optim.Optimizer:
    named = list(model.named_parameters())
    decay = [p for n, p in named if decays(model, n, p)]
    no_decay = [p for n, p in named if not decays(model, n, p)]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    # The fused kernel on both devices, the faster on the CPU too (results/speed/levers-bf16.md, the AdamW rows); the
    # same update up to rounding (tests/test_train.py, the optimizer test).
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), fused=device.type in ("cpu", "cuda"))


def _truncate_metrics(path: Path, step: int) -> None:
    """After a resume from ``step``, drop log lines of steps that will be trained again."""
    if not path.exists():
        return
    keep = []
    for line in path.read_text().splitlines():
        try:
            if json.loads(line)["step"] <= step:
                keep.append(line)
        except (ValueError, KeyError):
            continue  # a line cut short by a kill
    atomic_write_text(path, "".join(x + "\n" for x in keep))


@dataclass
class TrainResult:
    name: str
    folder: Path
    steps: int
    final_loss: float
    wall_s: float
    skipped: bool = False


def _rng_state(device: torch.device) -> dict:
    state = {"torch": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


@dataclass(frozen=True)
class TrainJob:
    """One run to train, the one object ``train`` takes: its config and name, the results folder, how it starts
    (``resume``, ``overwrite``, a parent run to initialise from and the metadata it leaves), where it runs (the
    device; under torchrun its rank, the world size and the process group), and who is told: ``progress(step,
    steps, loss, tokens_per_s)`` after each step, ``on_ready()`` once every check has passed, just before the work
    starts (the CLI's notes on the settings go there: after a refusal they would be noise, after the training too
    late)."""

    cfg: Config
    results: ResultsDir
    name: str
    device: str = "auto"
    resume: bool = False
    overwrite: bool = False
    init_from: Optional[str] = None
    parent_meta: Optional[dict] = None
    progress: Optional[Callable[[int, int, float, float], None]] = None
    rank: int = 0
    world: int = 1
    process_group: Optional[ProcessGroup] = None
    on_ready: Optional[Callable[[], None]] = None


def train(job: TrainJob) -> TrainResult:
    """Train one run into ``results/runs/name``. Resumable; refuses to clobber finished runs."""
    cfg, results, name, resume, overwrite = job.cfg, job.results, job.name, job.resume, job.overwrite
    dev = resolve_device(job.device)
    tune_cpu_allocator()  # library callers too (the CLI has already done it)
    tc = cfg.train
    folder = results.run_dir(name)
    is_main = job.rank == 0
    lock = RunLock(folder / ".lock") if is_main else None
    if is_main:
        results.ensure_writable()
    # Read (or build) the corpus first: a bad corpus spec must not leave an empty run folder behind.
    corpus = prepare_corpus(tc.data, results.cache, tc.text_field)
    if is_main:
        state = results.state(name)
        if state == "finished" and not overwrite:
            if resume:
                _check_same_config(results, name, cfg)
                return TrainResult(name, folder, tc.steps, float("nan"), 0.0, skipped=True)
            raise UsageError(f"run {name!r} is already finished; pass --overwrite to train it again")
        if state in ("running", "failed", "interrupted") and not (resume or overwrite):
            raise UsageError(f"run {name!r} exists ({state}); pass --resume to continue it or --overwrite")
        if state in ("running", "failed", "interrupted") and resume and (folder / "config.yaml").exists():
            _check_same_config(results, name, cfg, state)
        lock.acquire()
    try:
        if is_main and overwrite and folder.exists():
            for p in folder.iterdir():
                if p.name != ".lock":
                    shutil.rmtree(p) if p.is_dir() else p.unlink()
            shutil.rmtree(results.records / name, ignore_errors=True)  # stale measurements of the old run
        if job.world > 1:
            torch.distributed.barrier(job.process_group)
        if job.on_ready is not None and is_main:
            job.on_ready()
        return _train_locked(job, dev, corpus)
    finally:
        if lock is not None:
            lock.release()


class TrainingInterrupted(PebenchError):
    """SIGINT, SIGTERM or SIGUSR2 stopped training after a step; the checkpoint of that step is saved."""

    exit_code = 130

    def __init__(self, message: str, signal_name: Optional[str] = None):
        super().__init__(message)
        self.signal = signal_name  # the signal that stopped it (SIGUSR2: a scheduler's preemption notice)


class StopRequest:
    """Turns SIGINT, SIGTERM and SIGUSR2 (Ctrl-C, cluster preemption, Slurm's notice before a time limit as
    submitit asks for it) into a request that the training loop honours
    after the current step. A second SIGINT interrupts at once (KeyboardInterrupt). Handlers can only be
    installed from the main thread; elsewhere signals keep their default behaviour."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM) + ((signal.SIGUSR2,) if hasattr(signal, "SIGUSR2") else ())

    def __init__(self):
        self.signal: Optional[str] = None
        self._saved: dict = {}

    def _handle(self, signum, frame):
        if self.signal is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.signal = signal.Signals(signum).name

    def __enter__(self) -> "StopRequest":
        if threading.current_thread() is threading.main_thread():
            self._saved = {s: signal.signal(s, self._handle) for s in self.SIGNALS}
        return self

    def __exit__(self, exc_type, *exc) -> None:
        for s, handler in self._saved.items():
            signal.signal(s, handler)
        if exc_type is None and self.signal and self._saved:
            # it came during the last step, after the loop's last look: hand it on, not lose it (a scheduler's
            # notice then still requeues the task before its time limit; a Ctrl-C still stops what follows)
            signal.raise_signal(signal.Signals[self.signal])


@dataclass
class _Start:
    """Where a training segment starts: the model and optimizer, the first step, and the training wall seconds
    the run had spent before it (the checkpoint's ``wall_s``; 0 for a fresh run, None where a checkpoint from
    before that record does not say). ``precision`` is set by ``_prepare``."""

    model: DecoderLM
    opt: torch.optim.Optimizer
    step: int = 0
    prior_s: Optional[float] = 0.0
    precision: str = "fp32"


def _init_state(cfg: Config, dev: torch.device, ckpt_path: Path, resume: bool, init_from: Optional[Path]) -> _Start:
    """Model and optimizer, fresh, resumed from ``ckpt_path`` (bitwise: RNG and step too, and the training wall
    time spent so far) or initialised from a parent run's weights."""
    torch.manual_seed(cfg.train.seed)
    model = build_model(cfg).to(dev)
    opt = make_optimizer(model, cfg.train, dev)
    if resume and ckpt_path.exists():
        ckpt = load_checkpoint(ckpt_path)
        check_compatible(ckpt["config"], cfg, ckpt_path)
        model.load_state_dict(ckpt["model"])
        with torch.no_grad():
            model.pe.after_step()
        opt.load_state_dict(ckpt["optimizer"])
        torch.set_rng_state(ckpt["rng"]["torch"])
        if dev.type == "cuda" and "cuda" in ckpt["rng"]:
            torch.cuda.set_rng_state(ckpt["rng"]["cuda"], dev)
        prior = ckpt.get("wall_s")
        return _Start(model, opt, int(ckpt["step"]), None if prior is None else float(prior))
    if init_from is not None:
        load_shared_weights(model, load_checkpoint(init_from)["model"], init_from.parent.name)
    return _Start(model, opt)


def _check_same_config(results: ResultsDir, name: str, cfg: Config, state: str = "finished") -> None:
    """A run is reused or resumed only with the config it was trained with: never silently another model."""
    from .config import config_diff

    saved, _ = results.run_config(name)
    # The precision compares as used: auto accepts the run's, an explicit one must be the one it trained in.
    diff = [k for k in config_diff(saved, cfg) if k != "train.precision"]
    used = results.run_precision(name)
    if cfg.train.precision not in ("auto", used):
        diff.append(f"train.precision (trained in {used})")
    if diff:
        raise UsageError(
            f"run {name!r} is {state} but was trained with another config ({', '.join(diff[:3])} "
            f"differ); pass --overwrite to retrain it, or --name for a new run"
        )


def sample_positions(seed: int, step: int, T: int, M: int, device, continuous: bool = False) -> torch.Tensor:
    """Randomized positions (Ruoss et al. 2023): a sorted random subset of [0, M) of size T, fixed by
    (seed, step) and the same for every rank; ``continuous`` (Random Float Sampling): T sorted uniform floats from
    [0, M) instead (``model.decoder.float_positions`` draws evaluation's the same way)."""
    gen = torch.Generator().manual_seed(seed * 1_000_003 + step + 7)
    if continuous:
        return float_positions(gen, T, M).to(device)
    return torch.randperm(M, generator=gen)[:T].sort().values.to(device)


def curve_point(model: DecoderLM, cfg: Config, val_tokens, dev: torch.device) -> dict:
    """Perplexity at 1x and at the longest evaluation multiple on the first ``eval.curve_tokens`` validation
    tokens (non-overlapping windows): one point of the learning curve. Evaluation mode and no random numbers,
    so the training trajectory is untouched (tested bitwise)."""
    T = cfg.model.context
    stream = val_tokens[: min(len(val_tokens), cfg.eval.curve_tokens)]
    limit = model.pe.max_positions()
    out = {}
    model.eval()
    try:
        for L in sorted({T, int(round(max(cfg.eval.multiples) * T))}):
            if L > len(stream) or (limit is not None and L > limit):
                out[str(L)] = None  # the scheme cannot represent it, or the slice is too short
                continue
            r = score_stream(model, stream, L, Protocol(), cfg.eval.batch_tokens, dev)
            out[str(L)] = round(math.exp(r["loss"]), 5)
    finally:
        model.train()
    return out


def _prepare(job: TrainJob, dev, corpus):
    """Model, optimizer and first step of a run; on rank 0 its config.yaml and status written."""
    cfg, results, name, world = job.cfg, job.results, job.name, job.world
    resume, init_from, parent_meta, rank = job.resume, job.init_from, job.parent_meta, job.rank
    tc, folder = cfg.train, results.run_dir(name)
    if tc.batch_size % (world * tc.grad_accum):
        raise UsageError(
            f"train.batch_size {tc.batch_size} must be divisible by ranks x grad_accum ({world} x {tc.grad_accum})"
        )
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    parent_ckpt = results.run_dir(init_from) / CHECKPOINT if init_from is not None else None
    start = _init_state(cfg, dev, folder / CHECKPOINT, resume, parent_ckpt)
    model, start_step = start.model, start.step
    if resume:  # drop log lines past the checkpoint (all of them when there is none yet)
        _truncate_metrics(folder / "metrics.jsonl", start_step)
    precision = start.precision = _run_precision(results, name, dev, tc.precision, resume)
    if rank == 0:
        run_meta = {
            "name": name,
            "created": now(),
            "parent": init_from,
            **(parent_meta or {}),
            "corpus": corpus.spec,
            "corpus_fingerprint": corpus.fingerprint,
            "config_hash": cfg.hash(),
            "params": model.num_params(),
            "world_size": world,
            "precision": precision,
        }
        if not (folder / "config.yaml").exists() or not resume:
            atomic_write_text(
                folder / "config.yaml", yaml.safe_dump({**cfg.to_dict(), "run": run_meta}, sort_keys=False)
            )
        results.set_status(name, state="running", step=start_step, steps=tc.steps)
        results.log_training_segment(name, start_step, fresh=not resume or start_step == 0)
    return start


def _run_precision(results: ResultsDir, name: str, dev: torch.device, requested: str, resume: bool) -> str:
    """The precision a run trains in: a resumed run keeps the one it started in, wherever it resumes; a new run
    resolves ``train.precision`` on this device."""
    if resume and (results.run_dir(name) / "config.yaml").exists():
        return results.run_precision(name, dev.type)
    return train_precision(dev, requested)


@dataclass
class _Loop:
    """One run's training loop: each step's batch and update, and what it writes (log lines, learning-curve
    points, checkpoints, status)."""

    cfg: Config
    results: ResultsDir
    name: str
    dev: torch.device
    corpus: PreparedCorpus
    model: DecoderLM
    opt: torch.optim.Optimizer
    rank: int
    world: int
    pg: Optional[ProcessGroup]
    progress: Optional[Callable]
    train_tokens: np.ndarray = None
    saved: int = 0
    precision: str = "fp32"  # device.train_precision, resolved once per run
    prior_s: Optional[float] = 0.0  # training wall seconds before this segment (None: a checkpoint that did not say)
    t0: float = 0.0  # when this segment started
    window_t: float = 0.0
    last_tps: float = 0.0  # tokens/s of the last log window (the progress bar's speed between log lines)
    window_tokens: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def update(self, fwd, net, x, y, stop: StopRequest, positions: Optional[torch.Tensor]) -> tuple[float, bool]:
        """One optimizer step over ``grad_accum`` micro-batches. Returns the global mean loss and whether any rank
        was asked to stop (carried in the same all-reduce as the loss, so every rank stops at the same step)."""
        tc, dev, world = self.cfg.train, self.dev, self.world
        self.opt.zero_grad(set_to_none=True)
        total = torch.zeros((), device=dev)
        micro = x.shape[0] // tc.grad_accum
        for m in range(tc.grad_accum):
            last = m == tc.grad_accum - 1
            sync = contextlib.nullcontext() if (world == 1 or last) else net.no_sync()  # one all-reduce per step
            with sync, train_autocast(dev, self.precision):
                _, loss = fwd(x[m * micro : (m + 1) * micro], y[m * micro : (m + 1) * micro], positions)
                (loss / tc.grad_accum).backward()
            total += loss.detach() / tc.grad_accum
        stopping = stop.signal is not None
        if world > 1:  # the global mean loss, identical on every rank, and the stop flag of any rank
            stats = torch.stack([total, torch.tensor(float(stopping), device=dev)])
            torch.distributed.all_reduce(stats, group=self.pg)
            total, stopping = stats[0] / world, bool(stats[1] > 0)
        torch.nn.utils.clip_grad_norm_(net.parameters(), tc.grad_clip)
        return float(total), stopping

    @property
    def folder(self) -> Path:
        return self.results.run_dir(self.name)

    def trained_s(self) -> Optional[float]:
        """The run's training wall seconds to now, over every segment (None where an earlier one is unknown)."""
        return None if self.prior_s is None else self.prior_s + time.time() - self.t0

    def step(self, step: int, fwd, net, stop: StopRequest) -> float:
        tc, T = self.cfg.train, self.cfg.model.context
        lr = lr_at(step, tc)
        for g in self.opt.param_groups:
            g["lr"] = lr
        x, y = sample_batch(
            self.train_tokens, tc.seed, step, tc.batch_size, T, self.rank, self.world, *needle_settings(tc, step)
        )
        pos = (
            sample_positions(tc.seed, step, T, tc.random_positions, self.dev, tc.random_positions_float)
            if tc.random_positions
            else None
        )
        x, y = x.to(self.dev, non_blocking=True), y.to(self.dev, non_blocking=True)
        loss, stopping = self.update(fwd, net, x, y, stop, pos)
        if not math.isfinite(loss):
            if self.is_main:
                self.results.set_status(self.name, state="failed", step=step, reason=f"loss {loss} at step {step}")
            raise TrainingDiverged(
                f"training diverged: loss is {loss} at step {step}; the last good checkpoint is "
                f"kept in {self.folder}; lower train.lr and rerun with --overwrite"
            )
        self.opt.step()
        with torch.no_grad():
            self.model.pe.after_step()  # a scheme projects its parameters back into their domain
        self.window_tokens += tc.batch_size * T
        self.after(step + 1, loss, lr, stopping, stop)
        return loss

    def after(self, done: int, loss: float, lr: float, stopping: bool, stop: StopRequest) -> None:
        tc = self.cfg.train
        if self.is_main and (done % tc.log_every == 0 or done == tc.steps or stopping):
            self.log(done, loss, lr)
        elif self.is_main and self.progress:  # the bar moves every step; the speed is the last log line's, or
            el = time.time() - self.window_t  # before the first log, the speed so far (never a 0 tok/s)
            self.progress(done, tc.steps, loss, self.last_tps or (self.window_tokens / el if el > 0 else 0.0))
        if self.is_main and tc.eval_every and (done % tc.eval_every == 0 or done == tc.steps):
            point = curve_point(self.model, self.cfg, self.corpus.tokens("validation"), self.dev)
            append_line(
                self.folder / "metrics.jsonl",
                json.dumps({"step": done, "tokens": done * tc.batch_size * self.cfg.model.context, "curve": point}),
            )
        if done % tc.checkpoint_every == 0 or done == tc.steps or stopping:
            self.save(done)
        if stopping and done < tc.steps:
            why = stop.signal or "a signal on another rank"
            if self.is_main:
                self.results.set_status(self.name, state="interrupted", step=done, steps=tc.steps, signal=why)
            raise TrainingInterrupted(
                f"{self.name}: interrupted by {why} at step {done}/{tc.steps}; checkpoint saved; {RESUME_HINT}",
                stop.signal,
            )
        if self.is_main and done % tc.checkpoint_every == 0 and done < tc.steps:
            self.results.set_status(self.name, state="running", step=done, steps=tc.steps)

    def log(self, done: int, loss: float, lr: float) -> None:
        el = time.time() - self.window_t
        tps = self.window_tokens / el if el > 0 else 0.0
        append_line(
            self.folder / "metrics.jsonl",
            f'{{"step": {done}, "loss": {loss:.6f}, "lr": {lr:.6g}, "tokens_per_s": {tps:.1f}}}',
        )
        self.window_t, self.window_tokens, self.last_tps = time.time(), 0, tps
        if self.progress:
            self.progress(done, self.cfg.train.steps, loss, tps)

    def save(self, step: int) -> None:
        if self.is_main:
            ckpt = {
                "model": self.model.state_dict(),
                "optimizer": self.opt.state_dict(),
                "step": step,
                "config": self.cfg.to_dict(),
                "rng": _rng_state(self.dev),
                "wall_s": self.trained_s(),  # so that a resumed run's status counts every segment
            }
            try:
                atomic_save(self.folder / CHECKPOINT, lambda p: torch.save(ckpt, p))
            except WriteFailed as e:  # a full disk: the run is stopped, not left "running"
                with contextlib.suppress(PebenchError, OSError):
                    self.results.set_status(
                        self.name, state="interrupted", step=self.saved, steps=self.cfg.train.steps, reason=str(e)
                    )
                raise PebenchError(
                    f"{self.name}: {e}; the last checkpoint saved is at step {self.saved}: {RESUME_HINT} "
                    "once there is room"
                ) from e
        self.saved = step

    def interrupted_at_once(self) -> None:
        """A second Ctrl-C: stop at once, from the last checkpoint."""
        steps = self.cfg.train.steps
        if self.is_main:
            self.results.set_status(self.name, state="interrupted", step=self.saved, steps=steps, signal="SIGINT")
        raise TrainingInterrupted(
            f"{self.name}: interrupted at once; the last checkpoint is at step {self.saved}/{steps}; {RESUME_HINT}"
        )


def _train_locked(job: TrainJob, dev, corpus) -> TrainResult:
    cfg, results, name, rank, world, pg = job.cfg, job.results, job.name, job.rank, job.world, job.process_group
    tc = cfg.train
    start = _prepare(job, dev, corpus)
    model, start_step = start.model, start.step
    net = torch.nn.parallel.DistributedDataParallel(model, process_group=pg) if world > 1 else model
    fwd = torch.compile(net) if tc.compile else net
    loop = _Loop(
        cfg,
        results,
        name,
        dev,
        corpus,
        model,
        start.opt,
        rank,
        world,
        pg,
        job.progress,
        corpus.tokens("train"),
        saved=start_step,
        precision=start.precision,
        prior_s=start.prior_s,
    )
    loop.t0 = loop.window_t = time.time()
    loss_val = float("nan")
    model.train()
    with StopRequest() as stop:
        try:
            for step in range(start_step, tc.steps):
                loss_val = loop.step(step, fwd, net, stop)
        except KeyboardInterrupt:
            loop.interrupted_at_once()
        segment = time.time() - loop.t0
        total = loop.trained_s()
        if rank == 0:  # finished before a signal of the last step is handed on as the block ends
            results.set_status(
                name,
                state="finished",
                step=tc.steps,
                steps=tc.steps,
                final_loss=loss_val,
                # the run's training time over every segment; where an earlier segment's is unknown (a checkpoint
                # from before pebench recorded it), the time from ``resumed_from`` on
                wall_s=round(segment if total is None else total, 2),
                segment_s=round(segment, 2),  # this invocation's part (what its profile counts)
                resumed_from=start_step,
                wall_known=total is not None,
                env=environment(str(dev)),
            )
    wall = segment if total is None else total
    return TrainResult(name, folder=results.run_dir(name), steps=tc.steps, final_loss=loss_val, wall_s=wall)
