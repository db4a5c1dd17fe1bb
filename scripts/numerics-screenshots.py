"""Retake docs/images/viewer-nan-hunt.png and diff-bf16.png: run docs/numerics.md's Python blocks (in a
temporary folder, each from a file numerics.py, as tests/test_numerics_doc.py does) until they have written
nan-hunt.html and bf16.html, then open both pages in Debian's chromium (playwright) and screenshot them.

Usage: PYTHONPATH=. python scripts/numerics-screenshots.py
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
IMAGES = ROOT / "docs" / "images"


def write_pages(folder: Path) -> None:
    doc = (ROOT / "docs" / "numerics.md").read_text(encoding="utf-8")
    namespace: dict[str, object] = {}
    os.chdir(folder)
    for i, (kind, code) in enumerate(re.findall(r"```(\w+)\n(.*?)```", doc, flags=re.S)):
        if kind != "python":
            continue
        path = folder / f"b{i}" / "numerics.py"  # a file of its own: source lines show their statements
        path.parent.mkdir()
        path.write_text(code, encoding="utf-8")
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(code, str(path), "exec"), namespace)  # noqa: S102 - our own docs
        if (folder / "nan-hunt.html").exists() and (folder / "bf16.html").exists():
            return
    raise SystemExit("docs/numerics.md no longer writes nan-hunt.html and bf16.html")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as pw:
        folder = Path(tmp)
        write_pages(folder)
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 760})
        page.goto((folder / "nan-hunt.html").as_uri())
        page.wait_for_selector("#viewport .node")
        page.select_option("#colour", "nonfinite")
        page.click("#first-nf")
        page.wait_for_function("DT.app.selected && !document.body.hasAttribute('data-busy')")
        page.keyboard.press("0")  # fit: the whole picture, the op selected and marked in it
        page.screenshot(path=str(IMAGES / "viewer-nan-hunt.png"))
        page = browser.new_page(viewport={"width": 1400, "height": 760})
        page.goto((folder / "bf16.html").as_uri())
        page.wait_for_selector("#tree .row")
        page.click("#first")
        page.screenshot(path=str(IMAGES / "diff-bf16.png"))
        browser.close()
    print(f"wrote {IMAGES / 'viewer-nan-hunt.png'} and {IMAGES / 'diff-bf16.png'}")


if __name__ == "__main__":
    main()
