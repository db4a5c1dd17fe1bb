"""Where the time goes, in headless Chromium: a timed or estimated capture's page ranks each call's parts (its calls
and its own ops) by time in the details, with the times Python measured or estimated and each part's share; the
page opens with the model's ranks under the hint; a rank's link selects its part; an untimed page has none."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn
from viewer_page import Page, require_browser

import dispatchtrace as dt
from dispatchtrace.views import seconds

pytestmark = [pytest.mark.slow, pytest.mark.browser]
require_browser()

RANKS = "#details table.ranks tr"


def percent(v: float) -> str:
    p = v * 100
    return f"{p:.0f}%" if p >= 99.95 else f"{p:.1f}%" if p >= 0.095 else f"{p:.2f}%"


def model() -> nn.Module:
    """Twelve parts, one far wider than the rest (the longest), so the ranks are not program order; four are left over."""
    torch.manual_seed(0)
    layers: list[nn.Module] = [nn.Linear(64, 64) for _ in range(11)]
    layers.insert(5, nn.Sequential(nn.Linear(64, 2048), nn.ReLU(), nn.Linear(2048, 64)))
    return nn.Sequential(*layers)


@pytest.fixture(scope="module")
def timed() -> dt.Graph:
    m, x = model(), torch.randn(256, 64)
    with torch.no_grad():
        m(x)  # warm-up
        with dt.capture(m, timing=True) as g:
            m(x)
    return g


def ranks(p: Page) -> list[dict]:
    return p.page.eval_on_selector_all(RANKS, "rs => rs.map(r => ({key: r.dataset.key || null, v: +r.dataset.v, "
                                       "cells: [...r.cells].map(c => c.textContent)}))")


def test_the_page_opens_with_the_model_ranked_by_measured_time(browser: object, timed: dt.Graph, tmp_path: Path) -> None:
    p = Page(browser, timed.render(tmp_path / "t.html", depth=1))
    top = timed.calls[0]
    assert top.parent is timed.root and top.time is not None
    assert f"where the time goes in {top.label}" in p.page.inner_text("#details h4")
    rows = ranks(p)
    listed, rest = rows[:-1], rows[-1]
    assert len(listed) == 8 and rest["key"] is None and rest["cells"][0] == "4 more parts"
    by_key = {f"c{i}": c for i, c in enumerate(timed.calls, 1)}
    expected = sorted((c for c in top.children if isinstance(c, dt.Call)), key=lambda c: -c.time)[:8]
    assert [by_key[r["key"]] for r in listed] == expected  # by time, not program order
    for r, c in zip(listed, expected, strict=True):
        assert r["v"] == pytest.approx(c.time, rel=1e-12)
        assert r["cells"][1:] == [seconds(c.time), percent(c.time / top.time)]
    assert rest["v"] == pytest.approx(top.time - sum(c.time for c in expected), rel=1e-9)
    assert rest["cells"][2] == percent(rest["v"] / top.time)
    # a rank's link selects its part: the wide block's (64x the others' work, nearly always first, but a
    # preempted Linear can outlast it on a busy machine: CI once ranked one first)
    block = next(c for c in top.children if isinstance(c, dt.Call) and c.type == "Sequential")
    key = next(k for k, c in by_key.items() if c is block)
    assert key in [r["key"] for r in listed]
    p.page.click(f'#details a[data-go="{key}"]')
    p.idle()
    assert p.page.inner_text("#details h3") == block.label
    inner = ranks(p)  # the block's own ranks: its Linear, ReLU, Linear, by time, all listed
    assert {r["key"] for r in inner} <= {f"c{i}" for i, c in enumerate(timed.calls, 1) if c.parent is block} | {None}
    assert [r["v"] for r in inner if r["key"]] == sorted((r["v"] for r in inner if r["key"]), reverse=True)
    assert len([r for r in inner if r["key"]]) == 3
    p.close()


def test_an_op_without_a_call_is_ranked_beside_the_calls(browser: object, tmp_path: Path) -> None:
    """A call's own ops are its parts too (``x * 2`` in a forward), linked as ops."""

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(64, 64)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(x).exp() * 2

    net, x = Net(), torch.randn(64, 64)
    with torch.no_grad(), dt.capture(net, timing=True) as g:
        net(x)
    p = Page(browser, g.render(tmp_path / "o.html", depth=1))
    keys = [r["key"] for r in ranks(p) if r["key"]]
    ops = {f"o{j}": op for j, op in enumerate(g.ops)}
    assert "c2" in keys and {ops[k].target for k in keys if k[0] == "o"} == {"aten.exp.default", "aten.mul.Tensor"}
    p.close()


def test_estimated_ranks_and_the_estimate_beside_a_measured_time(browser: object, timed: dt.Graph, tmp_path: Path) -> None:
    est = timed.estimate("h100")  # now the page shows measured time with the estimate beside each part
    p = Page(browser, timed.render(tmp_path / "both.html", depth=1))
    rows = [r for r in ranks(p) if r["key"]]
    calls = {f"c{i}": c for i, c in enumerate(timed.calls, 1)}
    assert all(r["cells"][3] == f"est {seconds(est.time(calls[r['key']]))}" for r in rows)
    p.close()
    m, x = model(), torch.randn(256, 64, device="meta")
    with dt.capture(m.to("meta")) as g:  # nothing measured on meta: ranked by the estimate
        m(x)
    e = g.estimate("h100")
    q = Page(browser, g.render(tmp_path / "est.html", depth=1))
    assert "(estimated)" in q.page.inner_text("#details h4")
    rows = ranks(q)
    calls = {f"c{i}": c for i, c in enumerate(g.calls, 1)}
    assert [r["v"] for r in rows if r["key"]] == pytest.approx(sorted((e.time(c) for c in g.calls[0].children
                                                                      if isinstance(c, dt.Call)), reverse=True)[:8])
    assert all(len(r["cells"]) == 3 for r in rows)  # no estimate column beside an estimate
    assert calls[rows[0]["key"]] is g.calls[0].children[5]
    q.close()


def test_an_untimed_page_ranks_nothing(browser: object, tmp_path: Path) -> None:
    m = model()
    with torch.no_grad(), dt.capture(m) as g:
        m(torch.randn(4, 64))
    p = Page(browser, g.render(tmp_path / "u.html", depth=1))
    assert p.page.locator("#details table.ranks").count() == 0 and "Click a module call" in p.page.inner_text("#details")
    p.click(p.key("5"))  # the block opens, its details show
    assert p.page.inner_text("#details h3") == "5" and p.page.locator("#details table.ranks").count() == 0
    p.close()
