"""Fixtures only (shared helpers: support.py). Every test runs offline and seeded."""

import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"

import pytest  # noqa: E402
import torch  # noqa: E402

# Under pytest-xdist (`-n auto`, the default in pyproject.toml) each worker takes its share of the cores, so two
# workers on two cores do not each start two threads and fight over them.
_workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _workers > 1:
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // _workers))


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
