"""The page of a diff in headless Chromium: the first departure jumped to and shown on both sides, the casts
bf16 autocast adds marked inside their calls, the calls of one side only, and nothing fetched."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
from test_diff_page import one_more_call, run
from torch import nn
from viewer_page import Page, require_browser

import dispatchtrace as dt
from dispatchtrace.models import CoolCNN

pytestmark = [pytest.mark.slow, pytest.mark.browser]

require_browser()


class Block(nn.Module):
    def __init__(self, dim: int = 32) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.mlp(self.norm(x))


def open_page(browser: object, path: Path) -> Page:
    p = Page(browser, path, ready=False)
    p.page.wait_for_selector("#tree .row")
    return p


def rows(p: Page) -> dict[str, str]:
    """``{key: text}`` of each row shown, its parts (label, type, tags, error) joined by spaces."""
    return p.page.evaluate("Object.fromEntries([...document.querySelectorAll('#tree .row')].map(r => [r.dataset.key, "
                           "[...r.children].filter(c => !c.classList.contains('tw')).map(c => c.innerText).join(' ')]))")


def test_first_departure_is_marked_and_jumped_to(browser: object, tmp_path: Path, shots: Path) -> None:
    torch.manual_seed(0)
    model = CoolCNN()
    other = copy.deepcopy(model)
    with torch.no_grad():
        other.secondary_conv.weight[0, 0, 0, 0] += 0.5
    a, b = run(model), run(other)
    d = dt.diff(a, b)
    assert d.first is not None and d.first.a is not None and d.first.b is not None
    dt.write_diff(d, tmp_path / "perturbed.html")
    p = open_page(browser, tmp_path / "perturbed.html")
    assert p.page.inner_text("#verdict") == "they part"
    shown = rows(p)
    sec = next(k for k, t in shown.items() if t.startswith("secondary_conv"))
    assert "first departure inside" in shown[sec]  # closed, and tagged as holding it
    p.page.click("#first")
    key = p.page.evaluate("DT.diff.selected")
    assert key is not None and key[0] == "p"
    row = p.page.locator(f'#tree .row[data-key="{key}"]')
    assert row.is_visible() and "first" in (row.get_attribute("class") or "")
    assert f"%{d.first.a.name}" in row.inner_text() and "first departure" in row.inner_text()
    details = p.page.inner_text("#details")
    assert "the first departure (its inputs agree)" in details and f"{d.first.error:.3g}" in details
    sa, sb = a.stats[d.first.a.outputs[0].id], b.stats[d.first.b.outputs[0].id]
    assert str(sa) in details and str(sb) in details and str(sa) != str(sb)  # both sides, as Python prints them
    p.page.click(f'#tree .row[data-key="{sec}"]')  # closes it: the call's own details, both columns
    assert "largest relative difference of its outputs" in p.page.inner_text("#details")
    p.page.click("#first")
    p.page.keyboard.press("f")
    assert p.page.evaluate("DT.diff.selected") == key
    p.page.screenshot(path=str(shots / "diff-perturbed.png"))
    p.close()


def test_bf16_casts_are_marked_inside_aligned_calls(browser: object, tmp_path: Path, shots: Path) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(Block(), Block()).eval()
    x = torch.randn(2, 6, 32, generator=torch.Generator().manual_seed(1))
    graphs = []
    for bf16 in (False, True):
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16), dt.capture(model, values="stats") as g:
            model(x)
        graphs.append(g)
    d = dt.diff(*graphs, rtol=1e-3, atol=1e-5)
    dt.write_diff(d, tmp_path / "bf16.html")
    p = open_page(browser, tmp_path / "bf16.html")
    p.page.click("#open-all")
    shown = rows(p)
    assert not p.page.locator("#tree .row.side").count()  # every call aligned
    linears = [k for k, t in shown.items() if k[0] == "c" and "Linear" in t]
    assert len(linears) == 4 and all("added" in shown[k] for k in linears)
    added = [t for k, t in shown.items() if k[0] == "p" and "added in b" in t]
    assert len(added) == sum(1 for cd in d.calls for q in cd.ops if q.status == "added") and all("_to_copy" in t for t in added)
    fills = p.page.evaluate("Object.fromEntries([...document.querySelectorAll('#tree .row.call')].map(r => [r.dataset.key, r.querySelector('.err').style.background]))")
    coloured = [k for k, f in fills.items() if f and f not in ("rgb(255, 255, 255)", "")]
    assert len(coloured) >= 4  # the error grows through the blocks: coloured on the log scale
    assert "relative error" in p.page.inner_text("#legend")
    p.page.click("#close-all")
    p.page.click(f'#tree .row[data-key="{next(k for k, t in rows(p).items() if t.startswith("0 "))}"]')
    p.page.screenshot(path=str(shots / "diff-bf16.png"))
    p.close()


def test_a_call_of_one_side_shows_only_that_side(browser: object, tmp_path: Path) -> None:
    a, b = one_more_call()
    dt.write_diff(dt.diff(a, b), tmp_path / "side.html")
    p = open_page(browser, tmp_path / "side.html")
    side = p.page.locator("#tree .row.side")
    assert side.count() == 1 and "only in b" in side.inner_text()
    side.click()
    assert "(only in b)" in p.page.inner_text("#details h3") and "%addmm_1: f32[1, 2]" in p.page.inner_text("#details")
    assert p.page.locator("#first").is_disabled() and p.page.inner_text("#verdict").startswith("they")
    p.close()
