"""A call that ran no op (an eval-mode Dropout) stands on the path of the tensor it passes on, in headless Chromium.

Its box has an edge in (from the op that made its input) and an edge out (to the op that reads it), and no
edge runs past it from that producer to that reader, whether the calls around it are open or closed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from viewer_page import Page, require_browser

import dispatchtrace as dt

pytestmark = [pytest.mark.slow, pytest.mark.browser]

require_browser()


@pytest.fixture(scope="module")
def page_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Dropout(0.5), torch.nn.Linear(8, 3)).eval()
    x = torch.ones(2, 4)
    with torch.no_grad(), dt.capture(net) as g:
        net(x)
    assert not g.calls[2].children  # the Dropout ran no op
    return g.render(tmp_path_factory.mktemp("passing") / "dropout.html", depth="ops")


def test_an_empty_call_has_an_edge_in_and_out_when_everything_is_open(browser: object, page_path: Path) -> None:
    p = Page(browser, page_path)
    nodes, edges = p.nodes(), p.edges()
    drop = "c3"
    assert nodes[drop] == "1 | Dropout"
    into = {a for a, b in edges if b == drop}
    out = {b for a, b in edges if a == drop}
    assert len(into) == 1 and len(out) == 1, edges
    (a,), (b,) = into, out
    assert nodes[a].startswith("addmm") and p.page.evaluate(f"DT.app.model.ops[{a[1:]}].call") == 2  # the first Linear's
    assert nodes[b].startswith("addmm") and p.page.evaluate(f"DT.app.model.ops[{b[1:]}].call") == 4  # the second's
    assert (a, b) not in edges  # nothing runs past the Dropout
    assert p.crossings()["sibling"] == 0
    # the details name it among the reader's producers; tracing down from the first Linear reaches the second through it
    p.click(b)
    assert p.page.locator('#details a[data-go="c3"]').count() == 1
    p.page.evaluate("DT.app.select('c2'); DT.app.highlight('down')")
    p.idle()
    lit = p.page.evaluate("[...document.querySelectorAll('#viewport .node.down')].map(n => n.dataset.key)")
    assert drop in lit and b in lit
    p.close()


def test_an_empty_call_has_an_edge_in_and_out_when_its_neighbours_are_closed(browser: object, page_path: Path) -> None:
    p = Page(browser, page_path)
    p.page.evaluate("async () => { const m = DT.app.model; m.setOpen(2, false); m.setOpen(4, false); await DT.app.redraw(() => DT.app.view.fit()); }")
    p.idle()
    edges = p.edges()
    assert ("c2", "c3") in edges and ("c3", "c4") in edges and ("c2", "c4") not in edges, edges
    # closing the Sequential around all three: one box, fed by the input and feeding the output
    p.page.evaluate("async () => { DT.app.model.setOpen(1, false); await DT.app.redraw(() => DT.app.view.fit()); }")
    p.idle()
    assert p.edges() == {("i0", "c1"), ("c1", "y")}
    p.close()
