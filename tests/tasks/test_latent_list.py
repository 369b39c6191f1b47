"""The list task: tier 2's removals are each of something then in the list (replayed, the length is never negative),
the window ends with the length, the same in both tiers; a model that replays every operation scores 1 in both tiers,
one that counts the appends scores 1 alone and 0 with removals (every tier-2 draw has one, so the tiers fall), one that
always says the same digit scores alike in both (the planted defect of version 1: tier 2's lengths drawn smaller), a
uniform one exactly 1/10; an outside tokenizer's prompts end with the length's tokens; every draw fits 128 tokens."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from pebench.eval.tasks import TASKS
from pebench.eval.tasks.latent_list import ASK, draw, length_after, need, prompt
from support import task_ctx

OPS = r"(?:[+?-][a-z]+|pop|peek)(?= )"


@pytest.mark.parametrize("i", range(30))
def test_every_removal_takes_something_held_and_the_tiers_differ_only_in_what_changes_the_list(i):
    d = draw(0, 128, i)
    appends = [op for op in d["ops"] if op.startswith("+")]
    removals = len(d["ops"]) - len(appends)
    n = length_after(d["ops"])
    assert 1 <= removals <= 3 and n == len(appends) - removals and 1 <= n <= 5
    one, two = (bytes(prompt(128, t, d).tokens).decode() for t in (1, 2))
    assert one.endswith(f"{ASK} {n}") and two.endswith(f"{ASK} {n}")  # one answer for both tiers
    assert re.findall(OPS, two[: two.rfind(ASK)]) == d["ops"]  # in order
    ops1 = re.findall(OPS, one[: one.rfind(ASK)])
    assert len(ops1) == len(d["ops"])  # as many operations, at the same depths
    for a, b in zip(ops1, d["ops"]):  # each kept append as it was; every other operation changes nothing
        assert a == b or a == {"pop": "peek"}.get(b, "?" + b[1:])
    kept = [op for op in ops1 if op.startswith("+")]
    assert len(kept) == n and length_after(ops1) == n and set(kept) <= set(appends)
    assert need(1) == need(2) < 128


class Replayer(torch.nn.Module):
    """Byte logits that put, in the last slot, the length after replaying the operations (``all_ops``), or the number
    of appends."""

    def __init__(self, all_ops: bool):
        super().__init__()
        self.all_ops = all_ops

    def forward(self, x):
        out = torch.zeros(*x.shape, 256)
        for r, row in enumerate(x):
            text = bytes(row.tolist()).decode(errors="replace")
            ops = re.findall(OPS, text[: text.rfind(ASK)])
            n = length_after(ops) if self.all_ops else sum(op.startswith("+") for op in ops)
            out[r, len(text) - 2, ord(str(n))] = 10.0
        return out


class Uniform(torch.nn.Module):
    def forward(self, x):
        return torch.zeros(*x.shape, 256)


class Constant(torch.nn.Module):
    """Byte logits that always say the digit 2 in the last slot (a prior over lengths, no reading at all)."""

    def forward(self, x):
        out = torch.zeros(*x.shape, 256)
        out[:, -2, ord("2")] = 10.0
        return out


class OpsCounter(torch.nn.Module):
    """Byte logits that say how many operations the window holds, less two (right where one removal was drawn): a
    surface count, no replay. Version 2 of the task gave tier 1 fewer operations than tier 2, so such a heuristic
    scored the tiers apart."""

    def forward(self, x):
        out = torch.zeros(*x.shape, 256)
        for r, row in enumerate(x):
            text = bytes(row.tolist()).decode(errors="replace")
            guess = len(re.findall(OPS, text[: text.rfind(ASK)])) - 2
            out[r, len(text) - 2, ord(str(min(9, max(0, guess))))] = 10.0
        return out


@pytest.mark.parametrize("model", [Constant(), OpsCounter()], ids=["constant", "counts-operations"])
def test_a_guess_from_the_surface_scores_alike_in_both_tiers(model):
    task = TASKS.get("list")
    out = task.measure(task_ctx(model, **{**task.options, "trials": 60}), 128)
    assert out["metrics"]["list_t1"] == out["metrics"]["list_t2"] > 0
    assert out["details"]["tier_pairs"] == 0  # draw by draw, not just on average


@pytest.mark.parametrize(
    "model,t1,t2",
    [(Replayer(all_ops=True), 1.0, 1.0), (Replayer(all_ops=False), 1.0, 0.0), (Uniform(), 0.1, 0.1)],
    ids=["replays", "counts-appends", "uniform"],
)
def test_a_replayer_scores_one_and_the_tiers_fall(model, t1, t2):
    task = TASKS.get("list")
    out = task.measure(task_ctx(model, **{**task.options, "trials": 10}), 128)
    assert out["metrics"]["list_t1"] == pytest.approx(t1) and out["metrics"]["list_t2"] == pytest.approx(t2)
    assert out["details"]["tier_order"] == "falls"


def test_list_in_an_outside_tokenizers_tokens(tmp_path):
    pytest.importorskip("transformers")
    from support import invoke, tiny_outside, token_encoder

    model, tok = tiny_outside(tmp_path / "tiny", " ".join(["The grass is green. +ab -ab pop list length: 3"] * 200))
    encode = token_encoder(tok)

    d = draw(0, 256, 4)
    p = prompt(256, 2, d, encode=encode)
    (a, b) = p.answers[0]
    assert (
        len(p.tokens) == 256 and b == 256 and tok.decode(p.tokens[a:b].tolist()).strip() == str(length_after(d["ops"]))
    )
    args = ["--task", "list", "--lengths", "4x", "--trials", "2", "--results", tmp_path / "r"]
    r = invoke("eval", "--hf", model, *args)
    assert r.exit_code == 0, r.output


def test_list_training_documents_answer_the_replayed_length():
    """The training-document kind ``list`` (data/state_tracking.py): the window ends with "list length: N", N is the
    length after replaying its operations, both tiers occur (removals or none), and a window too short is a copy."""
    from pebench.data.needles import training_document

    bg = np.frombuffer((b"The quick brown fox jumps over the lazy dog. " * 4)[:129], dtype=np.uint8)
    with_removals = 0
    for i in range(60):
        text = bytes(training_document(np.random.default_rng([9, i]), bg, (16, 32), {"list": 1})).decode()
        m = re.search(rf"{ASK} (\d)$", text)
        assert m and len(text) == len(bg), text
        ops = re.findall(r"(?:[+-][a-z]+|pop)(?= )", text[: m.start()])
        assert length_after(ops) == int(m.group(1)) >= 1
        with_removals += any(not op.startswith("+") for op in ops)
    assert 10 < with_removals < 50
    short = training_document(np.random.default_rng(1), bg[:24], (4, 8), {"list": 1})
    assert b"list length" not in bytes(short)


def test_the_list_prompts_are_pinned():
    """The prompts of version 3, byte for byte (a change to the form is a new version)."""
    import hashlib

    h = hashlib.sha256()
    for i in range(8):
        for tier in (1, 2):
            h.update(bytes(prompt(128, tier, draw(0, 128, i)).tokens))
    assert h.hexdigest() == PINNED


PINNED = "7642aa92a2e596b25a095995d661771d6444e92db22f22d94610dcfe4a9979d8"
