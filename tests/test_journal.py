"""A long evaluation cell resumes from its journal (scoring.Journal): a stream stopped after some batches and resumed
gives exactly the numbers of a stream that never stopped (the same float64 sums added in the same order), scoring
only the batches it had not; a journal of another measurement, or any journal without --resume, is not read; through
``pebench eval --resume`` the cell's record equals an uninterrupted one's and the journal is gone once it is
written."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import pebench.eval.scoring as scoring
from pebench.eval.scoring import Journal, Protocol, score_stream
from support import invoke, write_micro

STREAM = np.random.default_rng(0).integers(0, 256, 2000).astype(np.uint8)


class Counting(torch.nn.Module):
    """Fixed random logits from the input (a seeded table), counting its calls; stops (KeyboardInterrupt) at call
    ``stop``."""

    def __init__(self, stop=None):
        super().__init__()
        self.table = torch.nn.Embedding(256, 256)
        torch.nn.init.normal_(self.table.weight, generator=torch.Generator().manual_seed(1))
        self.calls, self.stop = 0, stop

    def forward(self, x):
        self.calls += 1
        if self.calls == self.stop:
            raise KeyboardInterrupt
        return self.table(x) + 0.01 * torch.arange(x.shape[1])[None, :, None]


def _score(model, journal=None):
    far = np.zeros(len(STREAM), dtype=bool)
    far[::3] = True
    args = (STREAM, 128, Protocol(), 256, torch.device("cpu"))
    return score_stream(model, *args, far=far, nbytes=np.ones(len(STREAM), dtype=np.int64), journal=journal)


def test_a_stopped_stream_resumes_to_exactly_the_uninterrupted_numbers(tmp_path):
    whole = _score(Counting())
    key = {"cell": "a"}
    with pytest.raises(KeyboardInterrupt):
        _score(Counting(stop=5), Journal(tmp_path / "j", key, resume=True, every_s=0))
    kept = json.loads((tmp_path / "j").read_text())
    assert kept["key"] == key and kept["sums"]["next"] == 4 * 2  # four batches of two windows done
    model = Counting()
    resumed = _score(model, Journal(tmp_path / "j", key, resume=True, every_s=0))
    assert resumed == whole
    assert model.calls == -(-whole["windows"] // 2) - 4  # only the batches not yet scored


@pytest.mark.parametrize("key,resume", [({"cell": "b"}, True), ({"cell": "a"}, False)], ids=["other-key", "no-resume"])
def test_a_journal_of_another_cell_or_without_resume_is_not_read(tmp_path, key, resume):
    with pytest.raises(KeyboardInterrupt):
        _score(Counting(stop=5), Journal(tmp_path / "j", {"cell": "a"}, resume=True, every_s=0))
    model = Counting()
    assert _score(model, Journal(tmp_path / "j", key, resume=resume, every_s=0)) == _score(Counting())
    assert model.calls == -(-_score(Counting())["windows"] // 2)  # every batch scored again


def test_eval_resume_goes_on_from_the_journal_and_removes_it(tmp_path, monkeypatch):
    cfg = write_micro(tmp_path, eval={"batch_tokens": 64})
    res = tmp_path / "res"
    assert invoke("train", "--pe", "rope", "--config", cfg, "--results", res).exit_code == 0
    args = ["eval", "--task", "ppl", "--lengths", "2x", "--rope-scaling", "none", "--results", res]
    assert invoke(*args).exit_code == 0
    (clean,) = list((res / "records").rglob("*L*.json"))
    whole = json.loads(clean.read_text())
    clean.unlink()

    real, calls = scoring._window_losses, {"n": 0}

    def stopping(*a, **k):
        calls["n"] += 1
        if calls["n"] == 6:
            raise KeyboardInterrupt
        return real(*a, **k)

    import pebench.eval.evaluate as evaluate

    made = evaluate._journal

    def every_batch(*a):  # a journal written after every batch (the evaluator's waits a minute between writes)
        j = made(*a)
        j.every_s = 0.0
        return j

    monkeypatch.setattr(scoring, "_window_losses", stopping)
    monkeypatch.setattr(evaluate, "_journal", every_batch)
    assert invoke(*args).exit_code != 0
    (journal,) = list((res / "records").rglob("*.journal"))
    per_batch = json.loads(journal.read_text())["plan"]["per_batch"]
    assert json.loads(journal.read_text())["sums"]["next"] == 5 * per_batch  # five batches kept
    calls["n"] = 0

    def counting(*a, **k):
        calls["n"] += 1
        return real(*a, **k)

    monkeypatch.setattr(scoring, "_window_losses", counting)
    assert invoke(*args, "--resume").exit_code == 0
    assert calls["n"] == -(-whole["details"]["windows"] // per_batch) - 5  # only the batches not yet scored
    rec = json.loads(clean.read_text())
    assert rec["metrics"] == whole["metrics"] and rec["details"]["window_losses"] == whole["details"]["window_losses"]
    assert not list((res / "records").rglob("*.journal"))
    done = rec["provenance"]["resumed"]  # the time of both processes, and what each did
    assert done["windows_before"] == 5 * per_batch and done["seconds_before"] > 0
    assert rec["provenance"]["wall_s"] == pytest.approx(done["seconds_before"] + done["segment_s"], abs=2e-3)
    assert "resumed" not in whole["provenance"]


def test_a_journal_keeps_the_seconds_of_every_process_and_an_older_one_says_it_does_not_know(tmp_path, monkeypatch):
    clock = {"t": 100.0}
    monkeypatch.setattr(scoring.time, "monotonic", lambda: clock["t"])
    first = Journal(tmp_path / "j", {"cell": "a"}, resume=True, every_s=0)
    clock["t"] += 30.0
    first.save({"p": 1}, {"next": 4})
    assert first.resumed() is None and json.loads((tmp_path / "j").read_text())["seconds"] == 30.0
    second = Journal(tmp_path / "j", {"cell": "a"}, resume=True, every_s=0)
    assert second.load({"p": 1}) == {"next": 4}
    clock["t"] += 12.5
    assert second.resumed() == {"windows_before": 4, "seconds_before": 30.0} and second.seconds() == 42.5
    old = {"key": {"cell": "a"}, "plan": {"p": 1}, "sums": {"next": 6}}  # written before journals kept time
    (tmp_path / "j").write_text(json.dumps(old))
    third = Journal(tmp_path / "j", {"cell": "a"}, resume=True, every_s=0)
    assert third.load({"p": 1}) == {"next": 6}
    assert third.resumed() == {"windows_before": 6, "seconds_before": None} and third.seconds() is None
