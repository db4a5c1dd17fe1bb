"""The viewer's navigation in headless Chromium: upstream/downstream, breadcrumbs, open to depth, open all inside,
edge shapes on hover, the mini-map, PNG export, and layout in the page's Web Worker (none on the page itself)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from viewer_page import Page, require_browser

import dispatchtrace as dt

pytestmark = [pytest.mark.slow, pytest.mark.browser]

require_browser()


@pytest.fixture(scope="module")
def resnet_html(resnet50: dt.Graph, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return resnet50.render(tmp_path_factory.mktemp("resnet") / "resnet50.html")


def reach(g: dt.Graph, op: dt.Op, *, up: bool) -> set[int]:
    """Indices of the ops upstream (or downstream) of ``op`` by the collapsed graph's op-level edges."""
    cg = g.collapse("ops")
    step: dict[int, list[int]] = {}
    for e in cg.edges:
        if e.src.op is not None and e.dst.op is not None:
            a, b = (e.dst.op.index, e.src.op.index) if up else (e.src.op.index, e.dst.op.index)
            step.setdefault(a, []).append(b)
    seen: set[int] = set()
    todo = [op.index]
    while todo:
        for j in step.get(todo.pop(), []):
            if j not in seen:
                seen.add(j)
                todo.append(j)
    return seen


def lit(p: Page, cls: str) -> set[str]:
    return set(p.page.evaluate(f"[...document.querySelectorAll('#viewport .node.{cls}')].map(n => n.dataset.key)"))


def test_upstream_and_downstream_are_the_graphs_ancestors_and_descendants(browser: object, cool: dt.Graph,
                                                                         tmp_path: Path, shots: Path) -> None:
    p = Page(browser, cool.render(tmp_path / "cool-ops.html", depth="ops"))  # every op drawn
    add = cool.find_ops("aten.add*")[0]
    p.click(f"o{add.index}")
    p.page.keyboard.press("u")
    up = reach(cool, add, up=True)
    assert lit(p, "op.up") == {f"o{j}" for j in up} and p.page.inner_text("#traced") == f"{len(up)} ops upstream"
    assert "i0" in lit(p, "up")  # and the input they read
    p.page.screenshot(path=str(shots / "coolcnn-upstream-of-add.png"))
    p.page.click("#down")
    down = reach(cool, add, up=False)
    assert lit(p, "op.down") == {f"o{j}" for j in down} and p.page.inner_text("#traced") == f"{len(down)} ops downstream"
    assert not up & down and len(up) >= 6 and len(down) >= 6
    p.page.keyboard.press("Escape")
    assert not lit(p, "up") | lit(p, "down")
    p.close()


def test_the_one_keydown_handler_zooms_pans_fits_and_leaves_the_search_box_alone(browser: object, resnet_html: Path) -> None:
    p = Page(browser, resnet_html)
    t = lambda: p.page.evaluate("[DT.app.view.t.x, DT.app.view.t.y, DT.app.view.t.k]")  # noqa: E731
    fit = t()
    p.page.keyboard.press("+")
    assert t()[2] > fit[2]
    x = t()[0]
    p.page.keyboard.press("ArrowLeft")
    assert t()[0] == x + 60
    p.page.keyboard.press("0")
    assert t() == fit
    p.page.fill("#search", "relu")
    p.press("#search", "+")  # typed into the box, not a zoom
    assert t() == fit and p.page.input_value("#search") == "relu+"
    p.close()


def test_breadcrumbs_follow_the_current_call_and_lead_back_up(browser: object, resnet_html: Path) -> None:
    p = Page(browser, resnet_html)
    assert p.page.inner_text("#crumbs") == "<capture> › ResNet"
    p.click(p.key("layer1.0"))
    p.click(p.key("layer1.0.relu#1"))
    assert p.page.inner_text("#crumbs") == "<capture> › ResNet › layer1 › layer1.0 › layer1.0.relu#1"
    p.page.click("#crumbs a:text-is('layer1')")
    p.idle()
    assert p.page.inner_text("#details h3") == "layer1" and p.page.inner_text("#crumbs") == "<capture> › ResNet › layer1"
    p.close()


