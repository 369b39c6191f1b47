"""The aggregation training documents (``train.needle_kinds: {count: W, common: W}``, data/aggregation.py): a count
window ends with "count of @WORD: N" and WORD is marked exactly N times before it; a common window ends with
"most marked: @WORD" and WORD is marked more often than any other; both tiers occur, over filler and over the row's
own text; a window too short for either tier is a copy window instead; the tasks' prompts are unchanged by the move
of their form into data (pinned bytes)."""

from __future__ import annotations

import collections
import hashlib
import re

import numpy as np
import pytest

from pebench.data.needles import training_document
from pebench.eval.tasks.common import draw as common_draw
from pebench.eval.tasks.common import prompt as common_prompt
from pebench.eval.tasks.count import draw as count_draw
from pebench.eval.tasks.count import prompt as count_prompt

BG = np.frombuffer((b"The quick brown fox jumps over the lazy dog. " * 4)[:129], dtype=np.uint8)


def _doc(kind: str, i: int) -> str:
    return bytes(training_document(np.random.default_rng([7, i]), BG, (16, 32), {kind: 1})).decode()


def test_count_documents_answer_their_marks():
    tiers = collections.Counter()
    for i in range(60):
        text = _doc("count", i)
        m = re.search(r"count of @([a-z]+): (\d)$", text)
        assert m and len(text) == len(BG), text
        word, n = m.group(1), int(m.group(2))
        body = text[: m.start()]
        assert len(re.findall(rf"@{word}(?![a-z])", body)) == n and 1 <= n <= 5
        others = {w for w in re.findall(r"@([a-z]+)", body) if w != word}
        tiers[len(others)] += 1
        for w in others:  # tier 2: the other word marked as often
            assert len(re.findall(rf"@{w}(?![a-z])", body)) == n
    assert tiers[0] > 10 and tiers[1] > 10


def test_common_documents_answer_the_most_marked_word():
    rares = collections.Counter()
    for i in range(60):
        text = _doc("common", i)
        m = re.search(r"most marked: @([a-z]+)$", text)
        assert m and len(text) == len(BG), text
        counts = collections.Counter(re.findall(r"@([a-z]+)", text[: m.start()]))
        top = counts.pop(m.group(1))
        assert top == 4 and len(counts) == 2 and max(counts.values()) < top
        rares[max(counts.values())] += 1
    assert rares[1] > 10 and rares[3] > 10


@pytest.mark.parametrize("kind", ["count", "common"])
def test_a_window_too_short_gets_a_copy_document(kind):
    bg = BG[:24]
    out = training_document(np.random.default_rng(1), bg, (4, 8), {kind: 1})
    assert out.shape == bg.shape and b"@" not in bytes(out)


def test_the_tasks_prompts_are_pinned():
    h = hashlib.sha256()
    for i in range(8):
        for tier in (1, 2):
            h.update(bytes(count_prompt(128, tier, count_draw(0, 128, i)).tokens))
            h.update(bytes(common_prompt(128, tier, common_draw(0, 128, i)).tokens))
    assert h.hexdigest() == PINNED


PINNED = "e518296d99b6b4beea339916e5210d82b0726f42df2ed8ae3bea9239b6e65386"  # the prompts before the move
