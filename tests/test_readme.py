"""The README's Python blocks run, in order, and the tree it shows is the tree the code prints."""

from __future__ import annotations

from pathlib import Path

import pytest
from models import needs_node_hook
from test_tutorial import blocks, printed

README = Path(__file__).resolve().parent.parent / "README.md"


def _blocks(kind: str) -> list[str]:
    return [text for k, text in blocks(README) if k == kind]


@needs_node_hook
def test_readme_python_blocks_run_and_print_what_the_readme_shows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    outputs = [printed(block, namespace, README) for block in _blocks("python")]
    assert (tmp_path / "resnet50.svg").read_text().lstrip().startswith("<?xml")
    coolcnn_tree = next(t for t in _blocks("text") if t.startswith("CoolCNN"))
    assert coolcnn_tree in outputs
    relu_calls = namespace["relu_calls"]
    assert len(relu_calls) == 49  # type: ignore[arg-type]
    assert [(c.path, c.index) for c in relu_calls[:4]] == [  # type: ignore[index]
        ("relu", 0), ("layer1.0.relu", 0), ("layer1.0.relu", 1), ("layer1.0.relu", 2)]
