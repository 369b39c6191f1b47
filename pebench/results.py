"""The results folder: runs, records and their provenance. The record is the one contract between
measuring (``evaluate``) and reporting (``report``); its fields are listed in ``RECORD_FIELDS``."""

from __future__ import annotations

import gzip
import json
import os
import platform
import re
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator, Optional

import yaml

from . import __version__
from .util.errors import PebenchError, UsageError
from .util.fsutil import RunLock, append_line, atomic_write_json, file_sha256
from .util.yamlio import load_yaml

SCHEMA_VERSION = 2  # 2: the task, metrics, intervals and details fields (1: perplexity only, upgraded on reading)
RECORD_FIELDS = {
    "schema": "record schema version",
    "task": "evaluation task (ppl, passkey, copy, ...; `pebench list` shows them)",
    "run": "run name (folder under runs/)",
    "scheme": "positional encoding",
    "variant": "what the evaluation changed beside the run ('none': nothing): a RoPE scaling, logit scale, window",
    "label": "row name in reports: scheme[+variant][ ftN for fine-tuned runs]",
    "seed": "training seed",
    "protocol": "ppl: nonoverlap | sliding | fixed; passkey: filler | corpus (the haystack); copy: text",
    "protocol_params": "settings that key the record: stride (sliding), targets (fixed), trials, string_length, ...; "
    "max_tokens when --max-tokens was given to a task that reads the evaluation stream (ppl, copy)",
    "length": "evaluation window length in tokens",
    "train_context": "training context of the run",
    "multiple": "length / train_context",
    "status": "ok | undefined (the scheme cannot represent this length)",
    "reason": "why a record is undefined",
    "metrics": "the task's metrics: {name: value} (ppl, ppl_far, bpb, loss; passkey_exact, ...), null if undefined",
    "intervals": "95% intervals of metrics measured over trials: {name: [lo, hi]}",
    "details": "the task's own fields (below), e.g. per-position loss, per-depth cells",
    "pe_state": "the scheme's own evaluation-time settings at this length, from its describe() (RoPE: variant, "
    "factor, attention_factor); absent for schemes that report none",
    "task_version": "version of the task's prompts and scoring; records of another version are never mixed in",
    "provenance": "pebench/torch version, the git commit it was evaluated at and whether that tree was clean, the "
    "commit its model trained at (train_commit; train_commits where a resumed run trained at several), whether every "
    "training tree was clean (train_tree_clean), the checkpoint's SHA-256 (checkpoint_sha256; 'not recorded' for runs "
    "trained before pebench logged them), device, steps, params, corpus, fingerprints, timing",
    "created": "when the record was written (UTC, ISO 8601)",
    "split": "validation | test: the documents the stream was taken from",
    "chance": "each metric's chance level here, what a uniform next-token guess scores: {name: value} (ppl: the "
    "vocabulary size; passkey_digit: 0.1; passkey_token: 1/V); absent in records written before it",
}
# Every other field is in every record: `pe_state` only for schemes that describe one; `split` and `task_version`
# are absent from records written before they existed (validation split; version 1).
OPTIONAL_RECORD_FIELDS = frozenset({"pe_state", "split", "task_version", "chance"})
EVAL_SPLITS = ("validation", "test")
CHECKPOINT = "checkpoint.pt"  # a run's weights, optimizer and RNG state, in its folder
_V1_DETAILS = ("tokens_scored", "windows", "position_buckets")
RECORD_V1 = [
    k for k in RECORD_FIELDS if k not in ("task", "metrics", "intervals", "details", "pe_state", "task_version")
] + ["loss", "ppl", "bpb", *_V1_DETAILS]


