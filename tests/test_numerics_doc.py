"""docs/numerics.md's Python blocks run, in order, and print what the text blocks after them show."""

from __future__ import annotations

from pathlib import Path

from models import needs_node_hook
from test_tutorial import blocks, printed, shown

DOC = Path(__file__).resolve().parent.parent / "docs" / "numerics.md"


def run_block(code: str, namespace: dict[str, object], folder: Path, i: int) -> str:
    """What one block printed, run from a file of its own (``b<i>/numerics.py``: source lines as users see them)."""
    path = folder / f"b{i}" / "numerics.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(code, encoding="utf-8")
    return printed(code, namespace, path)


@needs_node_hook
def test_numerics_doc_blocks_print_what_it_shows(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.chdir(tmp_path)
    found = blocks(DOC)
    namespace: dict[str, object] = {}
    checked = 0
    for i, (kind, code) in enumerate(found):
        if kind != "python":
            continue
        out = run_block(code, namespace, tmp_path, checked)
        expected = found[i + 1][1] if i + 1 < len(found) and found[i + 1][0] == "text" else None
        assert expected is not None, f"python block {i} of {DOC.name} is not followed by the text it prints"
        assert shown(expected, out), f"block {i} printed:\n{out}\nthe doc shows:\n{expected}"
        checked += 1
    assert checked == 7
