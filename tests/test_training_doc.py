"""docs/training.md's Python blocks run, in order, and print what the text blocks after them show."""

from pathlib import Path

from models import needs_node_hook
from test_tutorial import blocks, printed, shown

DOC = Path(__file__).resolve().parent.parent / "docs" / "training.md"


@needs_node_hook
def test_training_doc_blocks_print_what_it_shows(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    found = blocks(DOC)
    namespace: dict[str, object] = {}
    checked = 0
    for i, (kind, code) in enumerate(found):
        if kind != "python":
            continue
        out = printed(code, namespace, DOC)
        expected = "".join(text for k, text in found[i + 1:i + 3] if k == "text") if i + 1 < len(found) else ""
        if found[i + 1][0] == "text":
            assert shown(expected, out), f"block {i} printed:\n{out}\nthe doc shows:\n{expected}"
            checked += 1
    assert checked == 3
    for name in ("coolcnn-train-forward.svg", "coolcnn-train-backward.svg", "coolcnn-train-backward-ops.svg"):
        assert (DOC.parent / "images" / name).read_text().lstrip().startswith("<?xml")
