"""Evaluation tasks and their metrics, in registries like the schemes' (lm-evaluation-harness's ``Task``).

A task measures one finished model at one evaluation length and returns the measured part of a record: its
``metrics`` (name -> value), their ``intervals`` (name -> [lo, hi], 95%) and task-specific ``details``. It declares:
- ``metrics``: each a :class:`Metric` that knows whether higher is better (reports bold and rank by it);
- ``fields``: the keys of its ``details`` (documented in docs/manual/commands.md with the record's fields);
- ``options``: its settings with defaults (``pebench eval --trials 20 --task-opt passkey.depths=0,0.5,1 ...``);
- ``protocol(options, protocol)``: the key that keeps records of different settings apart.

Adding a task is one module that subclasses :class:`Task` and calls :func:`register_task`; ``pebench eval
--task NAME``, ``report --metric NAME`` and ``run`` then know it. Reports read the tasks' metadata (metrics,
directions) and run no model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Optional

from ...util.errors import UsageError
from ...util.parsing import typed_value
from ...util.registry import Registry, unknown_name_message
from ...util.stats import mean_interval, sign_test, wilson  # noqa: F401  (tasks import them from here)

if TYPE_CHECKING:
    import numpy as np
    import torch
    from transformers import PreTrainedTokenizerBase

    from ...config import Config
    from ...util.progress import Progress
    from ..scoring import Protocol


@dataclass(frozen=True)
class Metric:
    name: str
    task: str
    higher_is_better: bool
    description: str
    digits: int = 2
    derived: bool = False  # computed by the task from its records (Task.derive), not stored in them
    # The absolute rule of the effective length (report.effective): a length counts only where the score is at
    # least this (and at least RELATIVE of the 1x score); None: the metric has no effective length.
    threshold: Optional[float] = None
    # A fraction of prompts right, in [0, 1]: a single draw's interval is at least Wilson's on its prompts, and an
    # interval that covers all of [0, 1] says nothing.
    proportion: bool = False
    # What a model that knows nothing scores (a uniform next-token distribution): a number, or a function of the
    # task's options and the vocabulary size V; None where it has no one value. Records carry it (``chance``)
    # and reports show it beside the metric, so two tokenizers' chance levels are never mixed unseen.
    chance: Any = None
    # The smallest value the metric can take (a perplexity 1, a loss 0); a record below it is damaged, not a result.
    floor: Optional[float] = None

    def possible(self, value: float) -> bool:
        """Whether a measured value is one the metric can take (a share lies in [0, 1])."""
        if self.proportion and not 0.0 <= value <= 1.0:
            return False
        return self.floor is None or value >= self.floor

    def chance_at(self, options: dict, vocab: int) -> Optional[float]:
        c = self.chance(options, vocab) if callable(self.chance) else self.chance
        return None if c is None else float(c)

    def best(self, values: list[float]) -> float:
        return max(values) if self.higher_is_better else min(values)


@dataclass
class EvalContext:
    """What a task measures with: the model (with its scheme or variant), its config, the evaluation stream (the
    split cut to max_tokens) and the whole split, the protocol, this task's options and the progress display."""

    model: torch.nn.Module  # a DecoderLM (or any module with its forward and .pe)
    cfg: Config
    dev: torch.device  # torch.device
    stream: np.ndarray  # np.ndarray: the evaluation stream
    split_tokens: np.ndarray  # np.ndarray: the whole split
    protocol: Protocol  # scoring.Protocol
    max_length: int
    options: dict[str, Any]
    seed: int = 0  # evaluation stream seed (prompt keys, strings, offsets)
    progress: Optional[Progress] = None  # progress.Progress
    title: str = ""
    state: dict[str, Any] = field(default_factory=dict)  # what a task's prepare() keeps for its measure()
    tokenizer: Optional[PreTrainedTokenizerBase] = (
        None  # None: bytes are the tokens (pebench's runs); else an outside model's tokenizer
    )

    @property
    def vocab(self) -> int:
        """The number of tokens the model chooses among (its tokenizer's, else the config's bytes)."""
        return len(self.tokenizer) if self.tokenizer is not None else int(self.cfg.model.vocab_size)

    token_bytes: Optional[np.ndarray] = (
        None  # np.ndarray beside the stream: UTF-8 bytes each token covers (None: one each)
    )
    # split_tokens is the stream itself, cut to the cap (an outside model's tokenized split), so the cap keys every
    # task's records, not only those that read the stream (Task.reads_stream)
    split_capped: bool = False
    journal: Any = None  # scoring.Journal: where the cell being measured keeps its sums between batches (ppl)
    precision: str = "fp32"  # the model's precision here, resolved (model.device.eval_precision): fp32 or bf16


