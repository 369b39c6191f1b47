"""Bytes are tokens: vocabulary 256, nothing to download or train; byte 0 separates documents."""

from __future__ import annotations

import numpy as np

SEPARATOR = 0


class ByteTokenizer:
    vocab_size = 256

    def encode(self, text: str) -> np.ndarray:
        return np.frombuffer(text.encode("utf-8"), dtype=np.uint8)

    def decode(self, tokens) -> str:
        return bytes(np.asarray(tokens, dtype=np.uint8).tolist()).decode("utf-8", errors="replace")
