"""The HTML viewer in a real browser: headless Chromium (Debian's package) driven by playwright.

Screenshots go to ``$DISPATCHTRACE_SCREENSHOTS`` (default: a pytest temporary folder, printed);
they are for people to look at, never compared pixel by pixel.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from models import llama7b as build_llama7b
from viewer_page import Page, require_browser

import dispatchtrace as dt

pytestmark = [pytest.mark.slow, pytest.mark.browser]

require_browser()


@pytest.fixture(scope="module")
def llama7b() -> dt.Graph:
    """The 7B Llama-style decoder of examples/llama_meta.py (32 layers, hidden 4096), on meta."""
    return build_llama7b()


@pytest.fixture(scope="module")
def cool_html(cool: dt.Graph, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return cool.render(tmp_path_factory.mktemp("cool") / "cool.html")


@pytest.fixture(scope="module")
def resnet_html(resnet50: dt.Graph, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return resnet50.render(tmp_path_factory.mktemp("resnet") / "resnet50.html")


def test_coolcnn_opens_with_its_two_branches_and_their_merge(browser: object, cool_html: Path, shots: Path) -> None:
    p = Page(browser, cool_html)
    edges = p.edges()
    first, second = p.key("initial_conv"), p.key("parallel_conv")
    pool0, pool1, add = p.key("max_pool#0"), p.key("max_pool#1"), p.key("add")
    assert ("i0", first) in edges and ("i0", second) in edges  # one input, two branches
    assert (pool0, add) in edges and (pool1, add) in edges  # merged by the add
    assert not {(pool0, pool1), (pool1, pool0)} & edges  # and parallel: neither feeds the other
    p.page.screenshot(path=str(shots / "coolcnn.png"))
    p.close()


def test_opening_layer1_0_shows_its_three_relu_calls(browser: object, resnet_html: Path, shots: Path) -> None:
    p = Page(browser, resnet_html)
    before = p.nodes()
    assert not [t for t in before.values() if "layer1.0.relu" in t]
    layer = p.key("layer1.0")
    p.click(layer)
    after = p.nodes()
    relus = sorted(t.split(" | ")[0].removeprefix("▸ ") for t in after.values() if t.startswith("▸ layer1.0.relu"))
    assert relus == ["layer1.0.relu#0", "layer1.0.relu#1", "layer1.0.relu#2"]
    assert layer not in after and p.page.locator(f'#viewport .box[data-key="{layer}"]').count() == 1
    assert "its only call" in p.page.inner_text("#details") and "layer1.0" in p.page.inner_text("#crumbs")
    p.click(p.key("layer1.0.relu#1"))  # opens it (to its relu_ op) and selects it
    assert "call 2 of 3 of this module" in p.page.inner_text("#details")
    p.page.screenshot(path=str(shots / "resnet50-layer1.0-open.png"))
    p.page.click(f'#viewport .box[data-key="{layer}"] .head')  # the title bar closes it again
    p.idle()
    assert p.nodes() == before
    p.close()


def test_search_finds_add_and_opens_its_call(browser: object, resnet_html: Path, resnet50: dt.Graph, shots: Path) -> None:
    p = Page(browser, resnet_html)
    p.page.fill("#search", "aten.add_")
    adds = [op for op in resnet50.ops if op.target.startswith("aten.add_")]
    assert p.page.inner_text("#hits") == f"{len(adds)} found"
    p.press("#search", "Enter")
    p.press("#search", "Enter")  # the second add_: inside layer1.1, a folded repetition
    second = adds[1]
    key = f"o{second.index}"
    assert p.page.inner_text("#hits") == f"2 of {len(adds)}"
    assert key in p.nodes() and p.page.locator(f'#viewport .node.selected[data-key="{key}"]').count() == 1
    details = p.page.inner_text("#details")
    assert second.name in details and second.target in details and second.call.path in details
    box = p.page.locator(f'#viewport .node[data-key="{key}"]').bounding_box()
    stage = p.page.locator("#stage").bounding_box()
    assert box is not None and stage is not None
    assert stage["x"] <= box["x"] <= stage["x"] + stage["width"] and stage["y"] <= box["y"] <= stage["y"] + stage["height"]
    p.page.screenshot(path=str(shots / "resnet50-search-add_.png"))
    p.press("#search", "Shift+Enter")
    assert p.page.inner_text("#hits") == f"1 of {len(adds)}"
    p.close()


def test_the_pages_search_finds_what_views_search_finds(browser: object, resnet_html: Path, resnet50: dt.Graph) -> None:
    """One search rule: the page's results, in order, are ``views.search``'s (exact names first, case-sensitive)."""
    from dispatchtrace.views import search

    p = Page(browser, resnet_html)
    for q in ("convolution_3", "relu", "layer1.0.relu#?", "aten.add*", "Bottleneck", "bottleneck", "*.[0-1].conv?",
              "layer2*", "[", "t"):
        want = [f"c{resnet50.calls.index(x) + 1}" if isinstance(x, dt.Call) else f"o{x.index}" for x in search(resnet50, q)]
        assert p.page.evaluate("q => DT.search(DT.app.model, q)", q) == want, q
    p.page.fill("#search", "convolution_3")
    p.press("#search", "Enter")
    assert p.page.locator("#viewport .node.selected").get_attribute("data-key") == f"o{resnet50.find_ops('aten.conv*')[3].index}"
    p.close()


def test_details_show_the_flops_costs_gives(browser: object, resnet_html: Path, resnet50: dt.Graph) -> None:
    p = Page(browser, resnet_html)
    layer = resnet50.find_calls("layer1.0")[0]
    p.click(p.key("layer1.0"))
    shown = p.page.get_attribute("#details .flops", "data-v")
    assert shown is not None and int(shown) == resnet50.costs().call(layer).flops
    conv = resnet50.find_ops("aten.convolution*", path="layer1.0.conv2")[0]
    p.click(p.key("layer1.0.conv2"))
    p.click(p.key(conv.name))
    assert int(p.page.get_attribute("#details .flops", "data-v") or -1) == resnet50.costs().op(conv).flops
    assert "f32[64, 64, 3, 3]" in p.page.inner_text("#details")  # the weight's shape among the arguments
    p.close()


def test_colour_by_flops_changes_fills_and_shows_a_legend(browser: object, resnet_html: Path, shots: Path) -> None:
    p = Page(browser, resnet_html)
    plain = p.fills()
    p.page.select_option("#colour", "flops")
    p.idle()
    coloured = p.fills()
    assert len(coloured) == len(plain) and len(set(coloured)) > len(set(plain)) + 3
    assert "FLOPs" in p.page.inner_text("#legend") and p.page.is_visible("#legend")
    p.page.screenshot(path=str(shots / "resnet50-flops.png"))
    p.page.select_option("#colour", "none")
    p.idle()
    assert p.fills() == plain
    p.close()


def test_export_svg_is_a_valid_svg_of_the_view(browser: object, cool_html: Path, tmp_path: Path) -> None:
    p = Page(browser, cool_html)
    with p.page.expect_download() as info:
        p.page.click("#export")
    saved = tmp_path / info.value.suggested_filename
    info.value.save_as(saved)
    root = ET.parse(saved).getroot()
    ns = "{http://www.w3.org/2000/svg}"
    assert root.tag == f"{ns}svg" and int(root.get("width", "0")) > 100
    texts = {t.text for t in root.iter(f"{ns}text")}
    assert {"▸ initial_conv", "▸ parallel_conv"} <= texts
    assert len(list(root.iter(f"{ns}path"))) >= len(p.edges())
    p.close()


def test_llama_7b_on_meta_opens_and_expands_a_decoder_layer(browser: object, llama7b: dt.Graph, tmp_path: Path,
                                                           shots: Path) -> None:
    p = Page(browser, llama7b.render(tmp_path / "llama7b.html"))
    run = p.key("layers.0–31 ×32")  # the 32 decoder layers, folded
    p.click(run)
    layer = p.key("layers.5")
    p.click(layer)
    inside = {t.split(" | ")[0].removeprefix("▸ ") for t in p.nodes().values()}
    assert {"layers.5.attn", "layers.5.mlp", "layers.4", "layers.6"} <= inside
    attn = llama7b.find_calls("layers.5.attn")[0]
    p.click(p.key("layers.5.attn"))
    assert int(p.page.get_attribute("#details .flops", "data-v") or -1) == llama7b.costs().call(attn).flops
    p.page.screenshot(path=str(shots / "llama7b-layer5-open.png"))
    p.close()


def test_export_draws_the_whole_view_whatever_the_zoom(browser: object, llama7b: dt.Graph, tmp_path: Path) -> None:
    """Everything open on the decoder (3k items: the page draws only what is near the window), zoomed in:
    the SVG holds every item and edge of the view, and the PNG, too large for a canvas, is refused with its size."""
    p = Page(browser, llama7b.render(tmp_path / "llama7b.html"))
    p.page.evaluate("async () => { DT.app.select('c1'); await DT.app.openAll(); DT.app.view.centre('c1'); DT.app.view.zoomBy(4); }")
    p.idle()
    view = p.page.evaluate("(() => { const at = DT.app.view.at, ks = Object.keys(at).filter(k => k !== 'c0');"
                           " return [ks.filter(k => !at[k].open).length, ks.filter(k => at[k].open).length, DT.app.view.edges.length,"
                           " document.querySelectorAll('#viewport .node').length, Math.ceil(at.c0.w), Math.ceil(at.c0.h)]; })()")
    leaves, boxes, edges, drawn, w, h = view
    assert leaves > 3000 and drawn < leaves / 2  # the page itself holds only the part near the window
    with p.page.expect_download() as info:
        p.page.click("#export")
    saved = tmp_path / info.value.suggested_filename
    info.value.save_as(saved)
    root = ET.parse(saved).getroot()
    ns = "{http://www.w3.org/2000/svg}"
    groups = [g.get("class", "").split() for g in root.iter(f"{ns}g")]
    assert sum("node" in c for c in groups) == leaves and sum("box" in c for c in groups) == boxes
    assert sum(e.get("class") == "edge" for e in root.iter(f"{ns}path")) == edges
    assert (int(root.get("width", "0")), int(root.get("height", "0"))) == (w, h)
    p.page.click("#export-png")
    assert p.page.inner_text("#traced") == (f"no PNG: the view is {w:,} × {h:,} px, larger than a PNG canvas holds "
                                            "(16,000 px a side, 120 million px): export SVG, or close some calls")
    p.close()