METRICS: dict[str, Metric] = {}
TASKS: Registry["Task"] = Registry("evaluation task")


class Task:
    """One evaluation task. Subclasses set the class attributes and implement :meth:`measure`."""

    name: str = ""
    description: str = ""
    metrics: tuple[Metric, ...] = ()
    derived: tuple[Metric, ...] = ()  # metrics the task computes from its records for reports (derive)
    fields: dict[str, str] = {}  # details key -> description
    options: dict[str, Any] = {}  # option -> default
    headline: str = ""  # the task's main metric (the first table `run` prints for it)
    summary: tuple[str, ...] = ()  # its metrics in the context-use table (default: the headline)
    # Bump when prompts, templates or scoring change: records carry it, and records of another version are
    # never reused or mixed into a table with this one's.
    version: int = 1
    order: int = 100  # rank in listings and the context-use table (lower first; ties by name)
    any_tokenizer: bool = False  # measures an outside model with its own tokenizer (pebench eval --hf)
    # measures on the evaluation stream (EvalContext.stream), so its cap (--max-tokens) keys its records; a task that
    # builds its prompts from the whole split or from filler only, measured alike under any cap, says False
    reads_stream: bool = True

    def protocol(self, options: dict, protocol) -> tuple[str, dict]:
        """(protocol name, params) written into the record: settings that change the measurement."""
        return protocol.name, protocol.params()

    def check(self, options: dict, lengths: list[int], context: int, n_tokens: int, protocol) -> None:
        """Raise UsageError for settings this task cannot measure (at these lengths, on an evaluation stream of
        ``n_tokens`` tokens, under ``protocol``), before anything runs."""

    def prepare(self, ctx) -> None:
        """Once per run and variant, before the lengths (e.g. marking the stream)."""

    def measure(self, ctx, length: int) -> dict:
        """{status, reason, metrics, intervals, details} at one length; ``ctx`` is this module's ``EvalContext``."""
        raise NotImplementedError

    def outputs(self, df, root, suffix: str = "") -> list:
        """Extra report files from this task's records (a pandas frame); none by default."""
        return []

    def derive(self, df, name: str):
        """The frame of this task's records with the derived metric ``name`` added as a column."""
        raise NotImplementedError(f"task {self.name!r} derives no metric {name!r}")

    def check_record(self, rec: dict) -> None:
        """The writer's guard: a record holds exactly this task's metrics (and, measured, its details)."""
        if rec["status"] == "ok" and set(rec["details"]) != set(self.fields):
            raise ValueError(
                f"{self.name} record details {sorted(rec['details'])} do not match the task's fields "
                f"{sorted(self.fields)}"
            )
        if set(rec["metrics"]) != {m.name for m in self.metrics}:
            raise ValueError(f"{self.name} record metrics {sorted(rec['metrics'])} are not the task's")

    def chances(self, options: dict, vocab: int, names=None) -> dict[str, float]:
        """The chance level of each of its metrics (``names``: those a record holds) that has one."""
        want = set(names) if names is not None else {m.name for m in self.metrics}
        out = {m.name: m.chance_at(options, vocab) for m in self.metrics if m.name in want}
        return {k: v for k, v in out.items() if v is not None}

    def summary_metrics(self) -> tuple[str, ...]:
        return self.summary or ((self.headline or self.metrics[0].name),)

    def undefined(self, reason: str) -> dict:
        return {
            "status": "undefined",
            "reason": reason,
            "metrics": {m.name: None for m in self.metrics},
            "intervals": {},
            "details": {},
        }


def record_line(r: dict) -> str:
    """A record as one line: its row label, task, length and metrics (each to its metric's digits)."""
    val = (
        "n/a (undefined)"
        if r["status"] != "ok"
        else "  ".join(f"{k} {v:.{METRICS[k].digits + 1}f}" for k, v in r["metrics"].items() if v is not None)
    )
    return f"{r['label']:<22} {r['task']:<8} L={r['length']:<6} {val}"


def task_names() -> list[str]:
    """Registered tasks in display order."""
    return sorted(TASKS, key=lambda n: (TASKS.get(n).order, n))


def register_task(task: Task) -> Task:
    """Register a task instance and its metrics (metric names are unique across tasks)."""
    for m in task.metrics + task.derived:
        if m.name in METRICS and METRICS[m.name].task != task.name:
            raise ValueError(f"metric {m.name!r} of task {task.name!r} is already a metric of {METRICS[m.name].task!r}")
    TASKS.add(task)
    for m in task.metrics + task.derived:
        METRICS[m.name] = m
    return task


