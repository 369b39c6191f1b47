"""What long work tells whoever runs it: a ``Reporter`` (lines, warnings, errors, each record as it is written, and
the progress of the piece of work under way). The library never prints; it is handed a reporter: the CLI's for the
terminal (``cli.console.reporter``), ``Reporter.for_log`` in a worker or an array task, a collecting one in tests.

Progress, on a terminal: a rich progress bar with an ETA. Anywhere else (a log file, a cluster job): a line with the
cost and an estimate from the measured rate once the first piece of work is done (only for work that will take
longer than the interval), then a line every ``interval`` seconds. Short work prints nothing.
"""

from __future__ import annotations

import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Optional


def fmt_duration(seconds: float) -> str:
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    return f"{s // 3600}h {s % 3600 // 60:02d}m"


class Progress:
    """The interface: ``start`` one piece of work of ``total`` units, ``update`` with units done, ``finish``."""

    def start(self, title: str, total: int, cost: str, unit: str, initial: int = 0) -> None:
        """``initial`` units were done before (a resumed run): they do not count towards the rate."""

    def update(self, done: int, info: str = "") -> None:
        """``info``: a short note on the work so far (training: its loss and speed)."""

    def finish(self) -> None:
        pass


@contextmanager
def tracking(progress: Optional[Progress], title: str, total: int, cost: str, unit: str):
    """``progress`` (None: nothing) started on a piece of work and finished when it ends, raising or not, so that a
    log's heartbeat never outlives the work it reports on (an interrupted cell, a test's stream closed after it)."""
    if progress is None:
        yield None
        return
    progress.start(title, total, cost, unit)
    try:
        yield progress
    finally:
        progress.finish()


def fmt_rate(rate: float) -> str:
    return f"{rate:,.0f}" if rate >= 100 else f"{rate:#.3g}"


class LogProgress(Progress):
    """Lines for a log. The rate is measured from the first update on, so start-up and the first piece of
    work (warm-up, compilation) do not distort the estimate; the cost line comes with the second update, or with
    the first heartbeat where pieces are slower than the interval (one window of 262,144 tokens). ``tick``, which
    a daemon thread calls every ``beat`` seconds (None: no thread, as in tests that drive the clock), writes a line
    once ``interval`` seconds pass without one, so long work is never silent between its updates."""

    def __init__(
        self,
        write: Callable[[str], None],
        interval: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        beat: Optional[float] = None,
    ):
        self.write, self.interval, self.clock, self.beat = write, interval, clock, beat
        self.lock = threading.Lock()
        self.thread: Optional[threading.Thread] = None
        self.start("", 0, "", "")

    def start(self, title: str, total: int, cost: str, unit: str, initial: int = 0) -> None:
        with self.lock:
            self.title, self.total, self.cost, self.unit = title, total, cost, unit
            self.t0 = self.last = self.clock()
            self.ref = None  # (time, done) of the first update
            self.rate: Optional[float] = None  # units/s since the first update
            self.done = self.initial = initial
            self.announced = False
            self.active = bool(title) and total > 0
        if self.active and self.beat and (self.thread is None or not self.thread.is_alive()):
            self.thread = threading.Thread(target=self._beat, daemon=True)
            self.thread.start()

    def update(self, done: int, info: str = "") -> None:
        with self.lock:
            self._update(done, info)

    def _update(self, done: int, info: str) -> None:
        now = self.clock()
        if done <= self.initial:
            return
        self.done = max(self.done, done)
        if self.ref is None:
            self.ref = (now, done)
            return
        if now <= self.ref[0] or done <= self.ref[1]:
            return
        self.rate = (done - self.ref[1]) / (now - self.ref[0])
        elapsed, left = now - self.t0, (self.total - done) / self.rate
        if not self.announced:
            self.announced = True
            if elapsed + left > self.interval:  # say what it will cost, from the measured rate
                self.write(
                    f"{self.title}: {self.cost}; about {fmt_duration(elapsed + left)} at {fmt_rate(self.rate)} "
                    f"{self.unit}/s"
                )
                self.last = now
                return
        if now - self.last >= self.interval and done < self.total:
            self.write(self._line(now, left) + (f"; {info}" if info else ""))
            self.last = now

    def _line(self, now: float, left: Optional[float]) -> str:
        eta = f", about {fmt_duration(left)} left" if left is not None else ""
        return (
            f"{self.title}: {100 * self.done / self.total:.0f}% ({self.done:,}/{self.total:,} {self.unit}), "
            f"{fmt_duration(now - self.t0)} elapsed{eta}"
        )

    def tick(self) -> None:
        """A heartbeat: a line where ``interval`` seconds passed without one. Before the first piece is done it
        says the cost; after it, an estimate (from the first piece alone, warm-up included, until a second one
        gives the rate)."""
        with self.lock:
            now = self.clock()
            if not self.active or now - self.last < self.interval or self.done >= self.total:
                return
            self.last = now
            if self.ref is None:
                self.announced = True
                self.write(
                    f"{self.title}: {self.cost}; {fmt_duration(now - self.t0)} elapsed, the first piece not done"
                )
                return
            if self.rate is None:  # from the first piece alone, less the time since it ended
                rate = (self.ref[1] - self.initial) / max(self.ref[0] - self.t0, 1e-9)
                left = (self.total - self.done) / rate - (now - self.ref[0])
            else:
                left = (self.total - self.done) / self.rate
            self.announced = True
            self.write(self._line(now, max(left, 0.0)) + ("" if self.rate else " (from the first piece)"))

    def finish(self) -> None:
        with self.lock:
            self.active = False

    def _beat(self) -> None:
        while self.active:
            time.sleep(self.beat)
            self.tick()