def upgrade_record(rec: dict) -> dict:
    """A schema-1 record (perplexity only, metrics at the top level) in the schema-2 shape."""
    out = {k: v for k, v in rec.items() if k not in ("loss", "ppl", "bpb") + _V1_DETAILS}
    out.update(
        schema=SCHEMA_VERSION,
        task="ppl",
        metrics={"ppl": rec.get("ppl"), "ppl_far": None, "bpb": rec.get("bpb"), "loss": rec.get("loss")},
        intervals={},
        details={k: rec.get(k) for k in _V1_DETAILS},
    )
    return out


def upgrade_fields(rec: dict) -> dict:
    """Older schema-2 records in today's shape: the RoPE-only ``rope`` key became the scheme's ``pe_state``."""
    if "rope" in rec:
        rec = {("pe_state" if k == "rope" else k): v for k, v in rec.items()}
    return rec


def check_record_fields(rec: dict) -> None:
    """The writer's guard on the record's own fields: exactly the documented ones (``pe_state`` only where the
    scheme describes one). A task checks its metrics and details itself (``Task.check_record``)."""
    missing = set(RECORD_FIELDS) - OPTIONAL_RECORD_FIELDS - set(rec)
    unknown = set(rec) - set(RECORD_FIELDS)
    if missing or unknown:
        raise ValueError(
            f"record fields do not match RECORD_FIELDS: missing {sorted(missing)}, unknown {sorted(unknown)}"
        )


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _git(*args: str, cwd: Optional[Path] = None) -> Optional[str]:
    """git's output in the checkout pebench runs from, or in ``cwd`` (None: no git, or not a checkout)."""
    try:
        out = subprocess.run(
            ["git", *args], cwd=cwd or Path(__file__).parent, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def git_commit() -> Optional[str]:
    return (_git("rev-parse", "HEAD") or "").strip() or None


def git_clean() -> Optional[bool]:
    """Whether the checkout's tree is the commit's: no tracked file changed and no untracked file git does not
    ignore (None: not a checkout, e.g. an installed wheel)."""
    out = _git("status", "--porcelain")
    return None if out is None else not out.strip()


def environment(device: str) -> dict:
    import torch

    return {
        "pebench_version": __version__,
        "git_commit": git_commit(),
        "git_clean": git_clean(),
        "torch_version": torch.__version__,
        "python": platform.python_version(),
        "device": device,
        "host": platform.node(),
        "threads": torch.get_num_threads(),  # CPU floating-point results depend on it
    }


def peak_rss_mb() -> Optional[float]:
    """The peak resident memory of this process so far, in MiB (None where the platform does not say): a record
    written after its cell was measured names the most the process has held, the model and that cell included."""
    try:
        import resource
    except ImportError:  # Windows
        return None
    kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # Linux: KiB (macOS: bytes)
    return round(kib / (2**20 if sys.platform == "darwin" else 1024), 1)


NOT_RECORDED = "not recorded"
TRAINING_LOG = "training.jsonl"  # a run's training segments, one line each: the commit and tree it trained from


def training_provenance(run_dir: Path) -> dict:
    """What a record says of the training behind it: the commit its model trained at (the last segment's; every
    segment's where a resumed run trained at several), whether every segment's tree was clean, and the
    checkpoint's SHA-256. A run trained before pebench logged its segments says "not recorded", never a guess."""
    ckpt = run_dir / CHECKPOINT
    out = {"checkpoint_sha256": file_sha256(ckpt) if ckpt.exists() else NOT_RECORDED}
    log = run_dir / TRAINING_LOG
    segments = []
    if log.exists():
        for line in log.read_text().splitlines():
            try:
                segments.append(json.loads(line))
            except ValueError:
                continue
    commits = [s.get("git_commit") for s in segments]
    if not segments or not all(isinstance(c, str) for c in commits):
        return {**out, "train_commit": NOT_RECORDED, "train_tree_clean": NOT_RECORDED}
    cleans = [s.get("git_clean") for s in segments]
    clean = NOT_RECORDED if any(c is None for c in cleans) else all(cleans)
    distinct = list(dict.fromkeys(commits))
    return {
        **out,
        "train_commit": distinct[-1],
        **({"train_commits": distinct} if len(distinct) > 1 else {}),
        "train_tree_clean": clean,
    }


def committed_set(path: Path | str) -> Optional[Path]:
    """The committed result set that holds ``path``: the path itself or the nearest folder above it that holds a
    claims file or packed records (None: outside every set)."""
    p = Path(path).resolve()
    for d in (p, *p.parents):
        if (d / CLAIMS_FILE).is_file() or (d / PACKED_RECORDS).is_file():
            return d
    return None


def guard_target(path: Path | str, flag: str) -> Path:
    """The one check every write route makes before it writes ``path`` (a folder or a file): never inside a
    committed result set, never over a file git tracks. A refusal is one line naming the set and the flag that
    chooses another place; nothing is written."""
    p = Path(path)
    if (owner := committed_set(p)) is not None:
        raise UsageError(
            f"{p} is in the committed result set {owner} (it holds {CLAIMS_FILE} or {PACKED_RECORDS}): nothing "
            f"written; choose another place with {flag} (`pebench pack {owner} --update-set` adds records to it)"
        )
    if p.is_file() and _git("ls-files", "--error-unmatch", p.name, cwd=p.resolve().parent) is not None:
        raise UsageError(f"{p} is a file git tracks: nothing written; choose another place with {flag}")
    return p


def guard_file(path: Path | str, flag: str) -> Path:
    """``guard_target`` for a single file a command writes (a script, a table): its folder must exist already, so
    a mistyped path never makes folders (at the filesystem root, say)."""
    p = guard_target(path, flag)
    if not p.parent.is_dir():
        raise UsageError(f"{p}: no such folder {p.parent}; check {flag}")
    return p


class ResultsDir:
    def __init__(self, root: Path | str):
        self.root = Path(root)

    # folders
    @property
    def runs(self) -> Path:
        return self.root / "runs"

    @property
    def records(self) -> Path:
        return self.root / "records"

    @property
    def cache(self) -> Path:
        return self.root / "cache"

    def run_dir(self, name: str) -> Path:
        return self.runs / check_run_name(name)

    def existing(self) -> "ResultsDir":
        """The folder, refused in one line when it does not exist (a mistyped --results is called missing)."""
        if not self.root.is_dir():
            raise UsageError(f"no results folder {self.root}; check --results (pebench list shows what a folder holds)")
        return self

    def ensure_writable(self, flag: str = "--results") -> "ResultsDir":
        """Fail fast where nothing may or could be written: a folder inside a committed result set is refused
        (``guard_target``: its evidence is packed and its runs are not kept there; write elsewhere and pack the
        records in); the folder, or where it does not exist yet its nearest existing parent, is probed without
        creating anything (a command that then fails on bad input leaves no empty folder behind; the first file
        written creates the folder)."""
        guard_target(self.root, flag)
        here = self.root
        while not here.exists() and here.parent != here:
            here = here.parent
        try:
            if not here.is_dir():
                raise NotADirectoryError(20, "Not a directory")
            probe = here / f".write-test-{os.getpid()}"
            probe.write_text("")
            probe.unlink()
        except OSError as e:
            raise PebenchError(f"results folder {self.root} is not writable: {e.strerror or e}") from e
        return self

    # runs
    def run_names(self) -> list[str]:
        if not self.runs.is_dir():
            return []
        return sorted(p.name for p in self.runs.iterdir() if (p / "config.yaml").exists())

    def status(self, name: str) -> dict:
        p = self.run_dir(name) / "status.json"
        if not p.exists():
            return {"state": "missing"}
        try:
            return json.loads(p.read_text())
        except ValueError:
            return {"state": "unknown"}

    def state(self, name: str) -> str:
        """The run's state: missing, running, interrupted, failed, finished (or unknown for a damaged file)."""
        return self.status(name).get("state", "unknown")

    def shown_state(self, name: str) -> str:
        """The state as ``list`` shows it, checked against the folder: a "running" run whose process is gone (killed,
        or stopped by a full disk) is "stopped"; a finished run whose checkpoint was deleted says so."""
        state = self.state(name)
        if state == "running" and not RunLock(self.run_dir(name) / ".lock").owner_alive():
            return "stopped (its process is gone; --resume continues it)"
        if state == "finished" and not (self.run_dir(name) / CHECKPOINT).exists():
            return "finished (checkpoint missing: it cannot be evaluated)"
        return state

    def runs_in(self, state: str) -> list[str]:
        """The runs in one state, by name."""
        return [r for r in self.run_names() if self.state(r) == state]

    def log_training_segment(self, name: str, step: int, fresh: bool) -> None:
        """One line in the run's training log for the segment that starts now at ``step``: the commit and whether
        its tree was clean (``fresh``: a new run, whose log starts over)."""
        path = self.run_dir(name) / TRAINING_LOG
        if fresh:
            path.unlink(missing_ok=True)
        line = {"from_step": step, "git_commit": git_commit(), "git_clean": git_clean(), "started": now()}
        append_line(path, json.dumps(line))

    def set_status(self, name: str, **fields) -> None:
        atomic_write_json(self.run_dir(name) / "status.json", {**fields, "updated": now()})

    def run_config(self, name: str):
        from .config import config_from_dict

        p = self.run_dir(name) / "config.yaml"
        if not p.exists():
            if self.run_dir(name).is_dir():  # a folder under runs/ that is not a run (nothing trained there)
                raise UsageError(
                    f"{self.run_dir(name)} has no config.yaml: it is not a run (a run's folder is written by `pebench "
                    f"train`); runs: {', '.join(self.run_names()) or 'none'}"
                )
            raise UsageError(f"no run named {name!r} in {self.runs}; runs: {', '.join(self.run_names()) or 'none'}")
        try:
            data = load_yaml(p.read_text())
        except (OSError, yaml.YAMLError) as e:
            first = (str(e).splitlines() or [type(e).__name__])[0]
            raise PebenchError(
                f"run {name!r}: its config.yaml is damaged ({first}); train it again with --overwrite"
            ) from None
        if not isinstance(data, dict):
            raise PebenchError(f"run {name!r}: its config.yaml is not a config; train it again with --overwrite")
        meta = data.pop("run", {})
        return config_from_dict(data, name=data.get("name", "custom")), meta

    def run_precision(self, name: str, device: str = "cpu") -> str:
        """The precision run ``name`` trained in, from its config's run section; a run from before that record
        trained as pebench then did: bf16 on CUDA, fp32 on the CPU (the device its status names, else ``device``).
        The one reading of a run's precision (a record's is :func:`record_precision`)."""
        meta = self.run_config(name)[1]
        dev = str(self.status(name).get("env", {}).get("device", device))
        return meta.get("precision") or ("bf16" if dev.startswith("cuda") else "fp32")

    def learning_curves(self) -> list[dict]:
        """Every learning-curve point (``train.eval_every``) of every run: run, scheme, seed, step, training
        tokens and ppl by length. Lines cut short by a kill are skipped."""
        out = []
        for name in self.run_names():
            log = self.run_dir(name) / "metrics.jsonl"
            if not log.exists():
                continue
            try:
                cfg = load_yaml((self.run_dir(name) / "config.yaml").read_text())
            except (OSError, yaml.YAMLError):
                continue
            for line in log.read_text().splitlines():
                try:
                    x = json.loads(line)
                except ValueError:
                    continue
                if isinstance(x, dict) and "curve" in x:
                    out.append(
                        {
                            "run": name,
                            "scheme": cfg["model"]["pe"],
                            "seed": cfg["train"]["seed"],
                            "step": x["step"],
                            "tokens": x["tokens"],
                            "curve": x["curve"],
                        }
                    )
        return out

    # records
    def record_path(self, rec: dict) -> Path:
        label = rec["label"].replace(" ", "_").replace("+", "-").replace(":", "_").replace("=", "")
        split = "" if rec.get("split", "validation") == "validation" else f"__{rec['split']}"
        task = "" if rec.get("task", "ppl") == "ppl" else f"{rec['task']}__"  # ppl keeps the schema-1 names
        return self.records / rec["run"] / f"{task}{label}__{protocol_key(rec)}{split}__L{rec['length']}.json"

    def write_record(self, rec: dict) -> Path:
        check_record_fields(rec)
        path = self.record_path(rec)
        atomic_write_json(path, rec)
        return path

    @property
    def packed(self) -> Path:
        return self.root / PACKED_RECORDS

    def iter_records(self, skipped: Optional[list] = None, runs: Optional[list] = None) -> Iterator[dict]:
        """Every record under ``records/`` and in the packed ``records.jsonl.gz`` beside it (of the named ``runs``
        only, if given; a loose file replaces the packed record of the same measurement). A file or line that
        cannot be used (cut short, not JSON, another schema version, fields missing) is never fatal: it is
        appended to ``skipped`` as (path, reason)."""
        seen: set = set()
        for where, text in self._loose_texts(runs) + self._packed_texts():
            rec, reason = read_record(text)
            if reason is not None:
                if skipped is not None:
                    skipped.append((where, reason))
            elif (runs is None or rec["run"] in runs) and (key := self._identity(rec)) not in seen:
                seen.add(key)
                yield rec

    def _identity(self, rec: dict) -> tuple:
        """What makes a record one measurement: its path, and the precision its model trained in (a pack may hold
        the same run name trained in fp32 and in bf16: two draws, never one replacing the other; records from before
        the precision was recorded trained in fp32)."""
        return self.record_path(rec), record_precision(rec)

    def _packed_texts(self) -> list[tuple]:
        if not self.packed.is_file():
            return []
        try:
            lines = gzip.decompress(self.packed.read_bytes()).decode("utf-8").splitlines()
        except (OSError, EOFError, UnicodeDecodeError) as e:
            return [(self.packed, f"<packed records damaged ({e})>")]
        return [(f"{self.packed}:{i + 1}", line) for i, line in enumerate(lines)]

    def _loose_texts(self, runs: Optional[list]) -> list[tuple]:
        if not self.records.is_dir():
            return []
        folders = [self.records / r for r in runs] if runs is not None else [self.records]
        out = []
        for p in sorted(x for f in folders if f.is_dir() for x in f.rglob("*.json")):
            try:
                out.append((p, p.read_text()))
            except OSError as e:
                out.append((p, f"<unreadable ({e.strerror or e})>"))
        return out

    def pack(self, dest: Path, runs: Optional[list] = None) -> int:
        """Write every usable record (of ``runs``, if given) into one compact, byte-reproducible
        ``records.jsonl.gz`` at ``dest`` (sorted; gzip without a timestamp); returns the number of records."""
        return pack_records([self], dest, runs)


def collect_records(sources: list[ResultsDir], runs: Optional[list] = None) -> list[dict]:
    """Every usable record of several results folders (loose and packed; of ``runs``, if given), sorted: what
    ``pack_records`` writes. A measurement that several sources hold is kept once, from the first."""
    seen, recs, skipped = set(), [], []
    for src in sources:
        for rec in src.iter_records(skipped, runs=runs):
            if (key := src._identity(rec)[1:] + (str(src.record_path(rec).relative_to(src.root)),)) not in seen:
                seen.add(key)
                recs.append(rec)
    if skipped:  # a pack holds all the evidence or none: a record it cannot read is named, never dropped unseen
        named = "; ".join(f"{where}: {why}" for where, why in skipped[:3]) + ("; ..." if len(skipped) > 3 else "")
        raise PebenchError(
            f"{len(skipped)} record file(s) could not be read ({named}); nothing packed: rerun `pebench eval` for "
            "their runs (it measures them again) or delete them"
        )
    recs.sort(key=lambda r: json.dumps(r, sort_keys=True))
    if not recs:
        raise PebenchError(f"no records to pack in {', '.join(str(s.root) for s in sources)}")
    _one_stream_per_key(recs)
    return recs


def _packed_line(rec: dict) -> str:
    return json.dumps(rec, sort_keys=True, separators=(",", ":")) + "\n"


def pack_records(sources: list[ResultsDir], dest: Path, runs: Optional[list] = None) -> int:
    """``collect_records`` in one ``records.jsonl.gz`` at ``dest``: one result set holding all the evidence of its
    experiments. Returns the number of records."""
    from .util.fsutil import atomic_write_bytes

    recs = collect_records(sources, runs)
    text = "".join(_packed_line(r) for r in recs)
    atomic_write_bytes(Path(dest), gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0))
    return len(recs)