def unregister_task(name: str) -> None:
    """Remove a task and its metrics (tests that register their own)."""
    for m in [m for m in METRICS.values() if m.task == name]:
        METRICS.pop(m.name)
    TASKS.unregister(name)


def resolve_tasks(spec: Optional[str]) -> list[Task]:
    """``--task``: a comma list of task names (None: ``ppl``; an empty one is an error naming the tasks)."""
    from ...util.parsing import parse_list

    if spec is not None and not str(spec).strip():
        raise UsageError(f"--task names no task; tasks: {', '.join(TASKS.names())}")
    return [TASKS.get(n) for n in parse_list(spec or "ppl", "--task")]


def metric(name: str) -> Metric:
    if name not in METRICS:
        raise UsageError(unknown_name_message("metric", name, list(METRICS)))
    return METRICS[name]


def task_options(tasks: list[Task], given: dict) -> dict:
    """Each task's options: its defaults, overridden by the given ones (None = not given). A key is an option name
    (every task evaluated that takes it) or ``TASK.OPTION`` (that task only). An option that none of the tasks
    takes is an error, so a setting is never silently ignored. A ``TASK.OPTION`` beats a plain ``OPTION``."""
    out = {t.name: dict(t.options) for t in tasks}
    by_name = {t.name: t for t in tasks}
    for key, value in sorted(given.items(), key=lambda kv: "." in kv[0]):
        if value is None:
            continue
        tname, _, opt = key.rpartition(".")
        if tname and tname not in by_name:
            raise UsageError(f"--task-opt {key}: task {tname!r} is not evaluated here (tasks: {', '.join(by_name)})")
        targets = [by_name[tname]] if tname else [t for t in tasks if opt in t.options]
        if not targets or opt not in targets[0].options:
            takes = [n for n in TASKS if opt in TASKS.get(n).options]
            where = f"an option of {', '.join(takes)}, not of" if takes else "an option of no task; not of"
            raise UsageError(
                f"--task-opt {key}: {opt!r} is {where} {', '.join(t.name for t in targets or tasks)}"
                + "".join(f"; {t.name} takes {', '.join(t.options) or 'no option'}" for t in targets or tasks)
            )
        for t in targets:
            out[t.name][opt] = typed_value(value, t.options[opt], f"--task-opt {key}")
    return out


def parse_task_opts(specs: Optional[list[str]]) -> dict:
    """``--task-opt`` values (``NAME=V`` or ``TASK.NAME=V``, repeatable) -> {key: text value}."""
    from ...util.parsing import parse_assignment

    out: dict = {}
    for spec in specs or []:
        key, value = parse_assignment(spec, "--task-opt")
        if key in out:
            raise UsageError(f"--task-opt {key} is given twice")
        out[key] = value
    return out


def check_int(options: dict, task: str, name: str, lo: int = 1) -> int:
    """An integer option that must be at least ``lo`` (one clear line otherwise)."""
    v = options[name]
    if not isinstance(v, int) or isinstance(v, bool) or v < lo:
        raise UsageError(f"{task}.{name} must be an integer >= {lo}, got {v!r}")
    return v


def check_choice(options: dict, task: str, name: str, allowed: tuple) -> str:
    if options[name] not in allowed:
        raise UsageError(f"{task}.{name} must be one of {', '.join(allowed)}, got {options[name]!r}")
    return options[name]


HAYSTACKS = ("filler", "corpus")  # what a retrieval prompt's filler is: a sentence repeated, or evaluation text


def check_haystack(options: dict, task: str, lengths: list, n_tokens: int) -> None:
    """A retrieval task's ``haystack`` option, and for the corpus an evaluation split as long as the longest window."""
    check_choice(options, task, "haystack", HAYSTACKS)
    if options["haystack"] == "corpus" and max(lengths) > n_tokens:
        raise UsageError(f"{task}.haystack=corpus needs an evaluation split of at least {max(lengths)} tokens")


def summarize(scores: list[list[float]], one_answer: bool) -> tuple[float, list[float]]:
    """Mean of the per-prompt mean scores and its 95% interval (Wilson where a prompt has one answer)."""
    per = [sum(s) / len(s) for s in scores]
    if one_answer:
        return sum(per) / len(per), list(wilson(sum(per), len(per)))
    m, lo, hi = mean_interval(per)
    return m, [lo, hi]


