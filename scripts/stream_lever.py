"""Tokens per second of an outside model reading one window through its KV cache at several chunk sizes (``eval
--stream N``: tokens per forward pass), side by side in one process (the model loaded once): the first TOKENS
positions of the train split's first window (the text the 2x and 4x cells read), each size timed once in the order
given and once in reverse (ABBA; the table gives both and their mean), and what each size computes against the first
size: the mean loss over those positions and the largest difference of the last hidden state, over the largest
hidden value (streaming in any chunk must give the same numbers up to rounding). A sliding-window
layer scores each pass's queries against the pass plus its window of cached keys, so smaller passes waste less on
keys the mask hides; a global layer's work per token does not depend on the pass. Prints a markdown table (--out:
also writes it).

Usage: python scripts/stream_lever.py MODEL --tokens 16384 --sizes 4096,1024 [--dtype bfloat16] [--threads 2]"""

from __future__ import annotations

import argparse
import platform
import tempfile
import time
from pathlib import Path

import torch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--tokens", type=int, default=16384)
    ap.add_argument("--sizes", default="4096,1024")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    from pebench.data import prepare_corpus
    from pebench.eval.hf import open_model, tokenize_split
    from pebench.results import ResultsDir

    torch.set_num_threads(a.threads)
    sizes = [int(x) for x in a.sizes.split(",")]
    t0 = time.perf_counter()
    o = open_model(a.model, dtype=a.dtype)
    load_s = time.perf_counter() - t0
    corpus = prepare_corpus("sotu", ResultsDir(Path(tempfile.gettempdir()) / "pebench-lever").cache)
    ids, _ = tokenize_split(o.tokenizer, corpus.tokens("train"), a.tokens)
    idx = torch.from_numpy(ids[: a.tokens].astype("int64"))[None]
    seconds: dict[int, list[float]] = {s: [] for s in sizes}
    hidden: dict[int, torch.Tensor] = {}
    loss: dict[int, float] = {}
    head = o.model.inner.get_output_embeddings()
    with torch.inference_mode():
        for s in sizes + sizes[::-1]:
            o.model.stream = s
            t = time.perf_counter()
            h = o.model._hidden(idx)
            seconds[s].append(time.perf_counter() - t)
            if s not in hidden:
                hidden[s] = h.float()
                ends = [(i, min(i + 1024, a.tokens - 1)) for i in range(0, a.tokens - 1, 1024)]
                nll = [
                    torch.nn.functional.cross_entropy(head(h[0, i:j]).float(), idx[0, i + 1 : j + 1], reduction="sum")
                    for i, j in ends
                ]
                loss[s] = float(sum(nll)) / (a.tokens - 1)
            print(f"stream {s}: {seconds[s][-1]:.1f} s, mean loss {loss[s]:.6f}", flush=True)
    first = sizes[0]
    cpu = (
        next(
            (line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
            platform.processor() or platform.machine(),
        )
        if Path("/proc/cpuinfo").exists()
        else platform.machine()
    )
    lines = [
        f"`python scripts/stream_lever.py {Path(a.model).name} --tokens {a.tokens} --sizes {a.sizes} --dtype {a.dtype}`"
        f" on {a.threads} threads ({cpu}; model loaded in {load_s:.0f} s): the first {a.tokens:,} positions of the"
        " train split's first window, each chunk size timed twice (ABBA).",
        "",
        "| tokens per pass | seconds (first, second) | mean | tokens/s | against the first size | mean loss |"
        " its difference from the first size's | largest hidden-state difference over the largest hidden value |",
        "|---|---|---|---|---|---|---|---|",
    ]
    base, scale = sum(seconds[first]) / 2, float(hidden[first].abs().max())
    for s in sizes:
        mean = sum(seconds[s]) / 2
        diff = float((hidden[s] - hidden[first]).abs().max()) / scale
        lines.append(
            f"| {s:,} | {seconds[s][0]:.1f}, {seconds[s][1]:.1f} | {mean:.1f} | {a.tokens / mean:.1f} | "
            f"{base / mean:.2f}x | {loss[s]:.6f} | {(loss[s] - loss[first]) / loss[first]:+.2e} | {diff:.2e} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        a.out.write_text(text)


if __name__ == "__main__":
    main()
