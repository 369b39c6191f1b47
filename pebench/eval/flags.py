"""An evaluation as a command's flags give it (``EvalFlags``), torch-free so the commands can make their options from
it (``cli.flags.takes``: a field with a help is an option of ``eval`` and, some of them, of ``run``). Text as given
(None: not given); ``jobs.plan.eval_request`` parses it into an ``eval.evaluate.EvalRequest``: a field that
``EvalRequest`` has by the same name is copied over as it is, so a new setting is a field of both and a line in the
docs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

ROPE_SCALING_HELP = "NAME[:key=value...] list (pebench list), all (the default: each run's own), or '' (as trained)"


def _opt(default: Any, decl: str, help: str):
    return field(default=default, metadata={"decl": decl, "help": help})


@dataclass(frozen=True)
class EvalFlags:
    lengths: Optional[str] = _opt(None, "--lengths", "e.g. 512,2048,8192 (default: 1-16x context)")
    max_tokens: Optional[int] = _opt(
        None,
        "--max-tokens",
        "evaluation stream length in tokens (default: the config's); it keys the records of the tasks that read "
        "the stream (ppl, copy: protocol -mN)",
    )
    protocol: str = _opt("nonoverlap", "--protocol", "nonoverlap | sliding | fixed")
    stride: Optional[int] = _opt(None, "--stride", "sliding: tokens scored per window")
    targets: Optional[int] = _opt(None, "--targets", "fixed: number of target tokens")
    rope_scaling: Optional[str] = _opt(None, "--rope-scaling", ROPE_SCALING_HELP + "; eval --hf: the model's own")
    rope_factor: Optional[float] = _opt(None, "--rope-factor", "fix the factor (default L/context)")
    split: str = _opt("validation", "--split", "validation (day to day, tuning) | test (final numbers)")
    logit_scale: Optional[str] = _opt(
        None, "--logit-scale", "none | logn | drope | llama4[:alpha=A:floor=F], NAME@SCHEME for its layers only"
    )
    window: Optional[int] = _opt(
        None, "--window", "StreamingLLM: a sliding window of N tokens on every layer without its own"
    )
    keep: Optional[int] = _opt(None, "--keep", "with --window: the first K tokens kept (default 4)")
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
    backend: str = _opt(
        "auto", "--attention", "attention backend: auto | sdpa | flex | chunked | banded | relative | math"
    )
    # --resume: the records already written are kept and not measured again
    skip_existing: bool = _opt(False, "--resume", "keep the records already written and measure only the missing cells")
    eval_precision: str = _opt(
        "auto",
        "--eval-precision",
        "evaluation: auto (bf16 on CUDA and on CPUs with native bf16; an outside model on a CPU: its --dtype) | fp32 "
        "| bf16",
    )
    device: str = "auto"  # each command's own --device (it trains too, in run)
