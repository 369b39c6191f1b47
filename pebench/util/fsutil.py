"""Files that are never half-written, a file's hash, and a lock that notices when its owner died."""

from __future__ import annotations

import contextlib
import contextvars
import errno
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Callable, Iterator

from .errors import PebenchError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _umask()


_WRITE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM}


class WriteFailed(PebenchError):
    """A file could not be written (a full disk, a read-only or forbidden folder): the message names the file the
    user knows (never the temp file), why, and what to do; the file as it was before is untouched."""

    def __init__(self, path: Path, e: BaseException):
        no = getattr(e, "errno", None)
        why = (
            "no space left on the device; free some space and run the command again"
            if no in (errno.ENOSPC, errno.EDQUOT)
            or "enforce fail" in str(e)  # torch.save reports a failed write this way
            else "the folder is read-only; choose a writable --results folder"
            if no == errno.EROFS
            else "permission denied; choose a writable --results folder"
            if no in (errno.EACCES, errno.EPERM)
            else f"{getattr(e, 'strerror', None) or str(e).splitlines()[0]}"
        )
        super().__init__(f"cannot write {path}: {why} (the file as it was before is kept)")
        self.path = path


@contextlib.contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temp path in the same folder; on success fsync it and rename it over ``path``. A write that fails
    (``OSError``, or the ``RuntimeError`` torch.save raises for one) is a ``WriteFailed`` naming ``path``."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as e:
        raise WriteFailed(path, e) from e
    os.close(fd)
    os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes it 0600: the file gets the mode open() would give it
    try:
        try:
            yield Path(tmp)
            with open(tmp, "rb+") as f:
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except OSError as e:
            if e.errno not in _WRITE_ERRNOS and e.filename != tmp:  # a failure of what the caller was reading
                raise
            raise WriteFailed(path, e) from e
        except RuntimeError as e:
            if "enforce fail" not in str(e):
                raise
            raise WriteFailed(path, e) from e
        with contextlib.suppress(OSError):  # make the rename itself durable
            dfd = os.open(path.parent, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: Path, obj) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


def atomic_save(path: Path, save: Callable[[Path], None]) -> None:
    with atomic_path(path) as tmp:
        save(tmp)


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes (hex), read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def append_line(path: Path, line: str) -> None:
    """Append one line with a single write (O_APPEND), flushed to disk."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, (line.rstrip("\n") + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError as e:
        return e.errno == errno.EPERM
    return True


class RunLock:
    """An exclusive lock file holding the owner's PID; a lock whose owner is gone is stale and taken over."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.held = False

    def acquire(self) -> "RunLock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                try:
                    pid = int(self.path.read_text().strip() or 0)
                except (OSError, ValueError):
                    pid = 0
                if pid and pid != os.getpid() and _pid_alive(pid):
                    raise PebenchError(
                        f"{self.path.parent.name} is locked by running process {pid} ({self.path}); "
                        "wait for it or choose another --name"
                    ) from None
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.path)  # stale: its owner died
                continue
            with os.fdopen(fd, "w") as f:
                f.write(str(os.getpid()))
            self.held = True
            return self
        raise PebenchError(f"could not take the lock {self.path}")

    def owner_alive(self) -> bool:
        """Whether a live process holds the lock (False: no lock, or its owner died)."""
        try:
            pid = int(self.path.read_text().strip() or 0)
        except (OSError, ValueError):
            return False
        return bool(pid) and _pid_alive(pid)

    def release(self) -> None:
        if self.held:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
            self.held = False

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()


FIGURE_FORMATS = ("png", "pdf", "svg")
_NO_DATE = {"pdf": {"CreationDate": None}, "svg": {"Date": None}}  # the same figure, the same bytes
_FIGURE_FORMAT: contextvars.ContextVar[str] = contextvars.ContextVar("figure_format", default="png")


def check_figure_format(fmt: str) -> str:
    """``fmt`` if it is a figure format pebench writes, else one line naming the ones it does."""
    if fmt not in FIGURE_FORMATS:
        from .errors import UsageError

        raise UsageError(f"--figure-format must be one of {', '.join(FIGURE_FORMATS)}, got {fmt!r}")
    return fmt


@contextlib.contextmanager
def figure_format(fmt: str) -> Iterator[None]:
    """Figures saved inside are written as ``fmt`` (png, pdf or svg: ``report --figure-format``)."""
    check_figure_format(fmt)
    token = _FIGURE_FORMAT.set(fmt)
    try:
        yield
    finally:
        _FIGURE_FORMAT.reset(token)


def figure_suffix() -> str:
    """The suffix figures get now: '.png', or '.pdf' / '.svg' inside ``figure_format``."""
    return "." + _FIGURE_FORMAT.get()


def save_plot(fig, path: Path, dpi: int = 110) -> Path:
    """A matplotlib figure written atomically (tight bounding box) in the figure format in force (PNG unless
    ``figure_format`` says pdf or svg; ``path``'s suffix follows it), then closed. Returns the path written."""
    import matplotlib.pyplot as plt

    fmt = _FIGURE_FORMAT.get()
    path = Path(path).with_suffix("." + fmt)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=fmt, dpi=dpi, bbox_inches="tight", metadata=_NO_DATE.get(fmt))
    plt.close(fig)
    return path