class BarProgress(Progress):
    """A transient rich bar with an ETA on the terminal."""

    def __init__(self, stream=None):
        from rich.console import Console

        self.console = Console(file=stream or sys.stderr)
        self.bar, self.task = None, None

    def start(self, title: str, total: int, cost: str, unit: str, initial: int = 0) -> None:
        from rich.progress import (
            BarColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )
        from rich.progress import (
            Progress as RichProgress,
        )

        self.finish()
        self.bar = RichProgress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn(cost, markup=False),
            TextColumn("{task.fields[info]}", markup=False),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=self.console,
            transient=True,
        )
        self.bar.start()
        self.task = self.bar.add_task(title, total=total, completed=initial, info="")

    def update(self, done: int, info: str = "") -> None:
        if self.bar is not None:
            self.bar.update(self.task, completed=done, info=info)

    def finish(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


def for_stream(stream=None, interval: float = 30.0) -> Progress:
    """A bar where ``stream`` (default stderr) is a terminal, a log heartbeat elsewhere."""
    stream = stream or sys.stderr
    if stream.isatty():
        return BarProgress(stream)

    def write(line: str) -> None:
        print(line, file=stream, flush=True)

    return LogProgress(write, interval, beat=1.0)


def _out(line: str) -> None:
    print(line, flush=True)


def _err(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _ignore(_record: dict) -> None:
    pass


@dataclass
class Reporter:
    """What a command's work tells its user: ``echo`` a line (stdout), ``warn`` a line (stderr), ``record`` each
    record as it is written, ``progress`` of the piece of work under way; ``on_error`` takes a failure that lets the
    rest go on (default: an ``error:`` line through ``warn``)."""

    echo: Callable[[str], None] = _out
    warn: Callable[[str], None] = _err
    record: Callable[[dict], None] = _ignore
    progress: Progress = field(default_factory=Progress)
    on_error: Optional[Callable[[str], None]] = None

    def error(self, message: str) -> None:
        if self.on_error is not None:
            self.on_error(message)
        else:
            self.warn(f"error: {message}")

    @classmethod
    def quiet(cls) -> "Reporter":
        """Says nothing (a torchrun rank other than 0)."""
        return cls(echo=_ignore, warn=_ignore)

    @classmethod
    def for_log(cls, record: Callable[[dict], None] = _ignore, on_error=None) -> "Reporter":
        """Lines on stdout, heartbeats on stderr: a worker's or an array task's log."""
        return cls(record=record, progress=for_stream(), on_error=on_error)
