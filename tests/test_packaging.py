"""A regular (non-editable) install works from any folder: the wheel carries the built-in configs."""

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_package_list_names_every_subpackage():
    """pyproject.toml lists the packages explicitly (for the configs mapping): a new subpackage must be added."""
    import tomllib
    from setuptools import find_packages

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = set(find_packages(str(ROOT), include=["pebench*"]))
    assert found <= listed, f"add to [tool.setuptools] packages: {sorted(found - listed)}"


def dependency_dirs() -> list[str]:
    """The site directories the running interpreter imports its packages from: a venv's, a conda env's, the
    system's or the user's, whichever this is (not the base interpreter's, which a venv may not share)."""
    return [p for p in sys.path if p.rstrip("/").endswith(("site-packages", "dist-packages")) and os.path.isdir(p)]


@pytest.fixture(scope="module")
def wheel_env(tmp_path_factory):
    """Build a wheel of this checkout and install it into a fresh venv that sees the dependencies of the
    environment running the tests (listed in a .pth file, which adds the folders only: the checkout's editable
    install is not among what it sees), no network."""
    tmp = tmp_path_factory.mktemp("wheel")
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-q",
            "-w",
            str(tmp / "dist"),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    (whl,) = (tmp / "dist").glob("pebench-*.whl")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    site = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(site) / "_pebench_test_deps.pth").write_text("".join(d + "\n" for d in dependency_dirs()))
    r = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps", "--no-index", str(whl)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    elsewhere = tmp / "elsewhere"
    elsewhere.mkdir()
    return whl, venv, elsewhere


def test_wheel_ships_the_configs(wheel_env):
    whl, _, _ = wheel_env
    names = zipfile.ZipFile(whl).namelist()
    assert {
        "pebench/configs/tiny.yaml",
        "pebench/configs/small.yaml",
        "pebench/configs/context.yaml",
        "pebench/eval/tasks/passkey.py",
    } <= set(names)


def test_installed_wheel_lists_and_trains_from_an_unrelated_folder(wheel_env):
    _, venv, elsewhere = wheel_env
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")

    def run(*args):
        return subprocess.run(
            [str(venv / "bin" / "pebench"), *args], capture_output=True, text=True, cwd=elsewhere, env=env, timeout=300
        )

    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import pebench, sys; print(pebench.__file__)"],
        capture_output=True,
        text=True,
        cwd=elsewhere,
        env=env,
    )
    assert where.stdout.strip().startswith(str(venv)), where.stdout + where.stderr  # the wheel, not the checkout
    r = run("list")
    assert r.returncode == 0, r.stderr
    assert "configs: context, gpt2-small, small, tiny" in r.stdout and "passkey" in r.stdout  # configs and tasks ship
    r = run("train", "--pe", "rope", "--config", "tiny", "--steps", "2")
    assert r.returncode == 0, r.stderr
    assert (elsewhere / "results" / "runs" / "rope-tiny-s0" / "checkpoint.pt").is_file()
    assert "trained 2 steps" in r.stdout
