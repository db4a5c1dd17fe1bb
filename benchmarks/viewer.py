"""The HTML viewer in headless Chromium: file size, time to first picture, time of one expand.

Run: PYTHONPATH=. .venv/bin/python benchmarks/viewer.py [--only NAME ...]   (needs playwright and /usr/bin/chromium)
Captures: ResNet-50 and ViT-B/16 on CPU; the 7B Llama-style decoder of examples/llama_meta.py on meta
(32 layers, about 3k ops), the same decoder with 126 layers (about 12k ops) and with 1,064 layers
(about 100k ops), all on meta. (Not ``benchmarks/html.py``: a script of that name shadows the standard
library's ``html`` module, which torchvision imports.)

Times are the page's own (``performance.now()``): first picture from navigation start to the first
frame painted after the first draw (payload parsed, laid out in the worker, drawn, painted); an expand
from the click to the frame painted after its draw. Two expands: unfolding the first folded run (the decoder layers into their N closed boxes) and
then opening the call in the middle of the run (one layer into its ops and sub-calls).
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import os
import sys
import tempfile
import time
from pathlib import Path

import torch
import torchvision
from playwright.sync_api import sync_playwright

import dispatchtrace as dt

ROOT = Path(__file__).resolve().parents[1]


def llama(layers: int) -> dt.Graph:
    """examples/llama_meta.py's decoder (the Mistral-7B shape) with ``layers`` layers, on meta, 1 x 2048 tokens."""
    spec = importlib.util.spec_from_file_location("llama_meta", ROOT / "examples" / "llama_meta.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["llama_meta"] = module
    spec.loader.exec_module(module)
    with torch.device("meta"):
        model = module.Llama(module.Config(layers=layers)).eval()
    with torch.no_grad(), dt.capture(model) as g:
        model(torch.zeros(1, 2048, dtype=torch.int64, device="meta"))
    return g


def vision(name: str) -> dt.Graph:
    m = getattr(torchvision.models, name)(weights=None).eval()
    with torch.no_grad(), dt.capture(m) as g:
        m(torch.randn(1, 3, 224, 224))
    return g


CAPTURES = {
    "ResNet-50": lambda: vision("resnet50"),
    "ViT-B/16": lambda: vision("vit_b_16"),
    "Llama 7B, 32 layers (meta)": lambda: llama(32),
    "decoder, 126 layers (meta)": lambda: llama(126),
    "decoder, 1,064 layers (meta)": lambda: llama(1064),
}

EXPAND = """async key => { const t = performance.now(); await DT.app.view.onClick(key, false);
  await new Promise(r => requestAnimationFrame(() => setTimeout(r, 0))); return performance.now() - t; }"""
FIRST_RUN = """() => { const n = document.querySelector('#viewport .node.fold'); return n ? n.dataset.key : null; }"""
MIDDLE = """run => { const r = DT.app.model.runOf[+run.slice(1)]; return 'c' + r[Math.floor(r.length / 2)]; }"""
BIGGEST = """() => { const m = DT.app.model, keys = [...document.querySelectorAll('#viewport .node.call')].map(n => n.dataset.key);
  const size = k => m.calls[+k.slice(1)].ops.length + m.calls[+k.slice(1)].calls.length;
  return keys.sort((a, b) => size(b) - size(a))[0]; }"""


def measure(browser, g: dt.Graph, tmp: Path) -> dict:
    t0 = time.perf_counter()
    path = g.render(tmp / "m.html")
    write = time.perf_counter() - t0
    text = path.read_text(encoding="utf-8")
    data = text.split('<script type="application/json" id="dt-data">', 1)[1].split("</script>", 1)[0]
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri(), timeout=120_000)
    page.wait_for_function("DT.app && DT.app.firstPicture", timeout=120_000)
    first = page.evaluate("DT.app.firstPicture")
    run = page.evaluate(FIRST_RUN)
    what, times = [], []
    if run:
        label = page.evaluate(f"DT.app.layout.text('{run}')[0]")
        times.append(page.evaluate(EXPAND, run))
        what.append(f"unfold `{label}`")
        key = page.evaluate(MIDDLE, run)
    else:
        key = page.evaluate(BIGGEST)
    label = page.evaluate(f"DT.app.layout.text('{key}')[0]")
    times.append(page.evaluate(EXPAND, key))
    what.append(f"open `{label}`")
    stats = page.evaluate("DT.app.layout.stats")
    page.close()
    assert not errors, errors
    return {"ops": len(g.ops), "size": path.stat().st_size, "payload": len(data.encode()), "write": write, "first": first, "expand": times,
            "what": what, "main": stats["main"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", help="capture names to run (a substring each)")
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        for name, make in CAPTURES.items():
            if a.only and not any(s.lower() in name.lower() for s in a.only):
                continue
            t0 = time.perf_counter()
            g = make()
            capture = time.perf_counter() - t0
            r = measure(browser, g, Path(tmp))
            rows.append((name, capture, r))
            print(f"{name}: {r}", file=sys.stderr, flush=True)
            del g
            gc.collect()
        browser.close()
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}, {os.cpu_count()} cores")
    print("| capture | ops | file | payload per op | first picture | one expand | capture + write (Python) |")
    print("|---|---:|---:|---:|---:|---|---:|")
    for name, capture, r in rows:
        expands = "; ".join(f"{t:,.0f} ms ({w})" for t, w in zip(r["expand"], r["what"], strict=True))
        print(f"| {name} | {r['ops']:,} | {r['size'] / 1e6:,.2f} MB | {r['payload'] / r['ops']:,.0f} B | {r['first']:,.0f} ms | "
              f"{expands} | {capture:,.1f} s + {r['write']:,.1f} s |")


if __name__ == "__main__":
    main()
