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
    assert d.cause == ("it reads secondary_conv.weight (parameter), which differs already",)
    assert "the first departure: " + d.cause[0] in details and f"{d.first.error:.3g}" in details  # what the report says
    assert "its inputs agree" not in details and d.cause[0] in str(d)
    sa, sb = a.stats[d.first.a.outputs[0].id], b.stats[d.first.b.outputs[0].id]
    assert str(sa) in details and str(sb) in details and str(sa) != str(sb)  # both sides, as Python prints them
    p.page.click(f'#tree .row[data-key="{sec}"]')  # closes it: the call's own details, both columns
    assert "largest relative difference of its outputs" in p.page.inner_text("#details")
    p.page.click("#first")
    p.page.keyboard.press("f")
    assert p.page.evaluate("DT.diff.selected") == key
    p.page.screenshot(path=str(shots / "diff-perturbed.png"))
    p.close()


def bf16_diff() -> dt.views.Diff:
    """Two Blocks in float32 against the same under bf16 autocast (stats only): the casts autocast adds in each."""
    torch.manual_seed(0)
    model = nn.Sequential(Block(), Block()).eval()
    x = torch.randn(2, 6, 32, generator=torch.Generator().manual_seed(1))
    graphs = []
    for bf16 in (False, True):
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16), dt.capture(model, values="stats") as g:
            model(x)
        graphs.append(g)
    return dt.diff(*graphs, rtol=1e-3, atol=1e-5)


def test_bf16_casts_are_marked_inside_aligned_calls(browser: object, tmp_path: Path, shots: Path) -> None:
    d = bf16_diff()
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


def test_errors_print_as_python_prints_them(browser: object, tmp_path: Path) -> None:
    a, b = one_more_call()
    dt.write_diff(dt.diff(a, b), tmp_path / "numbers.html")
    p = open_page(browser, tmp_path / "numbers.html")
    values = [2.69e-10, 1.23e10, 1e-20, 1.5e-20, 3.3e-5, 0.000123, 0.00123, 0.5, 1.0, 100.0, 999.6, 1234.0, 1e10, 9.996e-11, 1e100]
    got = p.page.evaluate("(vs) => vs.map(v => DT.diff.errText(v, 'stats'))", values)
    assert got == [f"{v:.3g}" for v in values]  # 2.69e-10, not 2.69e-1; 1.23e+10, not 1.23e+1
    assert p.page.evaluate("[DT.diff.errText('inf', 'stats'), DT.diff.errText(0, 'stats'), DT.diff.errText(1, 'none')]") == \
        ["inf", "0", "–"]
    p.close()


def test_errors_within_tolerance_are_not_coloured_as_departures(browser: object, tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 16))
    other = copy.deepcopy(model)
    with torch.no_grad():
        other[0].weight.mul_(1 + 1e-7)  # within rtol 1e-4 everywhere
        other[2].weight[0, 0] += 0.5  # beyond it: the last layer departs
    x = torch.randn(4, 16)
    graphs = []
    for m in (model, other):
        with torch.no_grad(), dt.capture(m, values="stats") as g:
            m(x)
        graphs.append(g)
    a, b = graphs
    d = dt.diff(a, b, rtol=1e-4, atol=1e-6)
    small = [q for cd in d.calls for q in cd.ops if 0 < q.error < 1e-4]
    assert small and not any(q.departs for q in small) and d.first is not None and d.first.a.call.path == "2"  # type: ignore[union-attr]
    dt.write_diff(d, tmp_path / "tol.html")
    p = open_page(browser, tmp_path / "tol.html")
    p.page.click("#open-all")
    fills = p.page.evaluate("Object.fromEntries([...document.querySelectorAll('#tree .row')].map(r => [r.dataset.key, "
                            "[r.querySelector('.err').style.background, r.querySelector('.err').innerText]]))")
    agree = p.page.evaluate("(() => { const e = document.createElement('i'); e.style.background = DT.AGREE; return e.style.background; })()")
    pairs = [q for cd in d.calls for q in cd.ops]
    payload = p.page.evaluate("DT.diff.p.pairs.map(q => [q.error, q.departs])")
    assert len(payload) == len(pairs)
    for k, q in enumerate(pairs):
        fill, text = fills[f"p{k}"]
        assert text == f"{q.error:.3g}"
        if q.error == 0:
            assert fill == "rgb(255, 255, 255)"
        elif not q.departs:
            assert fill == agree, (q, fill)  # e.g. 1e-7 within rtol 1e-4: the colour of agreement, not red
        else:
            assert fill not in (agree, "rgb(255, 255, 255)", ""), q
    assert "within tolerance" in p.page.inner_text("#legend") and "rtol 0.0001" in p.page.inner_text("#legend")
    p.close()


def test_counts_are_calls_as_the_report_counts_them_and_the_cast_is_named(browser: object, tmp_path: Path) -> None:
    d = bf16_diff()
    n = d.counts
    assert n["calls"] == len(d.structural) == 4 and n["added"] > n["calls"]  # 4 Linear calls, several casts in each
    assert f"structure: {n['calls']} calls differ ({n['added']} ops added)" in str(d)
    dt.write_diff(d, tmp_path / "bf16.html")
    p = open_page(browser, tmp_path / "bf16.html")
    p.page.click("#close-all")
    shown = rows(p)
    blocks = [t for t in shown.values() if t.startswith(("0 ", "1 "))]
    assert sorted(blocks) == sorted(t for t in blocks if "2 calls inside differ" in t) and len(blocks) == 2
    assert f"{n['calls']} calls differ in structure" in p.page.inner_text("#verdict")
    p.page.click("#first")
    details = p.page.inner_text("#details")
    assert d.first is not None and d.cause and "as autocast adds" in d.cause[0]
    assert "the first departure: " + d.cause[0] in details and "its inputs agree" not in details
    p.page.click("#open-all")
    linears = [t for k, t in rows(p).items() if k[0] == "c" and "Linear" in t]
    assert linears and all("ops added" in t for t in linears)
    p.close()
