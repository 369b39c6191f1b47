"""Checkpoints and the models they hold: build a run's model, save and load checkpoints (``weights_only=True``),
check that a checkpoint fits its config, load a parent's weights into a child. Below training and evaluation."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from ..config import Config
from ..results import CHECKPOINT, ResultsDir
from ..util.errors import PebenchError
from .decoder import DecoderLM


def build_model(cfg: Config) -> DecoderLM:
    """The model of a config (a learned table holds every random training position)."""
    return DecoderLM(cfg.model, cfg.train.random_positions, cfg.train.random_positions_float)


def train_flops(cfg: Config) -> float:
    """FLOPs of training a config: steps x batch x context x FLOPs per token (``DecoderLM.flops_per_token``)."""
    T = cfg.model.context
    return cfg.train.steps * cfg.train.batch_size * T * build_model(cfg).flops_per_token(T)


def load_checkpoint(path: Path) -> dict:
    """Load with weights_only=True: a pickle that tries to run code is refused, never executed."""
    path = Path(path)
    if not path.exists():
        raise PebenchError(f"checkpoint not found: {path}")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - torch raises several types for bad files
        msg = str(e)
        if "weights_only" in msg or "Unsupported global" in msg or "Unsupported operand" in msg:
            raise PebenchError(
                f"refusing to load {path}: it contains code or objects that are not plain "
                "tensors (loaded with weights_only=True)"
            ) from e
        first = msg.splitlines()[0] if msg else type(e).__name__
        first = first if len(first) <= 120 else first[:117].rsplit(" ", 1)[0] + " ..."  # cut at a word, said so
        raise PebenchError(
            f"checkpoint {path} is truncated or corrupted ({type(e).__name__}: {first}); train the run again with"
            " --overwrite"
        ) from e
    if not isinstance(ckpt, dict) or "model" not in ckpt or "config" not in ckpt:
        raise PebenchError(f"checkpoint {path} is not a pebench checkpoint")
    return ckpt


def check_compatible(saved: dict, cfg: Config, path: Path) -> None:
    mine = cfg.to_dict()
    for section in ("model",):
        for key, value in saved.get(section, {}).items():
            if mine[section].get(key) != value:
                raise PebenchError(
                    f"checkpoint {path} was trained with {section}.{key}={value!r}, "
                    f"this run has {mine[section].get(key)!r}"
                )


def load_shared_weights(model: torch.nn.Module, state: dict, parent: str) -> tuple[list, list]:
    """Every weight the parent and this model share (same name and shape) is loaded; one of the same name and
    another shape is an error. Returns and prints (one line each) what was not loaded: the parent's weights
    this model has no place for, and this model's weights left at initialisation (e.g. RoPE -> NoPE for
    DroPE has none of either; NoPE -> ALiBi neither; learned -> none drops pe.table)."""
    own = model.state_dict()
    bad = [k for k in state if k in own and own[k].shape != state[k].shape]
    if bad:
        raise PebenchError(
            f"cannot initialise from {parent!r}: {bad[0]} has shape {tuple(state[bad[0]].shape)} "
            f"there and {tuple(own[bad[0]].shape)} here"
        )
    result = model.load_state_dict(state, strict=False)
    dropped, fresh = list(result.unexpected_keys), list(result.missing_keys)
    if dropped:
        print(f"init from {parent}: not loaded (no place in this model): {', '.join(dropped)}", file=sys.stderr)
    if fresh:
        print(f"init from {parent}: left at initialisation (not in the parent): {', '.join(fresh)}", file=sys.stderr)
    return dropped, fresh


def load_run_model(results: ResultsDir, run: str, device: torch.device):
    """(config, run metadata, model in eval mode on ``device``) of a finished run."""
    cfg, meta = results.run_config(run)
    state = results.state(run)
    if state != "finished":
        raise PebenchError(f"run {run!r} is not finished (state: {state}); train or resume it first")
    ckpt = load_checkpoint(results.run_dir(run) / CHECKPOINT)
    check_compatible(ckpt["config"], cfg, results.run_dir(run) / CHECKPOINT)
    model = build_model(cfg)
    try:
        model.load_state_dict(ckpt["model"])
    except RuntimeError as e:
        raise PebenchError(f"checkpoint of run {run!r} does not fit its config: {str(e).splitlines()[0][:200]}") from e
    with torch.no_grad():
        model.pe.after_step()  # parameters saved outside their domain (older KERPLE checkpoints) as they computed
    return cfg, meta, model.to(device).eval()
