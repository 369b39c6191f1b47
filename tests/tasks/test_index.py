"""The ``index`` task: its prompts say what they ask (the list at its depth, the question, the right answer), a model
handed the answer scores one and a uniform one scores chance, and impossible settings are one line."""

import numpy as np
import pytest

from pebench.data.needles import EVAL
from pebench.eval.tasks import TASKS
from pebench.eval.tasks.index import VARIANTS, index_prompt, need
from pebench.util.errors import UsageError
from support import Oracle, Uniform, task_ctx

OPTS = {"trials": 4, "items": 8, "k": 2, "depths": "0,0.5,1", "haystack": "filler"}


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("depth", [0.0, 0.5, 1.0])
def test_an_index_prompt_holds_the_list_at_its_depth_and_ends_with_the_right_answer(variant, depth):
    L = 400
    p = index_prompt(np.random.default_rng(5), variant, L, depth, items=8, k=2)
    text = bytes(p.tokens).decode()
    words, a = p.meta["words"], p.meta["anchor"]
    listing = "items: " + " ".join(words) + "."
    assert len(p.tokens) == L and text[p.inserts[0] :].startswith(listing) and len(set(words)) == 8
    want = {"after": words[a + 2] if a + 2 < 8 else None, "before": words[a - 2] if a >= 2 else None}
    want["position"] = str(a + 1)
    assert want[variant] is not None and p.texts == [want[variant]]
    (s, e) = p.answers[0]
    assert e == L and text[s:e] == want[variant]
    ask = f"place of {words[a]}: " if variant == "position" else f"2 {variant} {words[a]}: "
    assert text[:s].endswith(ask)
    start = p.inserts[0]
    if depth == 0.0:
        assert start <= 1
    elif depth == 1.0:
        assert text[start + len(listing) :].strip().startswith(ask.strip())
    else:
        assert 0.25 * L < start < 0.75 * L
    assert need(8, 2) <= L


def test_index_handed_the_answer_scores_one_and_uniform_scores_chance():
    task, L = TASKS.get("index"), 256
    out = task.measure(task_ctx(Oracle(), **OPTS), L)
    assert out["metrics"] == {f"index_{v}": 1.0 for v in VARIANTS}
    assert [(c["variant"], c["depth"]) for c in out["details"]["cells"]][:3] == [("after", d) for d in (0, 0.5, 1)]
    uni = task.measure(task_ctx(Uniform(), **OPTS), L)["metrics"]
    for vi, v in enumerate(VARIANTS):  # each answer byte one of 26 letters or 10 digits: chance is base^-bytes
        ps = []
        for di, d in enumerate((0.0, 0.5, 1.0)):
            rng = np.random.default_rng([0, EVAL, 7, L, vi, di])  # the task's stream: seed 0 of task_ctx
            ps += [index_prompt(rng, v, L, d, 8, 2) for _ in range(OPTS["trials"])]
        base = 10.0 if v == "position" else 26.0
        assert uni[f"index_{v}"] == pytest.approx(np.mean([base ** -len(p.texts[0]) for p in ps]))


@pytest.mark.parametrize(
    "opts, lengths, msg",
    [
        ({"k": 8}, [256], "index.k must be at least 1 and below index.items (8), got 8"),
        ({"items": 40}, [128], "index with items=40 needs windows of at least"),
        ({"haystack": "hay"}, [256], "index.haystack must be one of filler, corpus"),
    ],
)
def test_impossible_index_settings_get_one_line(opts, lengths, msg):
    task = TASKS.get("index")
    with pytest.raises(UsageError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        task.check({**task.options, **OPTS, **opts}, lengths, 128, 10_000, None)
