"""The count task: the asked word is marked exactly n times (tier 2: another word as often), the window ends with the
question and n; a model that counts the asked word's marks scores 1 in both tiers, one that counts every mark scores 1
alone and 0 among another word's (the tiers fall), a uniform one exactly chance (1/10); an outside tokenizer's
prompts end with the count's tokens; every count fits a tiny model's 128-token window."""

from __future__ import annotations

import re

import pytest
import torch

from pebench.eval.tasks import TASKS
from pebench.eval.tasks.count import draw, need, prompt
from support import task_ctx


@pytest.mark.parametrize("i", range(20))
def test_the_asked_word_is_marked_n_times_and_the_other_as_often(i):
    d = draw(0, 128, i)
    one, two = (bytes(prompt(128, t, d).tokens).decode() for t in (1, 2))
    word, other = d["words"]
    for text, others in ((one, 0), (two, d["n"])):
        assert len(text) == 128 and text.endswith(f"count of @{word}: {d['n']}")
        assert len(re.findall(rf"@{word}(?![a-z])", text[: text.rfind("count of")])) == d["n"]
        assert len(re.findall(rf"@{other}(?![a-z])", text)) == others
    assert need(2) < 128


class Counter(torch.nn.Module):
    """Byte logits that put the count in the last slot: of the asked word's marks (``asked``), or of every mark."""

    def __init__(self, asked: bool):
        super().__init__()
        self.asked = asked

    def forward(self, x):
        out = torch.zeros(*x.shape, 256)
        for r, row in enumerate(x):
            text = bytes(row.tolist()).decode(errors="replace")
            q = text.rfind("count of @")
            word = text[q + len("count of @") :].split(":")[0]
            pattern = rf"@{word}(?![a-z])" if self.asked else r"@[a-z]+"
            n = len(re.findall(pattern, text[:q]))
            out[r, len(text) - 2, ord(str(min(n, 9)))] = 10.0
        return out


class Uniform(torch.nn.Module):
    def forward(self, x):
        return torch.zeros(*x.shape, 256)


@pytest.mark.parametrize(
    "model,t1,t2",
    [(Counter(asked=True), 1.0, 1.0), (Counter(asked=False), 1.0, 0.0), (Uniform(), 0.1, 0.1)],
    ids=["counts-the-asked-word", "counts-every-mark", "uniform"],
)
def test_a_counter_of_the_asked_word_scores_one_and_the_tiers_fall(model, t1, t2):
    task = TASKS.get("count")
    out = task.measure(task_ctx(model, **{**task.options, "trials": 10}), 128)
    assert out["metrics"]["count_t1"] == pytest.approx(t1) and out["metrics"]["count_t2"] == pytest.approx(t2)
    assert out["details"]["tier_order"] == "falls" and sum(c["prompts"] for c in out["details"]["by_count"]) == 10


def test_count_in_an_outside_tokenizers_tokens(tmp_path):
    pytest.importorskip("transformers")
    from support import invoke, tiny_outside, token_encoder

    model, tok = tiny_outside(tmp_path / "tiny", " ".join(["The grass is green. count of @ 12345"] * 200))
    encode = token_encoder(tok)

    d = draw(0, 256, 2)
    p = prompt(256, 2, d, encode=encode)
    (a, b) = p.answers[0]
    assert len(p.tokens) == 256 and b == 256 and tok.decode(p.tokens[a:b].tolist()).strip() == str(d["n"])
    args = ["--task", "count", "--lengths", "4x", "--trials", "2", "--results", tmp_path / "r"]
    r = invoke("eval", "--hf", model, *args)
    assert r.exit_code == 0, r.output
