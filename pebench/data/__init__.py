"""Corpora, byte tokenizer, deterministic document split, memmap cache and batch sampling."""

from . import aggregation, ruler, state_tracking  # noqa: F401,E402  (register the kinds niah, vt, mqar, count, common, list)
from .corpora import CORPORA, Document, describe_corpora, iter_documents
from .dataset import SPLITS, PreparedCorpus, prepare_corpus, sample_batch
from .tokenizer import ByteTokenizer

__all__ = [
    "CORPORA",
    "Document",
    "describe_corpora",
    "iter_documents",
    "SPLITS",
    "PreparedCorpus",
    "prepare_corpus",
    "sample_batch",
    "ByteTokenizer",
]
