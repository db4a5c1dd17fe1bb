"""The viewer's details panel and labels in headless Chromium, on a small training step.

A backward page's calls and its ``<capture>`` list the tensors their ops read from outside and the tensors
they leave (``render/_html_io.py``), as forward calls list theirs; a call with one op says "1 op directly";
the second line of a box stays readable on the fills of every colour mode.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from viewer_page import Page, require_browser

import dispatchtrace as dt
from dispatchtrace.views import phase_graph

pytestmark = [pytest.mark.slow, pytest.mark.browser]

require_browser()

#: {row name: its text, or the list of its tensors where it shows tensors} of the details panel
ROWS = """Object.fromEntries([...document.querySelectorAll('#details tr')].map(r => {
  const codes = [...r.cells[1].querySelectorAll('code')].map(c => c.textContent);
  return [r.cells[0].textContent, codes.length ? codes : r.cells[1].textContent];
}))"""

#: the lowest WCAG contrast ratio between a drawn box's lines and its fill
CONTRAST = """() => {
  const rgb = s => s.match(/[\\d.]+/g).slice(0, 3).map(Number);
  const lum = c => { const [r, g, b] = c.map(v => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
                     return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
  let low = Infinity;
  document.querySelectorAll('#viewport .node').forEach(n => {
    const a = lum(rgb(getComputedStyle(n.querySelector('rect')).fill));
    n.querySelectorAll('text').forEach(t => {
      const b = lum(rgb(getComputedStyle(t).fill));
      low = Math.min(low, (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05));
    });
  });
  return low;
}"""


@pytest.fixture(scope="module")
def step() -> dt.Graph:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    x = torch.ones(2, 4)
    with dt.capture(net) as g:
        net(x).sum().backward()
    return g


def rows(p: Page, key: str) -> dict[str, str]:
    p.page.evaluate(f"DT.app.select('{key}')")
    return p.page.evaluate(ROWS)


def test_backward_calls_and_the_capture_list_their_tensors(browser: object, step: dt.Graph, tmp_path: Path) -> None:
    back = phase_graph(step, "backward")
    assert all(not c.inputs and not c.outputs for c in back.calls)  # the view records none: the page derives them
    p = Page(browser, step.render(tmp_path / "backward.html", phase="backward", depth="ops"))
    first = next(c["id"] for c in p.page.evaluate("DT.app.model.calls") if c["path"] == "0")
    r = rows(p, f"c{first}")
    # the first Linear's backward reads ReLU's gradient (f32[2, 8]) and the input, and leaves the weight's and bias's gradients
    assert r["inputs"] == ["f32[2, 8]", "input: f32[2, 4]"]
    assert sorted(r["outputs"]) == ["f32[8, 4]", "f32[8]"]
    relu = rows(p, "c" + str(first + 1))
    assert relu["inputs"] and relu["outputs"] == ["f32[2, 8]"]
    top = rows(p, "c0")  # <capture>: the capture's input, and the gradients it leaves
    assert top["inputs"] == ["input: f32[2, 4]"]
    assert sorted(top["outputs"]) == ["f32[3, 8]", "f32[3]", "f32[8, 4]", "f32[8]"]
    p.close()


def test_a_call_with_one_op_says_one_op(browser: object, step: dt.Graph, tmp_path: Path) -> None:
    p = Page(browser, step.render(tmp_path / "forward.html", depth="ops"))
    relu = next(c["id"] for c in p.page.evaluate("DT.app.model.calls") if c["path"] == "1")
    assert rows(p, f"c{relu}")["contains"] == "0 calls, 1 op directly"
    assert rows(p, "c1")["contains"] == "3 calls, 0 ops directly"
    p.close()


@pytest.mark.parametrize("mode", ["flops", "bytes", "params", "type", "nonfinite"])
def test_the_second_line_stays_readable_on_every_fill(browser: object, step: dt.Graph, tmp_path: Path, mode: str) -> None:
    g = step
    if mode == "nonfinite":  # a NaN made in the ReLU's Linear: the first NaN/Inf's red, the later ones' pink
        net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
        with torch.no_grad():
            net[0].bias[0] = float("nan")
        with torch.no_grad(), dt.capture(net, values="stats") as g:
            net(torch.ones(2, 4))
    p = Page(browser, g.render(tmp_path / "colours.html", depth=1))
    p.page.select_option("#colour", mode)
    p.idle()
    assert p.page.evaluate("[...document.querySelectorAll('#viewport .node rect')].some(r => r.style.fill)")
    assert p.page.evaluate(CONTRAST) >= 4.5  # WCAG AA for text
    p.close()
