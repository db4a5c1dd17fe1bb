"""The ``.mx.json`` file in Google's Model Explorer itself: served by the real ``ai-edge-model-explorer``
package on 127.0.0.1 and opened in headless Chromium (Debian's package, through playwright).

Skipped where the package is absent (``pip install -e '.[apps]'``); the fast validator in
``test_model_explorer.py`` stays the check that runs everywhere.
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from viewer_page import require_browser
from vision import torchvision

import dispatchtrace as dt

pytestmark = [pytest.mark.slow, pytest.mark.browser]

require_browser()
pytest.importorskip("model_explorer", reason="ai-edge-model-explorer is not installed (pip install -e '.[apps]')")


@pytest.fixture(scope="module")
def resnet18() -> dt.Graph:
    m = torchvision.models.resnet18(weights=None).eval()
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad(), dt.capture(m) as g:
        m(x)
    return g


@pytest.fixture(scope="module")
def served(resnet18: dt.Graph, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """Model Explorer's own server on a free port of 127.0.0.1, holding the written file; yields (URL, file)."""
    path = resnet18.render(tmp_path_factory.mktemp("mx") / "resnet18.mx.json")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "model_explorer", str(path), "--host", "127.0.0.1", "--port", str(port),
                             "--no_open_in_browser"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url, said, start = None, [], time.monotonic()
        assert proc.stdout is not None
        while url is None and time.monotonic() - start < 120:
            line = proc.stdout.readline()
            if not line and proc.poll() is not None:
                break
            said.append(line)
            found = re.search(rf"(http://127\.0\.0\.1:{port}/\S*)", line)
            url = found.group(1) if found else None
        assert url is not None, "Model Explorer's server did not start:\n" + "".join(said)
        yield url, path
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_model_explorer_draws_the_file_and_opens_a_layer(browser: object, served: tuple[str, Path], resnet18: dt.Graph,
                                                        shots: Path) -> None:
    import json

    url, path = served
    nodes = json.loads(path.read_text())["graphs"][0]["nodes"]
    page = browser.new_page(viewport={"width": 1400, "height": 900})  # type: ignore[attr-defined]
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url)
    page.get_by_text("layer count").wait_for(timeout=120_000)  # the graph's info panel: it read and laid out the file
    body = page.inner_text("body")
    assert re.search(rf"ResNet\s+{len(nodes)} nodes", body), body[:400]  # the graph, named after the model, with every node
    info = dict(re.findall(r"(?m)^(op node count|ops|calls)\s+(\d+)", body))
    assert info == {"op node count": str(len(nodes)), "ops": str(len(resnet18.ops)), "calls": str(len(resnet18.calls))}
    # the one box drawn (the model's call), in the middle of the canvas: a click selects it, a double click opens it
    box = page.evaluate("(() => { const c = [...document.querySelectorAll('canvas')].sort((a, b) => b.width * b.height - a.width * a.height)[0];"
                        " const r = c.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()")
    page.mouse.click(*box)
    page.get_by_text("LAYER INFO").wait_for(timeout=30_000)
    model = resnet18.calls[0]
    children = sum(1 for c in model.children if isinstance(c, dt.Call)) + len(model.ops)
    text = page.inner_text("body")
    assert re.search(rf"#children\s+{children}\b", text) and re.search(r"type\s+ResNet", text), text[-800:]
    page.mouse.dblclick(*box)
    time.sleep(2)  # drawn in WebGL: nothing in the DOM says when the opened layer is painted
    page.screenshot(path=str(shots / "model-explorer-resnet18-open.png"))
    assert errors == []
    page.close()
