"""Long work says its cost and keeps talking when the output is a log; short work stays quiet."""

import io

from pebench.util.progress import BarProgress, LogProgress, Progress, fmt_duration, for_stream


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def test_long_work_announces_its_cost_then_a_line_every_interval():
    clock, lines = Clock(), []
    p = LogProgress(lines.append, interval=30, clock=clock)
    p.start("rope L=2048", 1000, "10 windows of 100 tokens", "tokens")
    clock.t += 7  # the first batch: start-up and warm-up, not counted in the rate
    p.update(10)
    assert lines == []
    clock.t += 2
    p.update(30)  # 10 tokens/s from here on: 97 s left, 9 s gone
    assert lines == ["rope L=2048: 10 windows of 100 tokens; about 1m 46s at 10.0 tokens/s"]
    done = 30
    for _ in range(14):  # a batch every 2 s: a heartbeat every 30 s, not every batch
        clock.t += 2
        done += 20
        p.update(done)
    assert len(lines) == 1  # 28 s since the announcement
    clock.t += 2
    p.update(done + 20)
    assert len(lines) == 2
    assert lines[1] == "rope L=2048: 33% (330/1,000 tokens), 39s elapsed, about 1m 07s left"
    p.finish()


def test_short_work_prints_nothing():
    clock, lines = Clock(), []
    p = LogProgress(lines.append, interval=30, clock=clock)
    p.start("x", 100, "cost", "tokens")
    for done in range(10, 101, 10):
        clock.t += 1
        p.update(done)
    assert lines == []


def test_a_resumed_run_estimates_from_the_steps_it_trains_now():
    clock, lines = Clock(), []
    p = LogProgress(lines.append, interval=30, clock=clock)
    p.start("rope", 500, "500 steps", "steps", initial=400)
    clock.t += 10
    p.update(410)
    clock.t += 10
    p.update(420)  # 1 step/s: 80 s left, 100 s in all
    assert lines == ["rope: 500 steps; about 1m 40s at 1.00 steps/s"]


def test_stream_choice_and_durations():
    assert isinstance(for_stream(io.StringIO()), LogProgress)

    class Tty(io.StringIO):
        def isatty(self):
            return True

    bar = for_stream(Tty())
    assert isinstance(bar, BarProgress)
    bar.start("t", 10, "cost", "tokens")
    bar.update(5)
    bar.finish()
    assert [fmt_duration(x) for x in (5, 65, 3725)] == ["5s", "1m 05s", "1h 02m"]


def test_evaluation_reports_its_real_cost(tmp_path):
    """The cost line counts the windows the protocol really runs, and the updates reach the total."""
    import numpy as np
    import torch

    from pebench.eval.scoring import Protocol, score_stream, windows
    from pebench.model.decoder import DecoderLM
    from support import tiny_model_config

    class Record(Progress):
        def __init__(self):
            self.calls = []

        def start(self, *a, **k):
            self.calls.append(("start", a))

        def update(self, done):
            self.calls.append(("update", done))

        def finish(self):
            self.calls.append(("finish",))

    model = DecoderLM(tiny_model_config("rope")).eval()
    stream = np.random.default_rng(0).integers(0, 256, 500).astype(np.uint16)
    proto = Protocol("sliding", stride=4)
    n_windows = len(windows(500, 32, proto)[0])
    rec = Record()
    score_stream(model, stream, 32, proto, 256, torch.device("cpu"), progress=rec, title="rope L=32")
    assert rec.calls[0] == (
        "start",
        (
            "rope L=32",
            n_windows * 32,
            f"{n_windows:,} windows of 32 tokens ({n_windows * 32:,} token positions)",
            "tokens",
        ),
    )
    updates = [c[1] for c in rec.calls if c[0] == "update"]
    assert updates == sorted(updates) and updates[-1] == n_windows * 32 and rec.calls[-1] == ("finish",)


def test_a_piece_slower_than_the_interval_still_gets_a_line_every_interval():
    """One window of 262,144 tokens takes minutes: the heartbeat (``tick``, which a thread calls) says the cost
    before the first window is done, then an estimate from the first window, never more than one line a
    interval, and nothing after the work finished."""
    clock, lines = Clock(), []
    p = LogProgress(lines.append, interval=30, clock=clock)
    p.start("rope L=262144", 4 * 262144, "4 windows of 262,144 tokens", "tokens")
    clock.t += 29
    p.tick()
    assert lines == []
    clock.t += 1
    p.tick()
    p.tick()
    assert lines == ["rope L=262144: 4 windows of 262,144 tokens; 30s elapsed, the first piece not done"]
    clock.t += 70  # the first window took 100 s
    p.update(262144)
    clock.t += 30
    p.tick()
    assert (
        lines[-1]
        == "rope L=262144: 25% (262,144/1,048,576 tokens), 2m 10s elapsed, about 4m 30s left (from the first piece)"
    )
    p.finish()
    clock.t += 300
    p.tick()
    assert len(lines) == 2


def test_the_log_heartbeat_runs_by_itself_on_a_thread():
    import time

    lines = []
    p = LogProgress(lines.append, interval=0.05, beat=0.01)
    p.start("slow", 10, "one piece", "pieces")
    time.sleep(0.3)  # no update at all: the thread still writes
    p.finish()
    assert lines and lines[0].startswith("slow: one piece;")


def test_a_stream_that_raises_stops_its_heartbeat():
    """score_stream interrupted mid-cell (a kill, an error) finishes its progress: the heartbeat thread stops
    instead of writing to a log that may be closed by then."""
    import time

    import numpy as np
    import pytest
    import torch

    from pebench.eval.scoring import Protocol, score_stream

    class Failing(torch.nn.Module):
        def forward(self, x):
            time.sleep(0.1)
            raise KeyboardInterrupt

    lines = []
    p = LogProgress(lines.append, interval=0.02, beat=0.01)
    stream = np.zeros(400, dtype=np.uint8)
    with pytest.raises(KeyboardInterrupt):
        score_stream(Failing(), stream, 64, Protocol(), 64, torch.device("cpu"), progress=p, title="cell")
    assert lines and not p.active  # it beat while the model ran, and stopped with it
    p.thread.join(timeout=1)
    assert not p.thread.is_alive()
    n = len(lines)
    time.sleep(0.1)
    assert len(lines) == n
