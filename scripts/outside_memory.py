"""Peak memory and time of scoring one window of an outside model (``--hf`` folder or GGUF file) at each length, in
fp32 and bf16, each measurement in a fresh process (its peak resident set, ``ru_maxrss``, is that measurement's
alone): pebench's own scoring path (``scoring.score_stream``), which scores an outside model's logits in chunks,
beside the whole-logits path it replaces (``--whole``). Prints a markdown table.

Usage: python scripts/outside_memory.py MODEL --lengths 2048,8192,32768 [--dtypes float32,bfloat16] [--whole]"""

import argparse
import json
import subprocess
import sys

CHILD = r"""
import json, resource, sys, time
import numpy as np, torch
from pebench import hf
from pebench.eval.scoring import Protocol, score_stream
spec, length, dtype, whole = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4] == "1"
torch.set_num_threads(int(sys.argv[5]))
o = hf.open_model(spec, dtype=dtype)
model = o.model
if whole:  # the path this replaces: the whole window's logits at once
    model.token_losses = lambda idx, start: None
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
stream = np.random.default_rng(0).integers(0, len(o.tokenizer), length + 1)
t = time.perf_counter()
out = score_stream(model, stream, length, Protocol(), length, torch.device("cpu"))
dt = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"peak_gb": peak / 2**20, "loaded_gb": base / 2**20, "seconds": dt, "loss": out["loss"]}))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--lengths", default="2048,8192")
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--whole", action="store_true", help="also measure the whole-logits path")
    a = ap.parse_args()
    print("| length | dtype | path | peak RSS (GB) | after loading (GB) | seconds | loss |")
    print("|---|---|---|---|---|---|---|")
    for length in (int(x) for x in a.lengths.split(",")):
        for dtype in a.dtypes.split(","):
            for whole in [False, True] if a.whole else [False]:
                args = [a.model, str(length), dtype, "1" if whole else "0", str(a.threads)]
                r = subprocess.run([sys.executable, "-c", CHILD, *args], capture_output=True, text=True)
                if r.returncode != 0:
                    err = (r.stderr.strip().splitlines() or ["?"])[-1]
                    print(f"| {length:,} | {dtype} | {'whole' if whole else 'chunked'} | failed: {err} | | | |")
                    continue
                m = json.loads(r.stdout.strip().splitlines()[-1])
                print(
                    f"| {length:,} | {dtype} | {'whole' if whole else 'chunked'} | {m['peak_gb']:.2f} | "
                    f"{m['loaded_gb']:.2f} | {m['seconds']:.1f} | {m['loss']:.4f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