def summarize_by_depth(
    scores: list[list[float]], one_answer: bool, variant: str, depths: list[float], trials: int
) -> tuple[float, list[float], list[dict]]:
    """A variant's summary over all its prompts (``trials`` at each depth, depth by depth) and one cell a depth."""
    cells = []
    for i, d in enumerate(depths):
        score, ci = summarize(scores[i * trials : (i + 1) * trials], one_answer)
        cells.append({"variant": variant, "depth": d, "trials": trials, "score": score, "score_ci": ci})
    return (*summarize(scores, one_answer), cells)


def rank_credit(true_ll: list[float], distractor_ll: list[float]) -> list[float]:
    """Order-free recall by ranking: each true candidate's credit is 1 when its log-likelihood beats every
    distractor's, 1/(k+1) when it ties with k distractors at the top, else 0 (a uniform model: 1/(1 + distractors))."""
    top = max(distractor_ll)
    ties = sum(d == top for d in distractor_ll)
    return [1.0 if t > top else 1.0 / (1 + ties) if t == top else 0.0 for t in true_ll]


def prompts_of(make: Callable[[Any], Any], items) -> list:
    """``make(item)`` for each item; a prompt that does not fit its window (``ValueError``, its builder's line) is the
    one-line usage error."""
    try:
        return [make(x) for x in items]
    except ValueError as e:
        raise UsageError(str(e)) from None


TIER_LEVEL = 0.01  # a harder tier above the easier one at this one-sided level fails the generator (tests/tasks)


def tier_order(easier: float, harder: float) -> str:
    """``falls`` where the harder tier scores at most the easier one, else ``defect`` (of the generator: the tiers
    do not order what they claim to)."""
    return "falls" if harder <= easier else "defect"


def tier_details(easier: list[float], harder: list[float]) -> dict:
    """How two tiers scored over the same draws (prompt i of each tier built from draw i): ``tier_order`` by their
    means, and the paired evidence that the harder tier scores higher, the exact sign test over the draws whose
    credits differ (``tier_p``, one-sided; ``tier_pairs``, how many differed). A ``tier_p`` below ``TIER_LEVEL`` is
    a generator defect beyond the prompts' noise."""
    if len(easier) != len(harder):
        raise ValueError(f"tiers are paired by draw: {len(easier)} prompts against {len(harder)}")
    p, n = sign_test([h - e for e, h in zip(easier, harder)])
    return {
        "tier_order": tier_order(sum(easier) / len(easier), sum(harder) / len(harder)),
        "tier_p": p,
        "tier_pairs": n,
    }


def encoder(ctx):
    """text -> token ids with the outside model's tokenizer (no special tokens); None for pebench's byte models."""
    if ctx.tokenizer is None:
        return None
    import numpy as np

    return lambda text: np.asarray(ctx.tokenizer(text, add_special_tokens=False)["input_ids"], dtype=np.int64)


def answer_scores(ctx, prompts: list, choices=None) -> tuple[list[list[float]], list[float]]:
    """Teacher-forced answers of ``data.ruler.Prompt``s: per prompt, each answer's exact-match credit (the product
    of its bytes' credits, so chance is exactly 1/|choices| per byte) and the prompt's mean loss per answer byte."""
    import numpy as np

    from ..scoring import score_positions

    rows = np.stack([p.tokens for p in prompts])
    spans = [np.concatenate([np.arange(s, e) for s, e in p.answers]) for p in prompts]
    credit, logprob = score_positions(ctx, rows, spans, choices)
    exact = []
    for p, c in zip(prompts, credit):
        ends = np.cumsum([e - s for s, e in p.answers])
        exact.append([float(np.prod(part)) for part in np.split(c, ends[:-1])])
    return exact, [float(-lp.mean()) for lp in logprob]


def ranking_scores(ctx, prompts: list) -> list[list[float]]:
    """Ranking prompts (``texts`` true, ``candidates`` distractors, one at a time in the answer slot): per prompt,
    each true candidate's :func:`rank_credit` by the log-likelihood of the slot. A prompt's rows share everything
    before the slot, which runs once per prompt (``scoring.slot_logprobs``)."""
    import numpy as np

    from ..scoring import slot_logprobs

    slots = []
    for p in prompts:
        s, e = p.answers[0]
        rows = np.stack([p.tokens] * (len(p.texts) + len(p.candidates)))
        for r, c in zip(rows, list(p.texts) + list(p.candidates)):
            slot = p.meta.get("slot")  # an outside tokenizer's prompt: each candidate's ids, as many as the slot's
            r[s:e] = np.frombuffer(c.encode("ascii"), dtype=np.uint8) if slot is None else slot[c]
        slots.append((rows, s, e))
    ll = [lp.sum(1) for lp in slot_logprobs(ctx, slots)]
    return [rank_credit(list(x[: len(p.texts)]), list(x[len(p.texts) :])) for p, x in zip(prompts, ll)]


