"""The evaluation settings, each declared once (type, default, help, check), torch-free so the commands can make
their options from them (``cli.flags.takes``: a field with a help is an option of ``eval`` and, some of them, of
``run``). ``EvalSettings`` are the settings a request uses as the command line gives them (``--lengths`` parsed by
the parser into token counts and multiples); ``EvalFlags`` adds the ones given as text that
``jobs.plan.eval_request`` parses into an ``eval.evaluate.EvalRequest`` (the protocol, the scalings, the tasks).
``EvalRequest`` is an ``EvalSettings`` too, so a new setting is a field here and a line in the docs."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from ..config import check_precision
from ..util.errors import UsageError
from ..util.parsing import parse_lengths

ROPE_SCALING_HELP = "NAME[:key=value...] list (pebench list), all (the default: each run's own), or '' (as trained)"


def _opt(default: Any, decl: str, help: str, parse: Optional[Callable[[str], Any]] = None):
    meta = {"decl": decl, "help": help, **({"parse": parse} if parse else {})}
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class EvalSettings:
    """The settings an evaluation uses as given; ``check`` is their one validation."""

    lengths: Optional[list[int | str]] = _opt(  # token counts, or multiples ("2x") resolved per run
        None,
        "--lengths",
        "comma list of token counts or multiples of the context, e.g. 512,2048 or 1x,4x (default: eval and run "
        "1-16x the context, eval --hf 1x,2x,4x, bench 1x,4x,16x, rope the factor times the context)",
        parse=parse_lengths,
    )
    max_tokens: Optional[int] = _opt(
        None,
        "--max-tokens",
        "evaluation stream length in tokens (default: the config's); it keys the records of the tasks that read "
        "the stream (ppl, copy: protocol -mN)",
    )
    rope_factor: Optional[float] = _opt(None, "--rope-factor", "fix the factor (default L/context)")
    split: str = _opt(
        "validation",
        "--split",
        "validation (day to day, tuning) | test (final numbers) | train (eval --hf only: text pebench's models "
        "trained on, an outside model did not)",
    )
    logit_scale: Optional[str] = _opt(
        None,
        "--logit-scale",
        "none | logn[:gamma=G] | drope | llama4[:alpha=A:floor=F], NAME@SCHEME for its layers only",
    )
    window: Optional[int] = _opt(
        None, "--window", "StreamingLLM: a sliding window of N tokens on every layer without its own"
    )
    keep: Optional[int] = _opt(None, "--keep", "with --window: the first K tokens kept (default 4)")
    backend: str = _opt(
        "auto", "--attention", "attention backend: auto | sdpa | flex | chunked | banded | relative | math"
    )
    # --resume: the records written are kept, not measured again; a half-measured cell goes on from its journal
    skip_existing: bool = _opt(
        False,
        "--resume",
        "keep the records already written, measure only the missing cells (a half-done one from its journal)",
    )
    eval_precision: str = _opt(
        "auto",
        "--eval-precision",
        "evaluation: auto (bf16 on CUDA and on CPUs with native bf16; an outside model on a CPU: its --dtype) | fp32 "
        "| bf16",
    )
    stream: Optional[int] = _opt(
        None,
        "--stream",
        "eval --hf: tokens per forward pass, a window read through the model's KV cache (default 4096; 0: each "
        "window in one pass)",
    )
    device: str = "auto"  # each command's own --device (it trains too, in run)

    def check(self) -> None:
        """Every setting's own check: one line naming the flag."""
        check_precision(self.eval_precision, "--eval-precision")
        if self.rope_factor is not None and not (math.isfinite(self.rope_factor) and self.rope_factor >= 1):
            raise UsageError(f"--rope-factor must be a finite number >= 1, got {self.rope_factor}")
        if self.max_tokens is not None and self.max_tokens < 2:
            raise UsageError(f"--max-tokens must be >= 2, got {self.max_tokens}")
        if self.keep is not None and not self.window:
            raise UsageError("--keep keeps the first tokens of a window; give --window N too")
        if self.window is not None and self.window < 1:
            raise UsageError(f"--window must be a number of tokens >= 1, got {self.window}")
        if (self.keep or 0) < 0:
            raise UsageError(f"--keep must be a number of tokens >= 0, got {self.keep}")
        if self.stream is not None and self.stream < 0:
            raise UsageError(f"--stream must be a number of tokens >= 1, or 0 for one pass, got {self.stream}")


@dataclass(frozen=True)
class EvalFlags(EvalSettings):
    """The settings given as text that ``jobs.plan.eval_request`` parses (the request holds the parsed form)."""

    protocol: str = _opt("nonoverlap", "--protocol", "nonoverlap | sliding | fixed")
    stride: Optional[int] = _opt(None, "--stride", "sliding: tokens scored per window")
    targets: Optional[int] = _opt(None, "--targets", "fixed: number of target tokens")
    rope_scaling: Optional[str] = _opt(
        None, "--rope-scaling", ROPE_SCALING_HELP + "; eval --hf and rope: the model's own"
    )
    # a comma list of tasks (None: ppl, or the suite's)
    task: Optional[str] = _opt(
        None, "--task", "comma list of tasks (pebench list shows them; default: ppl, or the suite's)"
    )
    trials: Optional[int] = _opt(None, "--trials", "prompts per cell (= --task-opt trials=N)")
    task_opts: tuple[str, ...] = _opt(
        (),
        "--task-opt",
        "a task option, NAME=V or TASK.NAME=V (repeatable), e.g. passkey.depths=0,0.5,1 (pebench list shows them)",
    )
