"""``scripts/setup.sh``: the demo's set-up installs only what the main job uses; ``--test`` adds the rest."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _script(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A copy of the scripts beside a ``.venv`` whose python is this one and whose pip records what it is asked
    to install (and installs nothing): the script runs for real, its pip calls are read back."""
    shutil.copytree(ROOT / "scripts", tmp_path / "scripts")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    bin_ = tmp_path / ".venv" / "bin"
    bin_.mkdir(parents=True)
    _script(bin_ / "python", f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    _script(bin_ / "pip", f'#!/bin/sh\necho "$@" >> "{tmp_path}/pip.log"\n')
    return tmp_path


@pytest.mark.slow
def test_the_demo_set_up_installs_the_package_without_test_extras(repo: Path) -> None:
    if shutil.which("dot") is None:
        pytest.skip("no dot here: the set-up would install graphviz first")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(["bash", "scripts/setup.sh"], cwd=repo, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    calls = (repo / "pip.log").read_text().splitlines()
    assert len(calls) == 1 and calls[0].endswith("-e ."), calls  # torch was there already: the package only
    assert "chromium" not in done.stderr
    refused = subprocess.run(["bash", "scripts/setup.sh", "--tests"], cwd=repo, env=env, capture_output=True,
                             text=True, timeout=60)
    assert refused.returncode == 2 and "usage: bash scripts/setup.sh [--test]" in refused.stderr


def test_the_test_set_up_asks_for_every_test_extra() -> None:
    text = (ROOT / "scripts" / "setup.sh").read_text()
    assert '-e ".[dev,zoo,apps,traces]"' in text
    assert "bash scripts/setup.sh --test" in (ROOT / "scripts" / "test.sh").read_text()
    assert "bash scripts/setup.sh\n" in (ROOT / "scripts" / "demo.sh").read_text()
