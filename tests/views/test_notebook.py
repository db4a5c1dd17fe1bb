"""In a notebook, executed for real with nbclient: ``g.summary()`` shows an HTML table, ``g.tree()`` its text.

The outputs' mime types are what Jupyter picks from: ``text/html`` for the summary (a ``<table>``,
as a pandas DataFrame shows itself), the tree's text both as ``text/plain`` and as a ``<pre>``.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason="the dev extra: pip install nbclient nbformat ipykernel")
nbclient = pytest.importorskip("nbclient", reason="the dev extra: pip install nbclient nbformat ipykernel")
pytest.importorskip("ipykernel", reason="the dev extra: pip install nbclient nbformat ipykernel")

ROOT = Path(__file__).resolve().parents[2]

CELLS = [
    f"import sys\nsys.path.insert(0, {str(ROOT)!r})\nimport dispatchtrace as dt\n"
    "model, args, kwargs = dt.models.build('coolcnn')\n"
    "with dt.capture(model) as g:\n    model(*args, **kwargs)",
    "g.summary(1)",
    "g.tree(1)",
    "print(g.summary(1))",
    "g",
]


def _coolcnn_summary() -> object:
    import dispatchtrace as dt

    model, args, kwargs = dt.models.build("coolcnn")
    with dt.capture(model) as g:
        model(*args, **kwargs)
    return g.summary(1)


def test_the_summary_html_is_a_table_of_its_rows() -> None:
    summary = _coolcnn_summary()
    table = summary._repr_html_()  # type: ignore[attr-defined]
    assert table.count("<tr>") == len(summary) + 2  # type: ignore[arg-type]
    assert table.count("<th ") == len(["Call", "Type", "Input", "Output", "Params", "Trainable", "Frozen", "FLOPs",
                                       "Out bytes", "Written", "Attributes"])
    assert ">max_pool#2</td>" in table and "&lt;" not in table


@pytest.mark.slow
def test_a_notebook_shows_the_summary_as_a_table_and_the_tree_as_text(tmp_path: Path) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in CELLS]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    setup, summary, tree, printed, graph = (cell.outputs for cell in nb.cells)
    assert setup == []

    (shown,) = summary
    assert shown.output_type == "execute_result" and set(shown.data) == {"text/plain", "text/html"}
    table = shown.data["text/html"]
    assert table.startswith('<table class="dispatchtrace-summary">') and table.endswith("</table>")
    assert table.count("<tr>") == 1 + len(_coolcnn_summary()) + 1  # the header, a row per call, the total
    assert "<th" in table and ">initial_conv</td>" in table and "padding-left" in table
    assert shown.data["text/plain"].splitlines()[0].split()[:3] == ["Call", "Type", "Input"]

    (shown,) = tree
    assert shown.data["text/plain"].startswith("CoolCNN  f32[1, 10]\n├── ")
    assert shown.data["text/html"].startswith("<pre") and "<table" not in shown.data["text/html"]

    (shown,) = printed  # print() of the summary stays the text table
    assert shown.output_type == "stream" and shown.text.startswith("Call ")

    (shown,) = graph
    assert ("image/svg+xml" in shown.data) == (shutil.which("dot") is not None), sorted(shown.data)
    assert sys.executable  # the kernel is this interpreter's (ipykernel's native python3 spec)
