"""The viewer's edges never run through a box that is not one of their ends, counted in headless Chromium.

Sibling edges follow dagre's own points squared into the gaps between rows; edges between levels leave
and enter open calls through their ports and margins; both are re-routed when a call opens or closes.
The counts before and after this routing are in docs/benchmarks.md (``benchmarks/viewer_crossings.py``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from models import llama7b
from viewer_page import Page, require_browser
from vision import torchvision

import dispatchtrace as dt

pytestmark = [pytest.mark.slow, pytest.mark.browser]

require_browser()

#: open one call by path (its run unfolded, the calls around it open), then fit
OPEN = """async path => {
  const app = DT.app, m = app.model, c = m.calls.find(c => c.path === path);
  m.reveal('c' + c.id); m.setOpen(c.id, true); await app.redraw(() => app.view.fit());
}"""
#: everything inside the model's call open
ALL = "async () => { DT.app.select('c1'); await DT.app.openAll(); DT.app.view.fit(); }"


def gpt2() -> dt.Graph:
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=1000, n_positions=64)
    model = transformers.GPT2LMHeadModel(config).eval()
    with torch.no_grad(), dt.capture(model) as g:
        model(torch.zeros(1, 16, dtype=torch.int64))
    return g


def resnet18_step() -> dt.Graph:
    m = torchvision.models.resnet18(weights=None)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    with dt.capture(m) as g:
        F.cross_entropy(m(torch.randn(2, 3, 64, 64)), torch.tensor([1, 2])).backward()
        opt.step()
    return g


def counts(p: Page, *steps: tuple[str, str | None]) -> dict:
    for script, arg in steps:
        p.page.evaluate(script, arg) if arg is not None else p.page.evaluate(script)
        p.idle()
    p.page.evaluate("DT.app.view.fit()")
    return p.crossings()


CASES = {
    "gpt2": (gpt2, "forward", [[], [(ALL, None)]]),
    "resnet50": (None, "forward", [[], [(ALL, None)]]),
    "resnet18-step-all": (resnet18_step, "all", [[], [(ALL, None)]]),
    "llama7b": (llama7b, "forward", [[], [(OPEN, "layers.16")], [(OPEN, "layers.16"), (OPEN, "layers.16.attn")]]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_no_edge_runs_through_a_box(name: str, browser: object, resnet50: dt.Graph, tmp_path: Path, shots: Path) -> None:
    make, phase, views = CASES[name]
    g = resnet50 if make is None else make()
    path = g.render(tmp_path / f"{name}.html", phase=phase)
    for k, steps in enumerate(views):
        p = Page(browser, path)
        r = counts(p, *steps)
        assert r["edges"] > 0 and r["siblings"] > 0
        assert (r["sibling"], r["between"]) == (0, 0), (name, steps, r["examples"])
        # the routes are what is drawn: every drawn edge of an open picture follows its route
        assert p.page.evaluate("[...document.querySelectorAll('#viewport path.edge')].every(e => !/C/.test(e.getAttribute('d')))")
        if k == len(views) - 1:
            p.page.screenshot(path=str(shots / f"edges-{name}.png"))
        p.close()
