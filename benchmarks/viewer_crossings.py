"""The HTML viewer's edges that run through boxes: counted in headless Chromium on the pictures of issue 24.

Run: PYTHONPATH=. .venv/bin/python benchmarks/viewer_crossings.py [--only NAME ...]   (playwright, /usr/bin/chromium)

For each capture and view, the drawn edges whose path passes through a drawn box that is neither of
its ends nor a call holding one (``tests/viewer_page.py``'s ``CROSSINGS``, sampled every 2 px):
sibling edges (both ends in one open call) and edges between levels apart. Views: the first picture,
everything open inside the model's call (key ``a``), and for the decoder ``layers.16`` open, then its
``attn`` too. Captures: GPT-2 (2 layers, 64 wide, ``transformers`` from a config), ResNet-50,
a ResNet-18 training step (``phase="all"``) and the 7B Llama-style decoder of examples/llama_meta.py on meta.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F
import torchvision
from playwright.sync_api import sync_playwright

import dispatchtrace as dt

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from viewer_page import CROSSINGS, chromium  # noqa: E402


def gpt2() -> tuple[dt.Graph, str]:
    from transformers import GPT2Config, GPT2LMHeadModel

    model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=1000, n_positions=64)).eval()
    with torch.no_grad(), dt.capture(model) as g:
        model(torch.zeros(1, 16, dtype=torch.int64))
    return g, "forward"


def resnet50() -> tuple[dt.Graph, str]:
    m = torchvision.models.resnet50(weights=None).eval()
    with torch.no_grad(), dt.capture(m) as g:
        m(torch.randn(1, 3, 224, 224))
    return g, "forward"


def resnet18_step() -> tuple[dt.Graph, str]:
    m = torchvision.models.resnet18(weights=None)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    with dt.capture(m) as g:
        F.cross_entropy(m(torch.randn(2, 3, 64, 64)), torch.tensor([1, 2])).backward()
        opt.step()
    return g, "all"


def llama() -> tuple[dt.Graph, str]:
    """benchmarks/viewer.py's 7B decoder (examples/llama_meta.py, 32 layers, on meta)."""
    from viewer import llama as decoder  # benchmarks/ is on sys.path when a script here runs

    return decoder(32), "forward"


CAPTURES = {"GPT-2": gpt2, "ResNet-50": resnet50, "ResNet-18 step (all)": resnet18_step, "Llama 7B (meta)": llama}

#: opens one call (by path) in the page: its run unfolded and the calls around it open
OPEN = """async path => {
  const app = DT.app, m = app.model, c = m.calls.find(c => c.path === path);
  m.reveal('c' + c.id); m.setOpen(c.id, true); await app.redraw(() => app.view.fit());
}"""
ALL = "async () => { const app = DT.app; app.select('c1'); await app.openAll(); app.view.fit(); }"


def views(name: str) -> list[tuple[str, str | None, str | None]]:
    out = [("first picture", None, None), ("all open", ALL, None)]
    if name.startswith("Llama"):
        out = [out[0], ("layers.16 open", OPEN, "layers.16"), ("and its attn", OPEN, "layers.16.attn"), out[1]]
    return out


def count(page: object, script: str | None, arg: str | None) -> dict:
    if script is not None:
        page.evaluate(script, arg) if arg is not None else page.evaluate(script)  # type: ignore[attr-defined]
    page.wait_for_function("!document.body.hasAttribute('data-busy')", timeout=300_000)  # type: ignore[attr-defined]
    page.evaluate("DT.app.view.fit()")  # type: ignore[attr-defined]
    return page.evaluate(CROSSINGS)  # type: ignore[attr-defined]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--examples", action="store_true", help="print up to 12 crossing edges per view")
    args = ap.parse_args()
    print("| capture | view | edges | sibling edges | siblings through a box | edges between levels through a box |")
    print("|---|---|---:|---:|---:|---:|")
    with sync_playwright() as pw, tempfile.TemporaryDirectory() as tmp:
        browser = pw.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        for name, make in CAPTURES.items():
            if args.only and name not in args.only:
                continue
            g, phase = make()
            path = g.render(Path(tmp) / "page.html", phase=phase)
            for view, script, arg in views(name):
                page = browser.new_page(viewport={"width": 1400, "height": 900})
                page.goto(path.resolve().as_uri())
                page.wait_for_selector("#viewport .node")
                if script is not None and arg == "layers.16.attn":
                    count(page, OPEN, "layers.16")
                r = count(page, script, arg)
                print(f"| {name} | {view} | {r['edges']} | {r['siblings']} | {r['sibling']} | {r['between']} |", flush=True)
                if args.examples:
                    for e in r["examples"]:
                        print("   ", e)
                page.close()
        browser.close()


if __name__ == "__main__":
    main()
