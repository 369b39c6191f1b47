"""Scoring primitives: windows over a token stream, per-token loss, per-position buckets, teacher-forced spans.
Both training (learning curves) and evaluation tasks use these; nothing here knows a task, a run or a record.

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
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np
import torch
import torch.nn.functional as F

from ..model.device import autocast_for
from ..util.errors import UsageError
from ..util.fsutil import atomic_write_text
from ..util.progress import Progress, tracking
from ..util.registry import unknown_name_message

PROTOCOLS = ("nonoverlap", "sliding", "fixed")


@dataclass(frozen=True)
class Protocol:
    name: str = "nonoverlap"
    stride: Optional[int] = None
    targets: Optional[int] = None

    def validate(self) -> "Protocol":
        if self.name not in PROTOCOLS:
            raise UsageError(unknown_name_message("protocol", self.name, list(PROTOCOLS)))
        if self.name == "sliding" and (self.stride is None or self.stride < 1):
            raise UsageError("--protocol sliding needs --stride S with S >= 1")
        if self.name == "fixed" and (self.targets is None or self.targets < 1):
            raise UsageError("--protocol fixed needs --targets K with K >= 1")
        if self.stride is not None and self.name != "sliding":
            raise UsageError(f"--stride sets the sliding protocol's step; add --protocol sliding (not {self.name})")
        if self.targets is not None and self.name != "fixed":
            raise UsageError(f"--targets sets the fixed protocol's targets; add --protocol fixed (not {self.name})")
        return self

    def params(self) -> dict:
        return (
            {"stride": self.stride}
            if self.name == "sliding"
            else {"targets": self.targets}
            if self.name == "fixed"
            else {}
        )


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
        raise UsageError(
            f"the stream ({n_tokens} tokens) has room for only {max(0, hi - lo + 1)} fixed targets "
            f"at length {max_length}; lower --targets or the lengths"
        )
    return lo + (np.arange(k) * (hi - lo + 1)) // k


def bucket_edges(length: int) -> list[int]:
    """Log-spaced context-length buckets [1,2), [2,4), ... covering 1 .. length-1."""
    edges = [1]
    while edges[-1] < length:
        edges.append(edges[-1] * 2)
    return edges


def position_buckets(edges: list[int], length: int, loss_sum, count) -> list[dict]:
    return [
        {
            "lo": edges[b],
            "hi": min(edges[b + 1], length) - 1,
            "tokens": int(count[b]),
            "loss": float(loss_sum[b] / count[b]) if count[b] else None,
        }
        for b in range(len(edges) - 1)
    ]


def tail_logits(model: torch.nn.Module, x: torch.Tensor, start: int) -> torch.Tensor:
    """The logits at positions ``start`` .. T-1 of ``x``: where only the last quarter of each row (or less) is scored,
    a model that can (``DecoderLM.logits_tail``) runs its last layer and head from there only; else it runs whole.
    (The last layer's attention is then a [T - start, T] block, without the causal kernel's skipped half and, for a
    value term, explicit: it pays where the block is short.)"""
    if 4 * (x.shape[1] - start) <= x.shape[1] and hasattr(model, "logits_tail"):
        return model.logits_tail(x, start)
    return model(x)


def _window_losses(
    model: torch.nn.Module, chunk: torch.Tensor, first: np.ndarray, pos: np.ndarray, device, precision, on_tokens=None
):
    """One batch of windows: per-token losses (float64, zero where not scored) from the first index any window
    scores (``lo``: logits at lo .. L-1 predict targets lo + 1 .. L-1), which targets are scored, as an array and as
    a mask, and ``lo``. ``on_tokens(t)``: a model that streams a window hears each pass end (t positions done)."""
    length = chunk.shape[1]
    start = int(first.min()) - 1
    tok_loss = None
    if hasattr(model, "token_losses"):  # a model that scores its targets in chunks (an outside model: bounded memory)
        with autocast_for(device, precision):
            tok_loss = model.token_losses(chunk, start, on_tokens)
    if tok_loss is not None:
        lo = start
    else:
        with autocast_for(device, precision):
            logits = tail_logits(model, chunk, start)
        lo = length - logits.shape[1]
        tok_loss = F.cross_entropy(
            logits[:, :-1].float().reshape(-1, logits.shape[-1]), chunk[:, lo + 1 :].reshape(-1), reduction="none"
        ).view(len(first), -1)
    scored = pos[None, lo:] >= first[:, None]
    mask = torch.from_numpy(scored).to(device)
    return (tok_loss * mask).double(), scored, mask, lo


def _advance(progress: Optional[Progress], done: int, rows: int):
    """What a streamed batch of ``rows`` windows reports after each pass: ``done`` positions before it, plus t
    positions of every row (None without progress)."""
    return None if progress is None else (lambda t: progress.update(done + rows * t))


def _bucket_sums(n_buckets: int, bucket: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """``values`` (one per target index) summed into their position buckets, on the CPU."""
    return torch.zeros(n_buckets, dtype=torch.float64, device=values.device).index_add_(0, bucket, values).cpu()


@dataclass
class Journal:
    """Where a long stream keeps its sums between batches, so that ``eval --resume`` goes on from the last batch
    instead of the first: a JSON file beside the record it becomes (its name and ".journal"), written atomically
    after a batch once ``every_s`` seconds have passed since the cell began or the last write (a short cell writes
    none), and removed by the evaluator when the record is written. ``key`` names the measurement (the record's
    identity and the model's hash): a journal of another key, or any journal when ``resume`` is off, is not read.
    Sums resumed this way are the same float64 numbers, added in the same order, as a stream that never stopped.
    A journal also keeps the seconds its cell has run so far, over every process that worked on it, so that a
    resumed cell's time is the whole measurement's (``resumed``: what the record's provenance says of it)."""

    path: Path
    key: dict
    resume: bool
    every_s: float = 60.0
    _last: float = field(default_factory=lambda: time.monotonic(), repr=False)  # a short cell writes none
    _born: float = field(default_factory=lambda: time.monotonic(), repr=False)  # when this process began the cell
    _before: Optional[dict] = field(default=None, repr=False)  # the journal taken on load: windows and seconds

    def load(self, plan: dict) -> Optional[dict]:
        if not (self.resume and self.path.exists()):
            return None
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return None  # a journal that cannot be read is started over, never trusted
        if data.get("key") != self.key or data.get("plan") != plan:
            return None
        # a journal written before journals kept their time says nothing of it (None)
        self._before = {"windows": data["sums"]["next"], "seconds": data.get("seconds")}
        return data["sums"]

    def save(self, plan: dict, sums: dict, force: bool = False) -> None:
        if force or time.monotonic() - self._last >= self.every_s:
            data = {"key": self.key, "plan": plan, "sums": sums, "seconds": self.seconds()}
            atomic_write_text(self.path, json.dumps(data))
            self._last = time.monotonic()

    def seconds(self) -> Optional[float]:
        """Seconds the cell has run so far, in this process and every one before it (None where one before it
        did not say)."""
        before = 0.0 if self._before is None else self._before["seconds"]
        return None if before is None else before + time.monotonic() - self._born

    def resumed(self) -> Optional[dict]:
        """None for a cell measured in one go; else the windows its journal held when this process took it up
        (``windows_before``) and the seconds spent on them (``seconds_before``, None when that journal did not
        say)."""
        b = self._before
        return None if b is None else {"windows_before": b["windows"], "seconds_before": b["seconds"]}


@dataclass
class _Sums:
    """What ``score_stream`` adds up over its batches, and the first window it has not scored (``next``): all a
    journal keeps."""

    loss: list[float]
    count: list[float]
    far_sum: float = 0.0
    far_n: int = 0
    n_bytes: int = 0
    full: list[float] = field(default_factory=list)  # each window's mean loss, of the windows that score every index
    next: int = 0


def score_stream(
    model: torch.nn.Module,
    stream: np.ndarray,
    length: int,
    protocol: Protocol,
    batch_tokens: int,
    device: torch.device,
    max_length: Optional[int] = None,
    progress: Optional[Progress] = None,
    title: str = "",
    far: Optional[np.ndarray] = None,
    nbytes: Optional[np.ndarray] = None,
    precision: str = "auto",
    journal: Optional[Journal] = None,
) -> dict:
    """Run every window and return loss sums in total and per position bucket (and, given ``far``, a boolean mask
    over stream indices, the mean loss over the scored tokens it marks; given ``nbytes``, the bytes each stream token
    covers, their sum over the scored tokens as ``bytes_scored``); ``window_losses``: the mean loss of each window
    that scores every index (a window is one unit of evidence for a single model). ``progress`` hears the cost
    (windows x length token positions) first, then the positions done after every batch. ``precision``: the model's,
    as ``model.device.eval_precision`` resolves it (auto: bf16 where native, the training curve's). ``journal``:
    where the sums are kept between batches (``Journal``)."""
    starts, first = windows(len(stream), length, protocol, max_length)
    per_batch = max(1, batch_tokens // length)
    plan = {"windows": len(starts), "length": length, "per_batch": per_batch, "stream": len(stream)}
    what = f"{len(starts):,} windows of {length:,} tokens ({len(starts) * length:,} token positions)"
    edges = bucket_edges(length)
    pos = np.arange(1, length)
    bucket_t = torch.from_numpy(np.searchsorted(edges, pos, side="right") - 1).to(device)  # each target's bucket
    n_b = len(edges) - 1
    kept = journal.load(plan) if journal is not None else None
    sums = _Sums(**kept) if kept else _Sums([0.0] * n_b, [0.0] * n_b)
    loss_sum, count = torch.tensor(sums.loss, dtype=torch.float64), torch.tensor(sums.count, dtype=torch.float64)
    offsets = np.arange(length)
    with tracking(progress, title, len(starts) * length, what, "tokens"), torch.inference_mode():
        for i in range(sums.next, len(starts), per_batch):
            s, f = starts[i : i + per_batch], first[i : i + per_batch]
            chunk = torch.from_numpy(np.asarray(stream[s[:, None] + offsets[None, :]]).astype(np.int64)).to(device)
            on_tokens = _advance(progress, i * length, len(s))
            tok_loss, scored, mask, lo = _window_losses(model, chunk, f, pos, device, precision, on_tokens)
            if nbytes is not None:
                sums.n_bytes += int((nbytes[s[:, None] + offsets[None, lo + 1 :]] * scored).sum())
            if far is not None:
                fm = torch.from_numpy(far[s[:, None] + offsets[None, lo + 1 :]]).to(device) & mask
                sums.far_sum += float(tok_loss[fm].sum())
                sums.far_n += int(fm.sum())
            loss_sum += _bucket_sums(n_b, bucket_t[lo:], tok_loss.sum(0))
            per_window = (tok_loss.sum(1) / mask.sum(1).clamp(min=1)).cpu().tolist()
            sums.full += [v for v, fi in zip(per_window, f) if fi == 1]
            count += _bucket_sums(n_b, bucket_t[lo:], mask.sum(0).double())
            sums.next, sums.loss, sums.count = i + len(s), loss_sum.tolist(), count.tolist()
            if journal is not None:
                journal.save(plan, asdict(sums))
            if progress is not None:
                progress.update((i + len(s)) * length)
    n = int(count.sum())
    out = {
        "loss": float(loss_sum.sum()) / n,
        "tokens_scored": n,
        "windows": len(starts),
        "position_buckets": position_buckets(edges, length, loss_sum, count),
        "window_losses": sums.full,
    }
    if far is not None:
        out["far"] = {"loss": sums.far_sum / sums.far_n if sums.far_n else None, "tokens": sums.far_n}
    if nbytes is not None:
        out["bytes_scored"] = sums.n_bytes
    return out


def position_logits(model: torch.nn.Module, x: torch.Tensor, positions: list[torch.Tensor]):
    """Yields ``(row, i, logits)``: the logits of row ``row`` of ``x`` at ``positions[row][i : i + n]`` (n the
    chunk's length). A model that can (``HFLM.logits_at``) gives them a chunk at a time; else from
    :func:`tail_logits` from the first position asked for, one row at a time."""
    if hasattr(model, "logits_at"):
        yield from model.logits_at(x, positions)
        return
    first = min((int(p.min()) for p in positions if len(p)), default=0)
    logits = tail_logits(model, x, first)
    lo = x.shape[1] - logits.shape[1]  # logits[:, j] is position lo + j
    for row, p in enumerate(positions):
        yield row, 0, logits[row, p - lo]


def score_positions(ctx, rows: np.ndarray, positions: list, choices: Optional[np.ndarray] = None) -> tuple[list, list]:
    """Teacher-forced scoring of the given target indices of each row (windows of equal length; ``positions[i]`` an
    int array, its own length per row): per target the *credit* of the model's top prediction (1 when the target
    is the unique best among ``choices``, or among all tokens; 1/k when it ties with k - 1 others for the best; 0
    otherwise: a uniform model thus scores exactly chance) and the target's log-probability over the whole vocabulary.
    Returns two lists of numpy arrays, one per row."""
    L = rows.shape[1]
    per = max(1, ctx.cfg.eval.batch_tokens // L)
    credit, logprob = [], []
    ch = None if choices is None else torch.from_numpy(np.asarray(choices).astype(np.int64)).to(ctx.dev)
    cost = f"{len(rows):,} prompts of {L:,} tokens"
    with tracking(ctx.progress, ctx.title, len(rows) * L, cost, "tokens"), torch.inference_mode():
        for i in range(0, len(rows), per):
            x = torch.from_numpy(rows[i : i + per].astype(np.int64)).to(ctx.dev)
            ps = [torch.from_numpy(np.asarray(p, dtype=np.int64)).to(ctx.dev) for p in positions[i : i + per]]
            parts = [([], []) for _ in ps]
            with autocast_for(ctx.dev, ctx.precision):
                for j, at, logits in position_logits(ctx.model, x, [p - 1 for p in ps]):
                    lg, tgt = logits.float(), x[j, ps[j][at : at + len(logits)]]
                    own = lg.gather(1, tgt[:, None])[:, 0]
                    pool = lg if ch is None else lg[:, ch]
                    top = pool.max(-1).values
                    ties = (pool == top[:, None]).sum(-1)
                    ok = own == top if ch is None else (own == top) & torch.isin(tgt, ch)
                    parts[j][0].append((ok.double() / ties.double()).cpu().numpy())
                    parts[j][1].append((own - torch.logsumexp(lg, -1)).double().cpu().numpy())
            for c, lp in parts:
                credit.append(np.concatenate(c) if c else np.zeros(0))
                logprob.append(np.concatenate(lp) if lp else np.zeros(0))
            if ctx.progress is not None:
                ctx.progress.update((i + len(x)) * L)
    return credit, logprob


def slot_logprobs(ctx, prompts: list[tuple[np.ndarray, int, int]]) -> list[np.ndarray]:
    """Per prompt ``(rows, start, stop)``, rows of one length that differ only from ``start`` on (answers tried in
    one slot), the log-probabilities of their tokens [start, stop), (rows, stop - start). Where the model can
    (``DecoderLM.logits_from``; an outside model's ``HFLM.logits_from``, through its KV cache) each prompt's shared
    part runs once and nothing after the slots runs, the prompts batched by ``eval.batch_tokens``; else every row
    runs whole (:func:`score_positions`)."""
    if not hasattr(ctx.model, "logits_from") or min(s for _, s, _ in prompts) < 2:
        _, lp = score_positions(
            ctx, np.concatenate([r for r, _, _ in prompts]), [np.arange(s, e) for r, s, e in prompts for _ in r]
        )
        ends = np.cumsum([len(r) for r, _, _ in prompts])
        return [np.stack(lp[e - len(r) : e]) for (r, _, _), e in zip(prompts, ends)]
    L = prompts[0][0].shape[1]
    per = max(1, ctx.cfg.eval.batch_tokens // L)
    out = []
    with tracking(ctx.progress, ctx.title, len(prompts) * L, f"{len(prompts):,} prompts of {L:,} tokens", "tokens"):
        for i in range(0, len(prompts), per):
            batch = prompts[i : i + per]
            first = min(s for _, s, _ in batch) - 1  # every prompt's rows share their tokens before it
            x = torch.from_numpy(np.concatenate([r for r, _, _ in batch]).astype(np.int64)).to(ctx.dev)
            with torch.inference_mode(), autocast_for(ctx.dev, ctx.precision):
                stop = max(e for _, _, e in batch) - 1  # the last logit read predicts the slot's last token
                sizes = [len(r) for r, _, _ in batch]
                logits = ctx.model.logits_from(x, first, sizes, stop)  # j predicts first + 1 + j
            row = 0
            for r, s, e in batch:
                lg = logits[row : row + len(r), s - 1 - first : e - 1 - first].float()
                own = lg.gather(-1, x[row : row + len(r), s:e, None])[..., 0]
                out.append((own - torch.logsumexp(lg, -1)).double().cpu().numpy())
                row += len(r)
            if ctx.progress is not None:
                ctx.progress.update(min(len(prompts), i + per) * L)
    return out


def score_spans(
    ctx, rows: np.ndarray, start: int, stop: int, choices: Optional[np.ndarray] = None
) -> tuple[np.ndarray, np.ndarray]:
    """Teacher-forced scoring of target indices [start, stop) of each row: the credit of the model's top
    prediction (:func:`score_positions`; among ``choices`` only, when given) and the loss, both (rows, stop - start)
    numpy arrays."""
    span = np.arange(start, stop)
    credit, logprob = score_positions(ctx, rows, [span] * len(rows), choices)
    return np.stack(credit), -np.stack(logprob)
