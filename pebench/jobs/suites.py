"""Named suites of ``pebench run``: which config, schemes, evaluation tasks and results folder a suite means.

``default`` is the README's main job (perplexity of the classic seven); ``context`` trains the same schemes with
retrieval data (``configs/context.yaml``) and measures whether they use the context: perplexity with ppl_far,
passkey retrieval, copying, RULER-style needles, variable tracking and associative recall.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..errors import UsageError


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
        "ppl,passkey,copy,niah,vt,mqar",
        "results/context",
        trials=20,
        protocol=("sliding", 64),
        max_tokens=16384,
        task_opts=("niah.form=compact", "vt.form=compact", "niah.trials=10", "vt.trials=40", "mqar.trials=40"),
        description="the classic seven trained with retrieval data: ppl and ppl_far scored with "
        "long context (sliding, S = 64), passkey, copy, RULER's needles (compact form), "
        "variable tracking, MQAR",
    ),
}


def get_suite(name: Optional[str]) -> Suite:
    if name is None:
        return SUITES["default"]
    if name not in SUITES:
        from ..registry import unknown_name_message

        raise UsageError(unknown_name_message("suite", name, list(SUITES)))
    return SUITES[name]
