"""The viewer page as the browser tests drive it: one playwright page with its errors and requests recorded."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"

#: in the page: the drawn edges whose drawn path runs through a drawn box that is not one of its ends (nor a
#: call holding an end), sampled every 2 px along the path; sibling edges (both ends in one open call) apart
CROSSINGS = """() => {
  const m = DT.app.model, at = DT.app.view.at, vp = document.getElementById('viewport');
  const boxes = [...vp.querySelectorAll('.node, .box')].map(n => [n.dataset.key, at[n.dataset.key]]).filter(b => b[1]);
  const out = {sibling: 0, between: 0, siblings: 0, edges: 0, examples: []};
  for (const e of vp.querySelectorAll('path.edge')) {
    const a = e.dataset.src, b = e.dataset.dst, ends = new Set([...m.path(a), ...m.path(b)]);
    const sib = m.container(a) === m.container(b), bb = e.getBBox(), hit = new Set();
    const near = boxes.filter(([k, p]) => !ends.has(k) && p.x < bb.x + bb.width && p.x + p.w > bb.x && p.y < bb.y + bb.height && p.y + p.h > bb.y);
    const L = e.getTotalLength();
    if (near.length) for (let s = 0; s <= L; s += 2) {
      const q = e.getPointAtLength(s);
      for (const [k, p] of near) if (q.x > p.x + 1 && q.x < p.x + p.w - 1 && q.y > p.y + 1 && q.y < p.y + p.h - 1) hit.add(k);
    }
    out.edges++;
    if (sib) out.siblings++;
    if (hit.size) { if (sib) out.sibling++; else out.between++; if (out.examples.length < 12) out.examples.push([a, b, [...hit]]); }
  }
  return out;
}"""


def chromium() -> str | None:
    """Debian's chromium (``scripts/setup.sh --test`` installs it), or None where there is none."""
    return CHROMIUM if os.path.exists(CHROMIUM) else shutil.which("chromium")


def require_browser() -> None:
    """Skip the calling test module where playwright or chromium is missing (call it at module level)."""
    pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install -e '.[dev]')")
    if chromium() is None:
        pytest.skip(f"no chromium at {CHROMIUM} (scripts/setup.sh --test installs Debian's package)", allow_module_level=True)


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder screenshots go to."""
    folder = Path(os.environ.get("DISPATCHTRACE_SCREENSHOTS") or tmp_path_factory.mktemp("viewer-screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    print(f"viewer screenshots in {folder}")
    return folder


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """Headless chromium through playwright."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        yield b
        b.close()


class Page:
    """One viewer page, with every console error, page error and request it made."""

    def __init__(self, browser: object, path: Path, *, ready: bool = True) -> None:
        self.page = browser.new_page(viewport={"width": 1400, "height": 900}, accept_downloads=True)  # type: ignore[attr-defined]
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.url = path.resolve().as_uri()
        self.page.goto(self.url)
        if ready:  # drawn (a page that holds the viewer in a frame waits for it itself)
            self.page.wait_for_selector("#viewport .node")
            self.idle()

    def idle(self) -> None:
        """Wait until the page has laid out (in its worker) and drawn what the last action asked for."""
        self.page.wait_for_function("!document.body.hasAttribute('data-busy')")

    def nodes(self) -> dict[str, str]:
        """``{key: text}`` of every node drawn (closed calls, folded runs, ops, inputs, output)."""
        return self.page.evaluate("Object.fromEntries([...document.querySelectorAll('#viewport .node')]"
                                  ".map(n => [n.dataset.key, [...n.querySelectorAll('text')].map(t => t.textContent).join(' | ')]))")

    def edges(self) -> set[tuple[str, str]]:
        pairs = self.page.evaluate("[...document.querySelectorAll('#viewport .edge')].map(e => [e.dataset.src, e.dataset.dst])")
        return {(a, b) for a, b in pairs}

    def key(self, text: str) -> str:
        """The key of the one node whose first line is ``text`` (a ▸ marks a call that opens)."""
        found = [k for k, t in self.nodes().items() if t.split(" | ")[0].removeprefix("▸ ") == text]
        assert len(found) == 1, (text, self.nodes())
        return found[0]

    def click(self, key: str) -> None:
        """Click a node, centring it first when it lies outside the window (as a person would pan)."""
        node = self.page.locator(f'#viewport .node[data-key="{key}"]')
        box, stage = node.bounding_box(), self.page.locator("#stage").bounding_box()
        assert box is not None and stage is not None
        if not (stage["x"] <= box["x"] and box["x"] + box["width"] <= stage["x"] + stage["width"]
                and stage["y"] <= box["y"] and box["y"] + box["height"] <= stage["y"] + stage["height"]):
            self.page.evaluate(f"DT.app.view.centre('{key}')")
        node.click()
        self.idle()

    def press(self, selector: str, key: str) -> None:
        self.page.press(selector, key)
        self.idle()

    def crossings(self) -> dict:
        """``{sibling, between, siblings, edges, examples}``: edges drawn through a box not one of their ends (``CROSSINGS``)."""
        return self.page.evaluate(CROSSINGS)

    def fills(self) -> list[str]:
        return self.page.evaluate("[...document.querySelectorAll('#viewport .node rect')].map(r => getComputedStyle(r).fill)")

    def close(self) -> None:
        assert self.errors == []
        # the page itself, nothing else: blob: URLs are made in the page (its layout worker, a download)
        assert [r for r in self.requests if not r.startswith("blob:")] == [self.url]
        self.page.close()


def payload_rows(p: dict, table: str, rows: list | None = None) -> list[dict]:
    """The rows of ``table`` in payload ``p`` as dicts, read through ``p["fields"]`` as the page's ``rows.js`` reads
    them: a string-table field as its text, a field ``g.x`` as ``row["g"]["x"]`` (a metric's value: ``row["m"]["flops"]``)."""
    S = p["s"]

    def one(t: str, r: list | None) -> dict | None:
        if r is None:
            return None
        out: dict = {}
        for k, (name, kind) in enumerate(p["fields"][t]):
            many, base = kind.endswith("*"), kind.rstrip("*")

            def value(x: object, base: str = base) -> object:
                return x if base == "" or x is None else S[x] if base == "s" else one(base, x)  # type: ignore[index, arg-type]

            v = r[k] if k < len(r) else None
            v = [value(x) for x in v or []] if many else value(v)
            group, _, field = name.rpartition(".")
            (out.setdefault(group, {}) if group else out)[field] = v
        return out

    return [one(table, r) for r in (p[{"c": "c", "o": "o", "so": "st"}[table]] if rows is None else rows)]  # type: ignore[misc]