def pack_change(dest: Path, recs: list[dict]) -> str:
    """What packing ``recs`` into ``dest`` would change, in one line: the records there now and after, how many
    are added and removed (a changed record counts as one removed and one added), and the rows they belong to."""
    try:
        now = set(gzip.decompress(Path(dest).read_bytes()).decode("utf-8").splitlines(keepends=True))
    except (OSError, EOFError, ValueError):
        now = set()
    after = {_packed_line(r) for r in recs}
    added, removed = after - now, now - after

    def rows(lines: set) -> str:
        labels = sorted({str(json.loads(x).get("label")) for x in lines if x.strip().startswith("{")})
        return ", ".join(labels[:6]) + (f" and {len(labels) - 6} more" if len(labels) > 6 else "")

    return (
        f"{dest}: {len(now):,} records now, {len(after):,} after: {len(added):,} added"
        + (f" ({rows(added)})" if added else "")
        + f", {len(removed):,} removed"
        + (f" ({rows(removed)})" if removed else "")
    )


def _one_stream_per_key(recs: list[dict]) -> None:
    """A set never holds one cell measured on two evaluation streams: the perplexity records of a row, length,
    protocol and split that scored different numbers of tokens were measured on streams of different lengths under
    one key (the cap keys a record only since it was given as --max-tokens), and a table or claim would average
    them as one measurement."""
    scored: dict[tuple, set] = {}
    for r in recs:
        if r.get("task") == "ppl" and r.get("status") == "ok" and "tokens_scored" in (r.get("details") or {}):
            cell = (r["label"], r["length"], protocol_key(r), r.get("split"))
            scored.setdefault(cell, set()).add(r["details"]["tokens_scored"])
    for (label, length, key, split), counts in sorted(scored.items(), key=str):
        if len(counts) > 1:
            raise UsageError(
                f"{label} ppl at {length} tokens ({key}, {split}) was scored on "
                f"{' and '.join(f'{n:,}' for n in sorted(counts))} tokens: two evaluation streams under one key; "
                "evaluate every draw with the same --max-tokens (it keys ppl and copy records), or pack them apart"
            )


