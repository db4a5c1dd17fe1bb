"""The viewer's numbers in headless Chromium come from the metric registry and the payload's field names: a metric
registered by the test shows in the details panel and as a colour mode, and a payload whose rows hold their fields
in another order shows the same details (no script reads a row by position)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from torch import nn
from viewer_page import Page, require_browser

import dispatchtrace as dt
from dispatchtrace.render._html import HtmlOptions, page, payload

pytestmark = [pytest.mark.slow, pytest.mark.browser]
require_browser()


def out_elems(graph: dt.Graph, call: dt.Call) -> int:
    return sum(r.numel for r in (graph.outputs if call.parent is None else call.outputs))


@pytest.fixture(scope="module")
def g() -> dt.Graph:
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    with torch.no_grad(), dt.capture(model, values="stats") as g:
        model(torch.randn(2, 8))
    return g


def test_a_registered_metric_is_in_the_details_and_a_colour_mode(browser: object, g: dt.Graph, tmp_path: Path) -> None:
    dt.register_metric(dt.Metric(name="out_elems", header="Out elems", title="elements of the results", call=out_elems))
    try:
        p = Page(browser, g.render(tmp_path / "with.html", depth=1))
    finally:
        dt.unregister_metric("out_elems")
    p.click(p.key("0"))
    assert p.page.get_attribute("#details .out_elems", "data-v") == "32"  # the first Linear's 2 x 16 outputs
    assert "elements of the results" in p.page.inner_text("#details")
    assert "out_elems" in p.page.eval_on_selector_all("#colour option", "os => os.map(o => o.value)")
    plain = p.fills()
    p.page.select_option("#colour", "out_elems")
    p.idle()
    assert "elements of the results" in p.page.inner_text("#legend") and p.fills() != plain
    assert not p.errors
    p.close()
    q = Page(browser, g.render(tmp_path / "without.html", depth=1))  # unregistered: in no page made after
    q.click(q.key("0"))
    assert q.page.locator("#details .out_elems").count() == 0
    assert "out_elems" not in q.page.eval_on_selector_all("#colour option", "os => os.map(o => o.value)")
    q.close()


def _reversed(p: dict) -> dict:
    """``p`` with the fields of every row table in the opposite order, each row reordered to match."""
    fields = p["fields"]

    def row(t: str, r: list | None) -> list | None:
        if r is None:
            return None
        out = []
        for (_, kind), v in zip(fields[t], r, strict=False):
            base = kind.rstrip("*")
            if base not in ("", "s"):
                v = [row(base, x) for x in v] if kind.endswith("*") else row(base, v)
            out.append(v)
        return out[::-1]

    q = dict(p)
    q["c"], q["o"], q["st"] = [row("c", r) for r in p["c"]], [row("o", r) for r in p["o"]], [row("so", r) for r in p["st"]]
    q["cst"] = [[row("st", r) for r in rows] for rows in p["cst"]]
    q["fields"] = {t: f[::-1] for t, f in fields.items()}
    return q


def test_rows_whose_fields_come_in_another_order_show_the_same_details(browser: object, g: dt.Graph, tmp_path: Path) -> None:
    o = HtmlOptions(depth="ops")
    text = page(g, o)
    data = json.dumps(_reversed(payload(g, o)), separators=(",", ":")).replace("<", "\\u003c")
    other = re.sub(r'(id="dt-data">).*?(</script>)', lambda m: m.group(1) + data + m.group(2), text, count=1, flags=re.S)
    assert other != text
    (tmp_path / "a.html").write_text(text)
    (tmp_path / "b.html").write_text(other)
    keys = ["c0", "c1", "c2", *(f"o{op.index}" for op in g.ops)]
    shown = []
    for name in ("a.html", "b.html"):
        p = Page(browser, tmp_path / name)
        shown.append([p.page.evaluate("k => { DT.app.panel.show(k); return document.getElementById('details').innerText; }", k)
                      for k in keys])
        assert not p.errors
        p.close()
    assert shown[0] == shown[1]
    assert "FLOPs" in shown[0][2] and "values" in shown[0][-1]  # the metrics and the stats are among what was compared
