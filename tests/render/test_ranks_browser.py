"""The several-ranks page in headless Chromium: each rank's tab draws its own viewer, the selector switches them."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from test_ranks_page import Branchy, _rank
from viewer_page import require_browser

import dispatchtrace as dt

pytestmark = [pytest.mark.slow, pytest.mark.browser]

require_browser()


def test_rank_tabs_each_draw_their_viewer(browser, tmp_path: Path, shots: Path) -> None:
    torch.manual_seed(0)
    model = Branchy()
    path = tmp_path / "ranks.html"
    dt.write_ranks({r: _rank(r, 2, model) for r in (0, 1)}, str(path))
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.resolve().as_uri())
    frame = page.frame_locator('iframe.rank[data-rank="0"]')
    frame.locator("#viewport .node").first.wait_for()
    assert page.locator("iframe.rank.on").get_attribute("data-rank") == "0"
    page.click('#rank-bar button[data-rank="1"]')
    assert page.locator("iframe.rank.on").get_attribute("data-rank") == "1"
    page.frame_locator('iframe.rank[data-rank="1"]').locator("#viewport .node").first.wait_for()
    assert page.locator("tr.first").count() == 1 and "max" in page.locator("tr.first").inner_text()
    page.click('tr.first td[data-rank="0"]')  # a cell opens its rank's tab
    assert page.locator("iframe.rank.on").get_attribute("data-rank") == "0"
    page.screenshot(path=str(shots / "ranks.png"), full_page=True)
    assert errors == []
