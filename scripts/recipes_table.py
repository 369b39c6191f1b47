"""The retrieval-recipe table (scripts/retrieval_recipes.sh): per run, what it was trained on, what it cost and
whether it retrieves at 1x. Usage: python scripts/recipes_table.py RESULTS_DIR"""

import sys

import pandas as pd

from pebench.findings.report import records_frame
from pebench.results import ResultsDir


def describe(cfg, meta) -> str:
    scheme = f"{cfg.model.pe}: " if cfg.model.pe != "rope" else ""  # the recipes train RoPE unless a row says so
    seed = f"seed {cfg.train.seed}, " if cfg.train.seed else ""  # and seed 0
    return scheme + seed + _training(cfg, meta)


def _weights(kinds: dict) -> str:
    return ", ".join(f"{k} {w:g}" for k, w in kinds.items())


def _training(cfg, meta) -> str:
    t = cfg.train
    kinds = _weights(t.needle_kinds) if t.needle_kinds else "passkey 1, copy 1"
    what = (
        "language model only"
        if not t.needles
        else f"needles {t.needles:g} ({kinds}; strings {t.needle_lengths[0]}-{t.needle_lengths[1]} bytes)"
    )
    start = f"continues {meta['parent']}, " if meta.get("parent") else ""
    depth = f"{cfg.model.n_layers} layers, " if cfg.model.n_layers != 4 else ""
    if t.induction_steps:  # an induction warm-up, then the language-model phase
        lo, hi = t.induction_lengths
        warm = _weights(t.induction_kinds) if len(t.induction_kinds) > 1 else next(iter(t.induction_kinds))
        return (
            f"{cfg.model.n_layers} layers, batch {t.batch_size}: {t.induction_steps} steps of {warm} ({lo}-{hi} "
            f"bytes), then {what}, "
            f"{t.steps - t.induction_steps} steps, each phase at lr {t.lr:g}"
        )
    return f"{start}{depth}{what}, {t.steps} steps at lr {t.lr:g}"


def main(root: str) -> None:
    rd = ResultsDir(root)
    df = records_frame(rd)
    rows = []
    for run in rd.run_names():
        cfg, meta = rd.run_config(run)
        g = df[df["run"] == run]
        if g.empty:
            continue

        def val(task, metric, L, g=g):
            x = g[(g["task"] == task) & (g["length"] == L)]
            return float(x[metric].iloc[0]) if len(x) and not pd.isna(x[metric].iloc[0]) else float("nan")

        cells = {}
        for c in g[(g["task"] == "copy") & (g["length"] == 128)]["details"].iloc[0]["cells"]:
            cells[c["distance"]] = c["accuracy"]
        st = rd.status(run)
        rows.append(
            f"| {run} | {describe(cfg, meta)} | {st.get('wall_s', 0):.0f} | {st.get('final_loss', 0):.2f} | "
            f"{val('ppl', 'ppl', 128):.2f} | {val('passkey', 'passkey_digit', 128):.2f} / "
            f"{val('passkey', 'passkey_exact', 128):.2f} | {val('passkey', 'passkey_digit', 256):.2f} / "
            f"{val('passkey', 'passkey_exact', 256):.2f} | "
            + " / ".join(f"{cells[d]:.2f}" for d in sorted(cells))
            + " |"
        )
    print(
        "Retrieval recipes for RoPE unless a row names another scheme (seed 0 unless it names another, the tiny model "
        "unless the row says otherwise, validation split; 20 prompts per passkey depth and per copy distance). "
        "Training time: one single-threaded worker of two on the 2-core CPU.\n"
    )
    print(
        "| run | trained on | train s | last train loss | ppl 1x | passkey 1x digit / exact | "
        "passkey 2x digit / exact | copy 1x at d = 32 / 64 / 102 |"
    )
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main(sys.argv[1])
