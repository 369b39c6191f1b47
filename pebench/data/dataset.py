"""Deterministic document split, memmap token cache, and vectorized batch sampling."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import numpy as np
import torch

from ..util.errors import PebenchError
from ..util.fsutil import atomic_path, atomic_write_json
from .corpora import corpus_source
from .needles import mix_needles
from .tokenizer import SEPARATOR, ByteTokenizer

SPLITS = ("train", "validation", "test")
SPLIT_RULE = "sha256(doc id) mod 1000: <900 train, <950 validation, else test; v1"


def split_of(doc_id: str) -> str:
    """Stable across machines and Python versions (no ``hash()``): about 90 / 5 / 5."""
    r = int.from_bytes(hashlib.sha256(doc_id.encode("utf-8")).digest()[:8], "big") % 1000
    return "train" if r < 900 else "validation" if r < 950 else "test"


@dataclass
class PreparedCorpus:
    spec: str
    fingerprint: str
    folder: Path
    meta: dict[str, Any]

    def tokens(self, split: str) -> np.ndarray:
        n = self.meta["tokens"][split]
        return np.memmap(self.folder / f"{split}.bin", dtype=np.uint8, mode="r", shape=(n,))


def prepare_corpus(spec: str, cache_dir: Path, text_field: str = "text") -> PreparedCorpus:
    """Tokenize and split once; later calls open the memmaps (keyed by corpus + split-rule fingerprint)."""
    source = corpus_source(spec, text_field)
    key = hashlib.sha256(f"{source.fingerprint}|{SPLIT_RULE}|bytes".encode()).hexdigest()[:20]
    folder = Path(cache_dir) / key
    meta_path = folder / "meta.json"
    if meta_path.exists():
        meta = json.loads(meta_path.read_text())
        return PreparedCorpus(source.spec, key, folder, meta)

    tok = ByteTokenizer()
    folder.mkdir(parents=True, exist_ok=True)
    counts = {s: 0 for s in SPLITS}
    docs = {s: 0 for s in SPLITS}
    sep = np.array([SEPARATOR], dtype=np.uint8)
    with (
        atomic_path(folder / "train.bin") as t0,
        atomic_path(folder / "validation.bin") as t1,
        atomic_path(folder / "test.bin") as t2,
    ):
        outs = {s: open(p, "wb") for s, p in zip(SPLITS, (t0, t1, t2))}
        try:
            for doc in source.documents():
                ids = tok.encode(doc.text)
                if len(ids) == 0:
                    continue
                s = split_of(doc.id)
                outs[s].write(ids.tobytes())
                outs[s].write(sep.tobytes())
                counts[s] += len(ids) + 1
                docs[s] += 1
        finally:
            for f in outs.values():
                f.close()
        if sum(docs.values()) == 0:
            raise PebenchError(f"corpus {spec!r} is empty: no document with any text")
        for s in ("train", "validation"):
            if docs[s] == 0:
                raise PebenchError(
                    f"corpus {spec!r} has no document in its {s} split ({sum(docs.values())} documents); "
                    "the split is by document, so add more documents"
                )
    meta = {
        "spec": source.spec,
        "fingerprint": key,
        "source_fingerprint": source.fingerprint,
        "description": source.description,
        "split_rule": SPLIT_RULE,
        "tokenizer": "bytes",
        "tokens": counts,
        "documents": docs,
    }
    atomic_write_json(meta_path, meta)  # written last: its presence means the cache is complete
    return PreparedCorpus(source.spec, key, folder, meta)


def sample_batch(
    tokens: np.ndarray,
    seed: int,
    step: int,
    batch_size: int,
    context: int,
    rank: int = 0,
    world: int = 1,
    needles: float = 0.0,
    needle_lengths: tuple = (16, 64),
    needle_kinds: Optional[dict] = None,
):
    """Batch ``step`` of the seeded sample order: random windows of context+1 tokens.

    It depends only on (seed, step), so every scheme sees the same data, resuming needs no state,
    and ranks of a data-parallel job take disjoint rows of the same global batch. A fraction ``needles`` of the
    rows (a seeded draw over the global batch) are retrieval documents (``needles.mix_needles``).
    """
    n = len(tokens) - context - 1
    if n <= 0:
        raise PebenchError(f"the training split ({len(tokens)} tokens) is shorter than the context {context}")
    rng = np.random.default_rng([seed, step])
    starts = rng.integers(0, n, size=batch_size)
    idx = starts[:, None] + np.arange(context + 1)[None, :]
    rows = np.asarray(tokens[idx])
    if needles > 0:
        rows = mix_needles(rows, seed, step, needles, tuple(needle_lengths), needle_kinds)
    per = batch_size // world
    rows = rows[rank * per : (rank + 1) * per]
    chunk = torch.from_numpy(rows.astype(np.int64))
    return chunk[:, :-1], chunk[:, 1:]
