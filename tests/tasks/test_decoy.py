"""The decoy task: the decoys stand exactly a RoPE wavelength from the needle (start to start; the wavelengths
computed here from 2 pi base^(2i/d), never the task's function), the slowest pair that fits; tier 2's names differ
from the needle's in one letter, tier 1's are other words; a reader of the value bound to the exact name scores 1 in
both tiers, a reader that matches names by their first letters only scores 1 alone and falls with confusable names
(the tiers fall), a uniform model scores exactly chance, 1/3; in an outside tokenizer's tokens the distances hold in
tokens and the slot holds any candidate."""

from __future__ import annotations

import math
import re

import pytest
import torch

from pebench.eval.tasks import TASKS
from pebench.eval.tasks.decoy import draw, plan, prompt
from support import Uniform, task_ctx


def rope_wavelengths(d: int, base: float) -> list[int]:
    return [round(2 * math.pi * base ** (2 * i / d)) for i in range(d // 2)]


@pytest.mark.parametrize("length", [128, 512, 2048])
def test_the_decoys_stand_a_wavelength_from_the_needle_in_both_tiers(length):
    before, after, _ = plan(length, 32, 10000.0)
    waves = rope_wavelengths(32, 10000.0)
    assert before in waves and after in waves and before > after
    for i in range(40):
        d = draw(0, length, i)
        for tier in (1, 2):
            p = prompt(length, tier, d, 32, 10000.0)
            text = bytes(p.tokens).decode()
            assert len(p.tokens) == length and text.endswith(f"{d['names'][0]}: {d['values'][0]}")
            a, s, b = p.inserts
            assert (s - a, b - s) == (before, after)
            assert text[s:].startswith(f"{d['names'][0]}: {d['values'][0]}.")
            names = [m for m in re.findall(r"([a-z]+): \d{5}\.", text)]
            others = [n for n in names if n != d["names"][0]]
            assert len(others) == 2
            diff = [
                sum(x != y for x, y in zip(n, d["names"][0])) if len(n) == len(d["names"][0]) else 9 for n in others
            ]
            assert all(x == 1 for x in diff) if tier == 2 else others == d["names"][1:]


class NameReader(torch.nn.Module):
    """Byte logits that, in the answer slot, predict the value of the needle whose name matches the question's: the
    whole name (``letters`` 0), or its first ``letters`` letters only (the first such needle in the window)."""

    def __init__(self, letters: int = 0):
        super().__init__()
        self.letters = letters

    def forward(self, x):
        out = torch.zeros(*x.shape, 256)
        for r, row in enumerate(x):
            text = bytes(row.tolist()).decode(errors="replace")
            name = re.search(r"([a-z]+):\s\S*$", text[:-5] + "xxxxx").group(1)  # the question's name
            found = re.findall(r"([a-z]+): (\d{5})\.", text)
            want = name if not self.letters else name[: self.letters]
            value = next(v for n, v in found if (n == want if not self.letters else n.startswith(want)))
            start = len(text) - 5
            for j, ch in enumerate(value.encode()):
                out[r, start + j - 1, ch] = 10.0
        return out


def test_a_name_reader_scores_one_a_prefix_reader_falls_with_confusable_names_and_uniform_is_chance():
    task = TASKS.get("decoy")
    opts = {**task.options, "trials": 12}
    exact = task.measure(task_ctx(NameReader(), **opts), 512)["metrics"]
    assert exact == {"decoy_t1": 1.0, "decoy_t2": 1.0}
    prefix = task.measure(task_ctx(NameReader(letters=1), **opts), 512)
    assert prefix["metrics"]["decoy_t1"] > 0.8 and prefix["metrics"]["decoy_t2"] < 0.8
    assert prefix["details"]["tier_order"] == "falls" and prefix["details"]["distances"] == [353, 112]
    uniform = task.measure(task_ctx(Uniform(), **opts), 512)["metrics"]
    assert uniform == {"decoy_t1": pytest.approx(1 / 3), "decoy_t2": pytest.approx(1 / 3)}


def test_decoy_in_an_outside_tokenizers_tokens(tmp_path):
    pytest.importorskip("transformers")
    from support import invoke, tiny_outside, token_encoder

    model, tok = tiny_outside(tmp_path / "tiny", " ".join(["The grass is green. gunuzu: 12345."] * 200), context=128)
    encode = token_encoder(tok)
    before, after, _ = plan(512, 32, 10000.0, encode)
    for i in range(10):
        d = draw(0, 512, i, encode)
        p = prompt(512, 2, d, 32, 10000.0, encode=encode)
        (a, b) = p.answers[0]
        assert len(p.tokens) == 512 and b == 512 and tok.decode(p.tokens[a:b].tolist()).strip() == d["values"][0]
        assert (p.inserts[1] - p.inserts[0], p.inserts[2] - p.inserts[1]) == (before, after)
        assert {len(ids) for ids in p.meta["slot"].values()} == {b - a}
    r = invoke(
        "eval", "--hf", model, "--task", "decoy", "--lengths", "4x", "--trials", "2", "--results", tmp_path / "r"
    )
    assert r.exit_code == 0, r.output
