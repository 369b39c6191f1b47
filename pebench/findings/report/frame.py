"""Records read into one frame: a row per usable record (runs that failed in training left out), with what a
table keys on (label, length, protocol, split, precision) and the provenance a comparison needs (config, steps,
corpus, commits); a record of another task version is named, never mixed in."""

from __future__ import annotations

from typing import Optional

import pandas as pd

from ...eval.tasks import TASKS
from ...results import ResultsDir, protocol_key, record_precision
from ...util.parsing import canonical_label


def records_frame(results: ResultsDir, skipped: Optional[list] = None) -> pd.DataFrame:
    """One row per usable record (runs that failed in training left out); files that could not be used are
    appended to ``skipped`` as (path, reason), so the caller can name them."""
    rows = []
    failed = set(results.runs_in("failed"))
    for rec in results.iter_records(skipped):
        if rec["run"] in failed:
            continue
        if stale := stale_version(rec):
            if skipped is not None:
                skipped.append((results.record_path(rec), stale))
            continue
        rows.append(
            {
                "task": rec["task"],
                "run": rec["run"],
                "label": canonical_label(rec["label"]),  # records written under a scaling's other spelling too
                "scheme": rec["scheme"],
                "variant": rec["variant"],
                "seed": rec["seed"],
                "protocol": protocol_key(rec),
                "length": rec["length"],
                "train_context": rec["train_context"],
                "status": rec["status"],
                **(rec["metrics"] or {}),
                "intervals": rec.get("intervals") or {},
                "details": rec.get("details") or {},
                "position_buckets": (rec.get("details") or {}).get("position_buckets"),
                "split": rec.get("split", "validation"),
                "precision": record_precision(rec),
                "measured_as": (rec.get("provenance") or {}).get("measured_as"),
                "config": (rec.get("provenance") or {}).get("config_name"),  # a scale suite's point: tiny-d64
                "chance": rec.get("chance") or {},
                "git_commit": (rec.get("provenance") or {}).get("git_commit"),
                "created": rec.get("created"),
                # every commit a resumed run trained at, else the one
                "train_commit": (rec.get("provenance") or {}).get("train_commits")
                or (rec.get("provenance") or {}).get("train_commit"),
                "train_tree_clean": (rec.get("provenance") or {}).get("train_tree_clean"),
                "steps": (rec.get("provenance") or {}).get("steps"),
                "corpus": (rec.get("provenance") or {}).get("corpus"),
                "parent": (rec.get("provenance") or {}).get("parent"),  # a run continued from another (a fine-tune)
                "dtype": (rec.get("provenance") or {}).get("dtype"),  # an outside model's evaluation precision
            }
        )
    return pd.DataFrame(rows)


def records_frame_noting(results: ResultsDir, warn) -> pd.DataFrame:
    """``records_frame``, with every record file that could not be used named through ``warn``, one line each."""
    skipped: list = []
    df = records_frame(results, skipped)
    for path, reason in skipped:
        warn(f"warning: skipped record {path}: {reason}")
    if skipped:
        warn(
            f"warning: {len(skipped)} record file(s) skipped; rerun `pebench eval` for those runs to measure them again"
        )
    return df


def stale_version(rec: dict) -> Optional[str]:
    """Why a record measured by another version of its task is left out (None when it is current)."""
    if rec["task"] not in TASKS:
        return None
    have, want = rec.get("task_version", 1), TASKS.get(rec["task"]).version
    return (
        None
        if have == want
        else (
            f"measured by version {have} of task {rec['task']!r}, this pebench's is "
            f"version {want}; rerun `pebench eval --task {rec['task']}`"
        )
    )