PACKED_RECORDS = "records.jsonl.gz"
CLAIMS_FILE = "claims.yaml"  # a committed result set's findings (findings.claims reads them)


RUN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")


def record_precision(rec: dict) -> str:
    """The precision a record's model trained in (``provenance.train_precision``); records from before it was
    recorded trained in fp32, as pebench then trained on a CPU. The one reading of it."""
    return (rec.get("provenance") or {}).get("train_precision") or "fp32"


def check_run_name(name: str) -> str:
    """A run name is one safe path component (letters, digits, '.', '_', '+', '-'; not starting with '.' or '-'),
    so a run can never write outside its results folder nor hide from ``list``."""
    if not isinstance(name, str) or not RUN_NAME.match(name) or ".." in name:
        raise UsageError(
            f"run name {name!r} is not allowed: use letters, digits, '.', '_', '+' and '-' (one folder name, no '..')"
        )
    return name


def read_record(text: str) -> tuple:
    """(record, None) for a usable record's JSON text, upgraded to today's shape; (None, reason) otherwise."""
    if text.startswith("<") and text.endswith(">"):
        return None, text[1:-1]
    try:
        rec = json.loads(text)
    except ValueError:
        return None, "not valid JSON (cut short or damaged)"
    if not isinstance(rec, dict) or "schema" not in rec:
        return None, "not a pebench record"
    if rec["schema"] == 1 and not (set(RECORD_V1) - OPTIONAL_RECORD_FIELDS - set(rec)):
        return upgrade_record(rec), None
    if rec["schema"] == SCHEMA_VERSION and "rope" in rec:
        rec = upgrade_fields(rec)
    if rec["schema"] != SCHEMA_VERSION:
        return None, f"record schema {rec['schema']!r}, this pebench reads schema {SCHEMA_VERSION}"
    if missing := sorted(set(RECORD_FIELDS) - OPTIONAL_RECORD_FIELDS - set(rec)):
        return None, f"fields missing: {', '.join(missing)}"
    metrics = rec.get("metrics") or {}
    if not isinstance(metrics, dict) or (bad := sorted(k for k, v in metrics.items() if not _number_or_none(v))):
        return None, f"metric values that are not numbers: {', '.join(bad) if isinstance(metrics, dict) else metrics}"
    if wrong := [f"{k} {rec[k]!r} (wants {want})" for k, want, ok in _FIELD_TYPES if k in rec and not ok(rec[k])]:
        return None, "fields of the wrong type: " + ", ".join(wrong)
    return rec, None


