"""The minimal-pairs task: each variant differs from the key in one digit, at two different places; the prompts say
what the task says (tier 2 adds the variants as decoys); a model that reads the key bound to its name scores 1 in both
tiers, one that copies the nearest number scores 1 alone and less with decoys (the tiers fall), a uniform one scores
exactly chance, 1/3; in an outside tokenizer's tokens the slot holds any candidate."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from pebench.eval.tasks import TASKS
from pebench.eval.tasks.pairs import DECOYS, NEEDLE, QUESTION, PairsTask, need, prompt, variants
from support import task_ctx


def test_each_variant_changes_one_digit_at_its_own_place():
    rng = np.random.default_rng(0)
    for _ in range(200):
        key = "".join(str(d) for d in rng.integers(0, 10, 5))
        a, b = variants(rng, key)
        diffs = [[i for i in range(5) if v[i] != key[i]] for v in (a, b)]
        assert all(len(d) == 1 for d in diffs) and diffs[0] != diffs[1]


def test_the_prompts_say_what_the_tiers_say():
    draw = PairsTask.draw(0, 400, 3)
    one, two = (prompt(400, t, 0.5, draw) for t in (1, 2))
    for p in (one, two):
        text = bytes(p.tokens).decode()
        assert len(p.tokens) == 400 and text.endswith(QUESTION + " " + draw["key"])
        assert NEEDLE.format(key=draw["key"]) in text and p.answers == [(395, 400)]
    assert not any(v in bytes(one.tokens).decode() for v in draw["variants"])
    assert all(d.format(key=v) in bytes(two.tokens).decode() for d, v in zip(DECOYS, draw["variants"]))
    assert need(2) < 128  # tier 2 fits a tiny model's context


class Reader(torch.nn.Module):
    """Byte logits that, in the answer slot, predict a number read from the model's own input: the one bound to
    'The pass key is' (``bound``), else the last 5-digit number before the question (the nearest)."""

    def __init__(self, bound: bool):
        super().__init__()
        self.bound = bound

    def forward(self, x):
        out = torch.zeros(*x.shape, 256)
        for r, row in enumerate(x):
            text = bytes(row.tolist()).decode(errors="replace")
            q = text.rfind(QUESTION)
            found = re.findall(r"pass key is (\d{5})", text[:q]) if self.bound else re.findall(r"(\d{5})", text[:q])
            digits = (found[0] if self.bound else found[-1]).encode()
            start = len(text) - 5  # the slot: positions L-5 .. L-1, predicted by the logits one before each
            for j, d in enumerate(digits):
                out[r, start + j - 1, d] = 10.0
        return out


class Uniform(torch.nn.Module):
    def forward(self, x):
        return torch.zeros(*x.shape, 256)


@pytest.mark.parametrize(
    "model,t1,t2", [(Reader(bound=True), 1.0, 1.0), (Uniform(), 1 / 3, 1 / 3)], ids=["bound", "uniform"]
)
def test_a_reader_of_the_bound_key_scores_one_and_a_uniform_model_chance(model, t1, t2):
    task = TASKS.get("pairs")
    out = task.measure(task_ctx(model, **{**task.options, "trials": 4}), 400)
    assert out["metrics"]["pairs_t1"] == pytest.approx(t1) and out["metrics"]["pairs_t2"] == pytest.approx(t2)
    assert out["details"]["tier_order"] == "falls"


def test_a_copier_of_the_nearest_number_loses_to_the_decoys_and_the_tiers_fall():
    """In tier 2 a decoy after the needle is the nearest number: the copier ranks a variant first there."""
    task = TASKS.get("pairs")
    out = task.measure(task_ctx(Reader(bound=False), **{**task.options, "trials": 6}), 400)
    assert out["metrics"]["pairs_t1"] == pytest.approx(1.0) and out["metrics"]["pairs_t2"] < 0.9
    assert out["details"]["tier_order"] == "falls"


def test_pairs_in_an_outside_tokenizers_tokens(tmp_path):
    pytest.importorskip("transformers")
    from support import invoke, tiny_outside, token_encoder

    model, tok = tiny_outside(
        tmp_path / "tiny", " ".join(["The grass is green. The pass key is 12345. Remember it."] * 200), context=128
    )
    encode = token_encoder(tok)

    draw = PairsTask.draw(0, 256, 1, encode)
    p = prompt(256, 2, 0.5, draw, encode=encode)
    (a, b) = p.answers[0]
    assert len(p.tokens) == 256 and b == 256 and tok.decode(p.tokens[a:b].tolist()).strip() == draw["key"]
    assert {len(ids) for ids in p.meta["slot"].values()} == {b - a}
    r = invoke(
        "eval", "--hf", model, "--task", "pairs", "--lengths", "2x", "--trials", "2", "--results", tmp_path / "r"
    )
    assert r.exit_code == 0, r.output
