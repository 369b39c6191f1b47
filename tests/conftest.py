import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"

import pytest  # noqa: E402
import torch  # noqa: E402

from pebench.config import ModelConfig  # noqa: E402
from pebench.pe import GROUPS, scheme_names  # noqa: E402

# From the registry: a built-in scheme added as one new module is in every test that iterates these.
CLASSIC, MODERN = list(GROUPS["classic"]), list(GROUPS["modern"])
SCHEMES = scheme_names()


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def tiny_model_config(pe: str, **kw) -> ModelConfig:
    base = dict(vocab_size=256, d_model=32, n_layers=2, n_heads=4, d_mlp=64, context=16, pe=pe,
                pe_options={"shaw": {"k_max": 4}, "t5": {"num_buckets": 8, "max_distance": 16}})
    base.update(kw)
    return ModelConfig(**base)