def _whole(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


# (field, what it must be, test): a record read from disk is checked before a report keys on it (a length "256", a
# string, once became a second column beside 256)
_FIELD_TYPES = (
    *((k, "text", lambda v: isinstance(v, str)) for k in ("task", "run", "scheme", "variant", "label", "protocol")),
    *((k, "a whole number > 0", lambda v: _whole(v) and v > 0) for k in ("length", "train_context")),
    ("seed", "a whole number", _whole),
    ("multiple", "a number", lambda v: _number_or_none(v) and v is not None),
    ("status", "ok | undefined | failed", lambda v: v in ("ok", "undefined", "failed")),
    *(
        (k, "a mapping", lambda v: v is None or isinstance(v, dict))
        for k in ("protocol_params", "intervals", "details")
    ),
    ("provenance", "a mapping", lambda v: isinstance(v, dict)),
)


def _number_or_none(v) -> bool:
    return v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))


_ABBREV = {
    "stride": "s",
    "targets": "k",
    "trials": "t",
    "string_length": "k",
    "far_n": "n",
    "keys": "K",
    "values": "V",
    "queries": "Q",
    "distractors": "D",
    "pairs": "P",
    "chains": "C",
    "hops": "H",
    "max_tokens": "m",
}


def protocol_key(rec: dict) -> str:
    """The protocol and its settings in one word, the settings abbreviated in the order of their names: nonoverlap,
    sliding-s64, fixed-k256, filler-t20, text-k24-t20 (copy's string_length, then trials), sliding-m16384-s64."""
    params = rec.get("protocol_params") or {}
    return "-".join([rec["protocol"]] + [f"{_ABBREV.get(k, k)}{v}" for k, v in sorted(params.items())])


def finished_by_seed(roots, prefix: str, seeds) -> dict:
    """The finished runs named ``PREFIX-sSEED`` for the seeds given, over several results folders, as {seed:
    (ResultsDir, run name)}; where two folders hold one, the later folder's counts (as the scripts that measure each
    trained model read them: scripts/learned_tables.py, scripts/sink_mass.py)."""
    runs = {}
    for root in roots:
        rd = ResultsDir(root)
        finished = set(rd.runs_in("finished"))
        for seed in seeds:
            if f"{prefix}-s{seed}" in finished:
                runs[seed] = (rd, f"{prefix}-s{seed}")
    return runs
