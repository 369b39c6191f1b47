"""The common task: the common word is marked 4 times, each other word once (tier 1) or 3 times (tier 2), and the
window ends with it; a model that counts each word's marks ranks it first in both tiers, one that picks the first
word marked twice is right alone and less often when the others repeat too (the tiers fall), a uniform one scores
exactly 1/3; in an outside tokenizer's tokens the slot holds any of the three words."""

from __future__ import annotations

import re
from collections import Counter

import pytest
import torch

from pebench.eval.tasks import TASKS
from pebench.eval.tasks.common import ASK, draw, need, prompt
from support import task_ctx


@pytest.mark.parametrize("i", range(20))
def test_the_marks_are_counted_as_the_tiers_say(i):
    d = draw(0, 200, i)
    for tier, rare in ((1, 1), (2, 3)):
        text = bytes(prompt(200, tier, d).tokens).decode()
        counts = Counter(re.findall(r"@([a-z]+)(?= )", text[: text.rfind(ASK)]))
        assert counts == {d["words"][0]: 4, d["words"][1]: rare, d["words"][2]: rare}
        assert len(text) == 200 and text.endswith(f"{ASK} @{d['words'][0]}")
    assert need(2) < 128  # fits a tiny model's context


class Picker(torch.nn.Module):
    """Byte logits that, in the slot, spell a word read from the model's own input: the most marked (``count``), or
    the first word marked twice."""

    def __init__(self, count: bool):
        super().__init__()
        self.count = count

    def forward(self, x):
        out = torch.zeros(*x.shape, 256)
        for r, row in enumerate(x):
            text = bytes(row.tolist()).decode(errors="replace")
            q = text.rfind(ASK)
            marks = re.findall(r"@([a-z]+)(?= )", text[:q])
            if self.count:
                word = Counter(marks).most_common(1)[0][0]
            else:
                word = next(w for k, w in enumerate(marks) if w in marks[:k])
            for j, ch in enumerate("@" + word):  # the slot "@word" starts after the question and its space
                if q + len(ASK) + 1 + j < len(text):
                    out[r, q + len(ASK) + j, ord(ch)] = 10.0
        return out


class Uniform(torch.nn.Module):
    def forward(self, x):
        return torch.zeros(*x.shape, 256)


def test_a_counter_ranks_the_common_word_first_and_the_tiers_fall():
    task = TASKS.get("common")
    out = task.measure(task_ctx(Picker(count=True), **{**task.options, "trials": 8}), 200)
    assert out["metrics"]["common_t1"] == pytest.approx(1.0) and out["metrics"]["common_t2"] == pytest.approx(1.0)
    first_twice = task.measure(task_ctx(Picker(count=False), **{**task.options, "trials": 8}), 200)
    assert first_twice["metrics"]["common_t1"] == pytest.approx(1.0) and first_twice["metrics"]["common_t2"] < 1.0
    assert first_twice["details"]["tier_order"] == "falls"
    uniform = task.measure(task_ctx(Uniform(), **{**task.options, "trials": 8}), 200)
    assert uniform["metrics"]["common_t1"] == pytest.approx(1 / 3) and uniform["metrics"]["common_t2"] == pytest.approx(
        1 / 3
    )


def test_common_in_an_outside_tokenizers_tokens(tmp_path):
    pytest.importorskip("transformers")
    from support import invoke, tiny_outside, token_encoder

    model, tok = tiny_outside(tmp_path / "tiny", " ".join(["The grass is green. most marked: @bamori"] * 200))
    encode = token_encoder(tok)

    d = draw(0, 256, 3, encode)
    p = prompt(256, 2, d, encode=encode)
    (a, b) = p.answers[0]
    assert len(p.tokens) == 256 and b == 256 and tok.decode(p.tokens[a:b].tolist()).strip() == "@" + d["words"][0]
    assert {len(ids) for ids in p.meta["slot"].values()} == {b - a}
    args = ["--task", "common", "--lengths", "4x", "--trials", "2", "--results", tmp_path / "r"]
    r = invoke("eval", "--hf", model, *args)
    assert r.exit_code == 0, r.output
