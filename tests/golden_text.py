"""The one golden-file check of the tests: ``golden("tree_coolcnn_depth1.txt", str(tree))``."""

from __future__ import annotations

import difflib
import os
from pathlib import Path

import pytest

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("DISPATCHTRACE_UPDATE_GOLDEN") == "1"

__all__ = ["GOLDEN", "golden"]


def golden(name: str, text: str) -> None:
    """Compare ``text`` with ``tests/golden/<name>`` (one trailing newline either way).

    ``DISPATCHTRACE_UPDATE_GOLDEN=1`` rewrites the file (read its ``git diff`` before committing); a
    missing file is written and the test fails, so a new golden is always looked at once.
    """
    path = GOLDEN / name
    text = text if text.endswith("\n") else text + "\n"
    if UPDATE or not path.exists():
        missing = not path.exists()
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
        if missing and not UPDATE:
            pytest.fail(f"wrote the missing golden file {path}; check it and commit it")
    expected = path.read_text(encoding="utf-8")
    if text != expected:
        diff = "".join(list(difflib.unified_diff(expected.splitlines(True), text.splitlines(True), str(path), "actual"))[:40])
        pytest.fail(f"{name} changed; rerun with DISPATCHTRACE_UPDATE_GOLDEN=1 if on purpose and read the diff:\n{diff}",
                    pytrace=False)
