"""Key ``n`` on a call of about a thousand ops: the page says what it is opening while it lays the call out."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from torch import nn
from viewer_page import Page, require_browser

import dispatchtrace as dt

pytestmark = [pytest.mark.slow, pytest.mark.browser]

require_browser()


class Long(nn.Module):
    """One call of about a thousand ops, the NaN made by its last."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(500):
            x = (x * 1.0001).add(1e-6)
        return (x - 10.0).sqrt()


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.long = Long()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.long(x)


def test_n_says_what_it_opens_while_it_lays_out(browser: object, tmp_path: Path) -> None:
    net = Net()
    with torch.no_grad(), dt.capture(net, values="stats") as g:
        net(torch.rand(4))
    found = g.first_nonfinite()
    assert found is not None and found.op.call.path == "long" and len(g.ops) > 1000
    p = Page(browser, g.render(tmp_path / "long.html", depth=1))
    p.page.evaluate("""() => { window.said = [];  // every text the status line takes
      new MutationObserver(() => window.said.push(document.getElementById('traced').textContent))
        .observe(document.getElementById('traced'), {childList: true, characterData: true, subtree: true}); }""")
    p.page.locator("#canvas").click(position={"x": 5, "y": 5})
    p.page.keyboard.press("n")
    p.idle()
    assert p.page.evaluate("DT.app.selected") == f"o{found.op.index}"
    said = p.page.evaluate("window.said")
    assert any(re.fullmatch(rf"opening long \(1,0\d\d ops\) to %{found.op.name} …", s) for s in said), said
    assert p.page.inner_text("#traced") == ""  # done: the line is cleared when the op is selected
    p.close()


class Step(nn.Module):
    def forward(self, p: torch.Tensor, g: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return p.clone().addcdiv_(g, v.sqrt().add_(1e-8), value=-0.1)  # Adam's update, in place


def test_an_in_place_ops_values_show_its_result_once(browser: object, tmp_path: Path) -> None:
    torch.manual_seed(0)
    with torch.no_grad(), dt.capture(Step(), values="stats") as g:
        Step()(torch.randn(3), torch.randn(3), torch.rand(3))
    p = Page(browser, g.render(tmp_path / "step.html", depth="ops"))
    in_place = [o for o in g.ops if o.target.startswith(("aten.addcdiv_.", "aten.add_."))]
    assert len(in_place) == 2
    for op in in_place:
        assert op.outputs == op.mutated  # one ref: written and returned
        p.page.evaluate(f"DT.app.select('o{op.index}')")
        details = p.page.inner_text("#details")
        assert details.count(f"%{op.name}: {op.outputs[0].label}") == 1, details
    p.close()
