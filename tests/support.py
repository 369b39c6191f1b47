"""What many test files share: the micro config (one definition, varied per file by overrides), a CLI runner."""
from pathlib import Path

import torch
import yaml
from typer.testing import CliRunner

from pebench.cli import app

runner = CliRunner()

MICRO = {
    "name": "micro",
    "model": {"d_model": 32, "n_layers": 1, "n_heads": 2, "d_mlp": 64, "context": 16},
    "train": {"steps": 2, "batch_size": 4, "lr": 0.003, "warmup": 1, "log_every": 1, "checkpoint_every": 2,
              "data": "sotu"},
    "eval": {"multiples": [1, 2], "max_tokens": 600, "batch_tokens": 256},
}


def merged(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in over.items():
        out[k] = merged(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def micro(**sections) -> dict:
    """The micro config with sections overridden: micro(train={"steps": 4})."""
    return merged(MICRO, sections)


def write_micro(folder: Path, name: str = "micro.yaml", **sections) -> Path:
    p = Path(folder) / name
    p.write_text(yaml.safe_dump(micro(**sections)))
    return p


def micro_file(tmp_path_factory, **sections) -> Path:
    """A module-scoped micro config file: micro_file(tmp_path_factory, train={"steps": 4})."""
    return write_micro(tmp_path_factory.mktemp("cfg"), **sections)


def invoke(*args):
    """The CLI on these arguments (paths and numbers as text)."""
    return runner.invoke(app, [str(a) for a in args])


# -- hand-made models for task scoring ----------------------------------------------------------------------------
class Oracle(torch.nn.Module):
    """Logits one-hot on the next token of its own input: it 'copies the right digits'."""

    def forward(self, x):
        out = torch.full((*x.shape, 256), -10.0)
        out[:, :-1].scatter_(-1, x[:, 1:, None], 10.0)
        return out


class Uniform(torch.nn.Module):
    def forward(self, x):
        return torch.zeros(*x.shape, 256)


def task_ctx(model, stream=None, **options):
    """An evaluation context for a task's measure(): the model, a small config, a text stream, the options."""
    import numpy as np

    from pebench.config import EvalConfig, ModelConfig
    from pebench.scoring import Protocol
    from pebench.tasks import EvalContext

    cfg = type("Cfg", (), {"eval": EvalConfig(batch_tokens=4096), "model": ModelConfig(context=128)})()
    s = stream if stream is not None else np.frombuffer(b"The quick brown fox jumps over the lazy dog. " * 200,
                                                        dtype=np.uint8)
    return EvalContext(model, cfg, torch.device("cpu"), s, s, Protocol(), 512, options)