def test_opening_a_call_leaves_the_boxes_before_it_where_they_were(browser: object, resnet_html: Path) -> None:
    p = Page(browser, resnet_html)
    above = [p.key(name) for name in ("conv1", "bn1", "maxpool")]
    where = {k: p.page.locator(f'#viewport .node[data-key="{k}"]').bounding_box() for k in above}
    p.click(p.key("layer1.0"))
    p.click(p.key("layer1.0.conv1"))
    for k in above:
        assert p.page.locator(f'#viewport .node[data-key="{k}"]').bounding_box() == pytest.approx(where[k], abs=0.5)
    p.close()


def test_open_to_depth_and_open_all_inside(browser: object, resnet_html: Path, resnet50: dt.Graph) -> None:
    p = Page(browser, resnet_html)
    p.page.uncheck("#fold")
    p.idle()
    p.page.fill("#depth", "2")
    p.page.click("#to-depth")
    p.idle()
    calls = [None, *resnet50.calls]  # the payload's call ids: 0 the capture, then entry order
    boxes = set(p.page.evaluate("[...document.querySelectorAll('#viewport .box')].map(b => b.dataset.key)"))
    assert boxes == {f"c{i}" for i, c in enumerate(calls) if i and c.depth < 2 and (c.children or c.ops)}
    closed = {k for k in p.nodes() if k[0] == "c"}
    assert closed == {f"c{i}" for i, c in enumerate(calls) if i and c.depth == 2} and len(closed) == 16  # the bottlenecks
    assert p.page.is_visible("#map")  # the whole ResNet at depth 2 does not fit the window: the mini-map shows
    before = p.page.evaluate("DT.app.view.t.y")
    box = p.page.locator("#map canvas").bounding_box()
    assert box is not None
    p.page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] - 2)  # its bottom: the view moves down
    assert p.page.evaluate("DT.app.view.t.y") < before
    layer = resnet50.find_calls("layer2.1")[0]
    p.click(p.key("layer2.1"))  # opens it
    p.page.keyboard.press("a")  # and everything inside
    p.idle()
    drawn = p.nodes()
    inside = [op for op in layer.all_ops() if f"o{op.index}" in drawn]
    noise = set(p.page.evaluate("DT.app.model.p.noise"))
    assert len(inside) == len([op for op in layer.all_ops() if op.index not in noise]) == 10  # 3 convs, 3 bns, 3 relus, add
    p.close()


def test_edge_hover_shows_the_tensor_shapes(browser: object, cool: dt.Graph, tmp_path: Path) -> None:
    p = Page(browser, cool.render(tmp_path / "cool.html"))
    add, pool = p.key("add"), p.key("max_pool#0")
    hit = p.page.locator(f'#viewport .edge[data-src="{pool}"][data-dst="{add}"] + .hit')
    hit.dispatch_event("mouseover", {"clientX": 300, "clientY": 300})
    tip = p.page.inner_text("#tip")
    merge = cool.find_ops("aten.add*")[0]
    assert p.page.is_visible("#tip") and tip.startswith("max_pool#0 → add") and merge.inputs[0].label in tip
    p.close()


def test_export_png_decodes_to_the_view(browser: object, cool: dt.Graph, tmp_path: Path) -> None:
    pil = pytest.importorskip("PIL.Image")
    p = Page(browser, cool.render(tmp_path / "cool.html"))
    with p.page.expect_download() as info:
        p.page.click("#export-png")
    saved = tmp_path / info.value.suggested_filename
    info.value.save_as(saved)
    assert saved.name == "CoolCNN.png"
    image = pil.open(io.BytesIO(saved.read_bytes()))
    image.load()
    w, h = p.page.evaluate("[DT.app.view.at.c0.w, DT.app.view.at.c0.h]")
    assert image.format == "PNG" and image.size == (round(2 * round(w + 0.4999)), round(2 * round(h + 0.4999)))
    assert sum(1 for n in image.convert("L").histogram() if n) > 20  # drawn, not blank
    p.close()


