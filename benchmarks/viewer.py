"""The HTML viewer in headless Chromium: file size, time to first picture, time of one expand.

Run: PYTHONPATH=. .venv/bin/python benchmarks/viewer.py   (needs playwright and /usr/bin/chromium)
Models: ResNet-50 and ViT-B/16 on CPU, a 48-layer nn.TransformerEncoder (d=1024) on meta.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import torch
import torch.nn as nn
import torchvision
from playwright.sync_api import sync_playwright

import dispatchtrace as dt


def captures() -> dict[str, dt.Graph]:
    out = {}
    for name in ("resnet50", "vit_b_16"):
        m = getattr(torchvision.models, name)(weights=None).eval()
        with torch.no_grad(), dt.capture(m) as g:
            m(torch.randn(1, 3, 224, 224))
        out[name] = g
    layer = nn.TransformerEncoderLayer(1024, 16, 4096, batch_first=True, device="meta")
    enc = nn.TransformerEncoder(layer, 48, enable_nested_tensor=False).eval()
    with torch.no_grad(), dt.capture(enc) as g:
        enc(torch.randn(1, 512, 1024, device="meta"))
    out["encoder-48 (meta)"] = g
    return out


def main() -> None:
    rows = []
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        for name, g in captures().items():
            path = g.render(Path(tmp) / "m.html")
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            t0 = time.perf_counter()
            page.goto(path.as_uri())
            page.wait_for_selector("#viewport .node")
            first = time.perf_counter() - t0
            # the expand: unfold the first folded run if there is one, else open the call holding the most
            key = page.evaluate("(() => { const m = DT.app.model, keys = [...document.querySelectorAll('#viewport .node.fold,"
                                " #viewport .node.call')].map(n => n.dataset.key), size = k => k[0] === 'f' ? 1e9 :"
                                " m.calls[+k.slice(1)].ops.length + m.calls[+k.slice(1)].calls.length;"
                                " return keys.sort((a, b) => size(b) - size(a))[0]; })()")
            expand = page.evaluate(f"(() => {{ const t = performance.now(); DT.app.view.onClick('{key}', false); return performance.now() - t; }})()")
            rows.append((name, len(g.ops), path.stat().st_size, first, expand, key))
            page.close()
        browser.close()
    print("| capture | ops | file | first picture | one expand (what) |\n|---|---|---|---|---|")
    for name, n, size, first, expand, key in rows:
        print(f"| {name} | {n:,} | {size / 1e3:,.0f} KB | {first * 1e3:,.0f} ms | {expand:,.0f} ms ({key}) |")


if __name__ == "__main__":
    main()
