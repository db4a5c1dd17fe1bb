"""The viewer's page for every torchvision model of the zoo (slow): it parses, and embeds the whole capture."""

from __future__ import annotations

import contextlib
import json
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
import torch
from viewer_page import payload_rows

import dispatchtrace as dt
from dispatchtrace.render._html import PAYLOAD_VERSION, passes_on
from dispatchtrace.views import noise_ops

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
pytest.importorskip("torchvision", reason="the model zoo is torchvision's models (no torchvision imports beside this torch)")
import zoo  # noqa: E402

pytestmark = pytest.mark.slow

SPECS = zoo.specs()


class Scripts(HTMLParser):
    """The page's script elements, by id (the payload, dagre, the worker's layout, the viewer)."""

    def __init__(self) -> None:
        super().__init__()
        self.scripts: list[tuple[str | None, str]] = []
        self._in: str | None | bool = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "script":
            self._in = dict(attrs).get("id")
            self.scripts.append((self._in, ""))

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in = False

    def handle_data(self, data: str) -> None:
        if self._in is not False:
            key, text = self.scripts[-1]
            self.scripts[-1] = (key, text + data)


@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_zoo_model_writes_a_viewer_page_with_its_whole_capture(spec: zoo.Spec, tmp_path: Path) -> None:
    model = zoo.build(spec)
    args, kwargs = spec.inputs()
    with torch.no_grad() if spec.no_grad else contextlib.nullcontext(), dt.capture(model) as g:
        zoo.step(spec, model, args, kwargs)
    path = g.render(tmp_path / f"{spec.name}.html")
    parser = Scripts()
    parser.feed(path.read_text(encoding="utf-8"))
    parser.close()
    ids = [key for key, _ in parser.scripts]
    assert ids == ["dt-data", "dt-dagre", "dt-group", None]
    p = json.loads(parser.scripts[0][1])
    assert p["v"] == PAYLOAD_VERSION and len(p["o"]) == len(g.ops) and len(p["c"]) == len(g.calls) + 1
    assert [row["name"] for row in payload_rows(p, "o")] == [op.name for op in g.ops]
    assert [row["path"] for row in payload_rows(p, "c")[1:]] == [c.path for c in g.calls]
    cg = g.collapse("ops", predicate=passes_on(noise_ops(g)))  # (an eval Dropout on the path of what it passes on)
    assert len(p["e"]) == 3 * len(cg.edges)  # every op-level dependency (none left out)
    assert len(p["in"]) == sum(1 for n in cg.nodes if n.kind == "input") and len(p["out"]) == len(g.outputs)
