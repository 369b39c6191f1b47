"""Attention weights and their log-sum-exp from masked scores, three ways side by side: exp(s - lse) with lse by
logsumexp (ATen's vectorized exp, in both, takes a slow path on -inf and very negative inputs), softmax's kernel with
lse by logsumexp, and softmax's kernel with lse from the largest weight (``attention._weights``, what pebench uses),
on the paths that score explicitly: the exact chunked path (sinks, long evaluation) and the spanned one (windows:
the layer patterns' local layers). Forward alone (evaluation) and forward and backward (training), the forms
alternated, medians.

Usage: python scripts/attention_weights.py [--threads 2] [--reps 7] [--out results/speed/attention-weights.md]"""

import argparse
import datetime
import statistics
import time
from pathlib import Path

import torch

from pebench.model import attention
from pebench.model.device import cpu_name
from pebench.model.spans import Span
from pebench.util.fsutil import atomic_write_text


def exp_form(s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """exp(s - lse), lse by logsumexp: the form ``attention._weights`` replaced."""
    lse = torch.logsumexp(s, dim=-1)
    return torch.exp(s - lse.unsqueeze(-1)), lse


def softmax_logsumexp(s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax's weights, lse by logsumexp."""
    return torch.softmax(s, dim=-1), torch.logsumexp(s, dim=-1)


FORMS = {
    "exp(s - lse), logsumexp": exp_form,
    "softmax, logsumexp": softmax_logsumexp,
    "softmax, lse from its largest weight (pebench)": attention._weights,
}
PEBENCH = "softmax, lse from its largest weight (pebench)"


def cases(T: int):
    """(name, function of q, k, v) for the two explicit paths at length T."""
    scale = 32**-0.5
    return [
        (f"chunked (exact), T = {T}", lambda q, k, v: attention.attention_math(q, k, v, None, scale, attention.CHUNK)),
        (f"spanned, window 128, T = {T}", lambda q, k, v: attention.attention_spanned(q, k, v, None, scale, Span(128))),
    ]


def timed(fn, q, k, v, grad: bool) -> float:
    t = time.perf_counter()
    if grad:
        out, _ = fn(q, k, v)
        out.square().sum().backward()
    else:
        with torch.no_grad():
            fn(q, k, v)
    return time.perf_counter() - t


def measure(T: int, B: int, reps: int) -> list[str]:
    rows = []
    for name, fn in cases(T):
        for grad in (False, True):
            q, k, v = (torch.randn(B, 4, T, 32, requires_grad=grad) for _ in range(3))
            times: dict[str, list[float]] = {f: [] for f in FORMS}
            for i in range(reps + 1):  # the forms alternate; the first round warms up
                for form, weights in FORMS.items():
                    attention._weights = weights
                    t = timed(fn, q, k, v, grad)
                    if i:
                        times[form].append(t)
            attention._weights = FORMS[PEBENCH]
            ms = [statistics.median(times[f]) * 1e3 for f in FORMS]
            what = "forward and backward" if grad else "forward"
            rows.append(f"| {name} | {what} | " + " | ".join(f"{m:,.1f}" for m in ms) + f" | {ms[0] / ms[-1]:.2f}x |")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--out", type=Path, default=Path("results/speed/attention-weights.md"))
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    lines = [
        "# Attention weights and their log-sum-exp: exp(s - lse) against softmax",
        "",
        f"`python scripts/attention_weights.py` ({datetime.date.today().isoformat()}, {cpu_name()}, {a.threads} "
        f"thread(s), torch {torch.__version__}, fp32, 4 heads of 32, a batch of 8 at 2,048 tokens; medians of "
        f"{a.reps} calls, the forms alternated; milliseconds):",
        "",
        "| path | pass | " + " | ".join(FORMS) + " | speed-up |",
        "|---|---|---|---|---|---|",
        *measure(2048, 8, a.reps),
    ]
    atomic_write_text(a.out, "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