def parse_floats(spec: Any, what: str, lo: float, hi: float) -> list[float]:
    """A comma list (or list) of numbers in [lo, hi], without duplicates."""
    from ...util.parsing import parse_list

    return parse_list(spec, what, float, lo=lo, hi=hi)


class DigitTiers(Task):
    """A task of two difficulty tiers built from the same draws, whose answer is one teacher-forced digit scored
    among the ten (bytes) or among the vocabulary (an outside tokenizer): ``NAME_t1`` and ``NAME_t2``, chance 1/10 in
    bytes. A subclass gives ``draw(seed, length, i)``, ``prompt(length, tier, draw, haystack, encode)``, ``need(tier)``
    (the bytes of a tier's longest prompt besides its haystack) and may add details (``more``)."""

    reads_stream = False  # its haystack: filler, or the whole split (haystack=corpus)
    any_tokenizer = True
    options = {"trials": 30, "haystack": "filler"}
    tier_fields = {
        "haystack": "filler or corpus",
        "trials": "prompts per tier (the same draws in both tiers)",
        "tier_order": "falls (tier 2 at most tier 1) or defect (the harder tier scored higher)",
        "tier_p": "one-sided exact sign test that tier 2 scores above tier 1, paired by draw (below 0.01: a defect)",
        "tier_pairs": "draws whose two tiers' credits differ (the sign test's draws)",
        "tokens": "bytes, or the outside tokenizer's class (eval --hf: the prompts in its tokens)",
    }

    @staticmethod
    def tier_metrics(name: str, tiers: tuple[str, str], what: str, chance: int = 10) -> tuple[Metric, ...]:
        """The two metrics: ``what`` is scored, ``tiers`` say what each tier holds; chance 1/``chance``."""
        return tuple(
            Metric(
                f"{name}_t{t}",
                name,
                True,
                f"{name} tier {t}: {what} ({held}; chance 1/{chance})",
                threshold=0.5,
                proportion=True,
                chance=1.0 / chance,
            )
            for t, held in ((1, tiers[0]), (2, tiers[1]))
        )

    def draw(self, seed: int, length: int, i: int) -> dict:
        raise NotImplementedError

    def prompt(self, length: int, tier: int, d: dict, haystack=None, encode=None):
        raise NotImplementedError

    def need(self, tier: int) -> int:
        raise NotImplementedError

    def more(self, draws: list[dict], exact: dict[int, list[float]]) -> dict:
        """Details of the subclass's own, from the draws and each tier's exact credits (none by default)."""
        return {}

    def check(self, options, lengths, context, n_tokens, protocol):
        check_haystack(options, self.name, lengths, n_tokens)
        check_int(options, self.name, "trials")
        if short := [L for L in lengths if self.need(2) >= L]:
            raise UsageError(
                f"{self.name} needs windows of more than {self.need(2)} tokens (its tier 2); got lengths {short}"
            )

    def protocol(self, options, protocol):
        return options["haystack"], {"trials": options["trials"]}

    def measure(self, ctx, length: int) -> dict:
        import numpy as np

        o = ctx.options
        hay = ctx.split_tokens if o["haystack"] == "corpus" else None
        encode = encoder(ctx)
        draws = [self.draw(ctx.seed, length, i) for i in range(o["trials"])]
        digits = np.frombuffer(b"0123456789", dtype=np.uint8) if encode is None else None
        metrics, intervals, exact = {}, {}, {}
        for tier in (1, 2):
            prompts = prompts_of(lambda d, tier=tier: self.prompt(length, tier, d, hay, encode), draws)
            exact[tier] = [e[0] for e in answer_scores(ctx, prompts, digits)[0]]
            m, lo, hi = mean_interval(exact[tier])
            metrics[f"{self.name}_t{tier}"], intervals[f"{self.name}_t{tier}"] = m, [lo, hi]
        return {
            "status": "ok",
            "reason": None,
            "metrics": metrics,
            "intervals": intervals,
            "details": {
                "haystack": o["haystack"],
                "trials": o["trials"],
                **tier_details(exact[1], exact[2]),
                "tokens": "bytes" if encode is None else type(ctx.tokenizer).__name__,
                **self.more(draws, exact),
            },
        }


__all__ = [
    "METRICS",
    "TASKS",
    "EvalContext",
    "Metric",
    "Task",
    "mean_interval",
    "metric",
    "parse_floats",
    "record_line",
    "parse_task_opts",
    "register_task",
    "resolve_tasks",
    "task_names",
    "task_options",
    "unregister_task",
    "wilson",
]