def test_layout_runs_in_the_worker_never_on_the_page(browser: object, resnet_html: Path) -> None:
    p = Page(browser, resnet_html)
    p.page.evaluate("window.onPage = 0; const f = dagre.layout; dagre.layout = function () { onPage++; return f.apply(this, arguments); }; 0")
    first = p.page.evaluate("DT.app.layout.stats")
    assert first["main"] == 0 and first["worker"] >= 5  # the first picture: the capture, ResNet and its four layers
    p.click(p.key("layer1.0"))
    p.click(p.key("layer1.1–2 ×2"))
    p.click(p.key("layer1.0.downsample"))
    stats = p.page.evaluate("DT.app.layout.stats")
    assert p.page.evaluate("onPage") == 0 and stats["main"] == 0 and stats["worker"] > first["worker"]
    p.close()  # no console error, no request but the page's own (and its worker's blob:)


def test_the_notebook_iframe_draws_the_viewer(browser: object, cool: dt.Graph, tmp_path: Path) -> None:
    cell = tmp_path / "cell.html"  # what a notebook puts in the output cell of `g`
    cell.write_text(f"<!DOCTYPE html><html><body>{cool._repr_mimebundle_(include=['text/html'])['text/html']}</body></html>")
    p = Page(browser, cell, ready=False)
    frame = p.page.frame_locator("iframe")
    frame.locator("#viewport .node").first.wait_for()
    inner = p.page.frames[1]
    inner.wait_for_function("!document.body.hasAttribute('data-busy')")
    assert inner.evaluate("document.querySelectorAll('#viewport .node').length") == 17  # CoolCNN at its depth
    assert inner.evaluate("DT.app.layout.stats.worker") > 0 and inner.evaluate("DT.app.layout.stats.main") == 0
    p.requests = [r for r in p.requests if r != "about:srcdoc"]
    p.close()


def test_a_large_picture_draws_what_is_near_the_window_and_the_rest_as_it_moves(browser: object, resnet50: dt.Graph,
                                                                                tmp_path: Path) -> None:
    p = Page(browser, resnet50.render(tmp_path / "resnet-ops.html", depth="ops", fold=False))
    everything = p.page.evaluate("Object.keys(DT.app.view.at).filter(k => k !== 'c0' && !DT.app.view.at[k].open).length")
    assert len(p.nodes()) == everything > 150
    p.page.evaluate("DT.CULL = 50; DT.app.view.t.k = 1.5; DT.app.view.paint()")  # as if the picture were large
    near = p.nodes()
    assert 0 < len(near) < everything / 2
    last = f"o{resnet50.ops[-1].index}"
    assert last not in near
    p.page.evaluate(f"DT.app.view.centre('{last}')")  # move the view: what comes into the window is drawn
    p.page.wait_for_selector(f'#viewport .node[data-key="{last}"]')
    assert len(p.nodes()) < everything / 2
    p.close()


def test_tooltip_fits_the_stage_and_the_minimap_frame_stays_inside_the_map(browser: object, resnet_html: Path,
                                                                          resnet50: dt.Graph) -> None:
    p = Page(browser, resnet_html)
    p.page.evaluate("async () => { DT.app.select('c1'); await DT.app.openAll(); DT.app.view.fit(); }")
    p.idle()
    stage = p.page.locator("#stage").bounding_box()
    canvas = p.page.locator("#map canvas").bounding_box()
    assert stage is not None and canvas is not None and canvas["width"] >= 60  # a tall picture's map is no sliver
    p.page.evaluate("DT.app.view.zoomBy(8)")
    frame = p.page.locator("#map .frame").bounding_box()
    assert frame is not None and frame["width"] >= 2 and frame["height"] >= 2
    assert canvas["x"] - 1 <= frame["x"] and frame["x"] + frame["width"] <= canvas["x"] + canvas["width"] + 2
    # an edge's tooltip near the stage's right edge opens to the left of the pointer, inside the stage
    p.page.evaluate("DT.app.view.fit()")
    x, y = stage["x"] + stage["width"] - 5, stage["y"] + 50
    p.page.dispatch_event("#viewport .hit", "mouseover", {"clientX": x, "clientY": y})
    tip = p.page.locator("#tip").bounding_box()
    assert tip is not None and tip["x"] + tip["width"] <= stage["x"] + stage["width"] + 1
    p.page.evaluate("DT.app.select('c0')")
    assert resnet50.inputs[0].label in p.page.inner_text("#details")  # the <capture> box shows its inputs
    p.close()
