"""The viewer's values in headless Chromium: stats in the details panel, the NaN/Inf and norm colour modes,
the first non-finite op marked and jumped to (the op Python's ``first_nonfinite`` names), no values said in a line."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn
from viewer_page import Page, require_browser

import dispatchtrace as dt
from dispatchtrace.render._html import HtmlOptions, payload

pytestmark = [pytest.mark.slow, pytest.mark.browser]

require_browser()


class Root(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sqrt(x)


class Twice(nn.Module):
    """``root`` called twice, a NaN made in its second call only (sqrt of a negative)."""

    def __init__(self) -> None:
        super().__init__()
        self.pre = nn.Sequential(nn.Linear(3, 3), nn.ReLU())
        self.root, self.fc = Root(), nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pre(x).abs() + 1
        return self.fc(self.root(x) + self.root(x - 2.5)).relu()


@pytest.fixture(scope="module")
def hunt() -> dt.Graph:
    torch.manual_seed(0)
    net = Twice()
    with torch.no_grad(), dt.capture(net, values="stats") as g:
        net(torch.tensor([[0.1, 0.2, 0.3]]))
    return g


def test_the_payload_names_pythons_first_nonfinite_op(hunt: dt.Graph) -> None:
    found = hunt.first_nonfinite()
    assert found is not None and found.call.label == "root#1"
    p = payload(hunt, HtmlOptions())
    assert p["vals"] == "stats" and p["nf"]["op"] == found.op.index and p["nf"]["text"] == str(found)
    assert len(p["st"]) == len(hunt.ops) and len(p["cst"]) == len(hunt.calls) + 1


def test_first_nonfinite_button_opens_and_selects_pythons_op(browser: object, hunt: dt.Graph, tmp_path: Path,
                                                               shots: Path) -> None:
    found = hunt.first_nonfinite()
    assert found is not None
    p = Page(browser, hunt.render(tmp_path / "hunt.html", depth=1))
    key = f"o{found.op.index}"
    assert key not in p.nodes()  # inside the closed root#1 call at first
    leaf = p.page.evaluate(f"DT.app.model.leafOfOp({found.op.index})")
    assert p.page.locator("#viewport .nf-first").get_attribute("data-key") == leaf  # marked where it stands
    p.page.click("#first-nf")
    p.idle()
    assert p.page.evaluate("DT.app.selected") == key and key in p.nodes()
    assert p.page.locator("#viewport .node.nf-first").get_attribute("data-key") == key
    details = p.page.inner_text("#details")
    assert found.op.name in details and "made the first NaN/Inf of the capture" in details
    assert f"{found.tensor.text}: {found.tensor.label} {found.stats}" in details  # the result's stats as Python prints them
    for ref, s in found.inputs:
        assert f"{ref.text}: {ref.label} {s}" in details  # and its inputs'
    p.page.select_option("#colour", "nonfinite")
    p.idle()
    fills = p.page.evaluate("Object.fromEntries([...document.querySelectorAll('#viewport .node')]"
                            ".map(n => [n.dataset.key, n.querySelector('rect').style.fill]))")
    assert fills[key] == "rgb(224, 70, 60)"  # DT.FIRST_BAD: the op that made it
    later = [f"o{op.index}" for op in hunt.ops if op.index > found.op.index and f"o{op.index}" in fills]
    assert later and all(fills[k] == "rgb(246, 179, 174)" for k in later)  # DT.BAD: those that carried it on
    earlier = [k for k, f in fills.items() if k[0] == "o" and int(k[1:]) < found.op.index]
    assert earlier and all(fills[k] == "" for k in earlier)  # finite: white
    assert "made the first NaN/Inf (%" + found.op.name + ")" in p.page.inner_text("#legend")
    p.page.screenshot(path=str(shots / "viewer-nan-hunt.png"))
    p.page.select_option("#colour", "norm")
    p.idle()
    assert "L2 norm of the results" in p.page.inner_text("#legend")
    p.close()


def test_a_call_shows_its_outputs_stats_and_n_jumps(browser: object, hunt: dt.Graph, tmp_path: Path) -> None:
    p = Page(browser, hunt.render(tmp_path / "hunt.html", depth=1))
    pre = next(c for c in hunt.calls if c.path == "pre")
    p.click(p.key("pre"))  # opens it and selects it
    details = p.page.inner_text("#details")
    assert f"{pre.outputs[0].label} {hunt.stats[pre.outputs[0].id]}" in details
    p.page.locator("#canvas").click(position={"x": 5, "y": 5})
    p.page.keyboard.press("n")
    p.idle()
    assert p.page.evaluate("DT.app.selected") == f"o{hunt.first_nonfinite().op.index}"  # type: ignore[union-attr]
    p.close()


@pytest.mark.parametrize("how", ["none", "meta"])
def test_no_values_say_so_in_one_line(browser: object, tmp_path: Path, how: str) -> None:
    lin = nn.Linear(4, 2, device="meta" if how == "meta" else "cpu")
    with dt.capture(lin, values="stats" if how == "meta" else "none") as g:
        lin(torch.ones(1, 4, device=lin.weight.device))
    p = Page(browser, g.render(tmp_path / "lin.html", depth="ops"))
    assert p.page.locator("#first-nf").is_disabled()
    p.click(p.key("addmm"))
    why = "none: meta or fake tensors have no values" if how == "meta" else 'not recorded: capture with values="stats"'
    assert why in p.page.inner_text("#details")
    p.page.select_option("#colour", "nonfinite")
    p.idle()
    assert why in p.page.inner_text("#legend")
    p.close()


def test_the_pages_stats_text_is_pythons(browser: object, hunt: dt.Graph, tmp_path: Path) -> None:
    values = [0.0, -0.0, 1.0, 2.5, -1.5, 0.1, 1 / 3, 0.000123456, 0.0001, 9.99996, 1234.56, 9999.4, 12346.0, 1e20, -3.2e-7,
              123456789.0, 0.5e-4]
    p = Page(browser, hunt.render(tmp_path / "hunt.html"))
    got = p.page.evaluate("(vs) => vs.map(DT.g4)", values)
    assert got == [f"{v:.4g}" for v in values]
    texts = p.page.evaluate("(rows) => rows.map(DT.statsText)", [[3, 1, 0, 2, 1, -1.5, 2.0, 0.25, 2.5], [0] * 9,
                                                                 [2, 2, 0, 0, 0, None, None, None, None]])
    assert texts == [str(dt.graph.Stats(3, 1, 0, 2, 1, -1.5, 2.0, 0.25, 2.5)), "empty", "no finite value nan 2"]
    p.close()


class Magnitude(nn.Module):
    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return z.abs() + 1


@pytest.mark.parametrize("case", ["unsure", "carried"])
def test_the_page_says_what_python_answers_made_carried_or_unsure(browser: object, tmp_path: Path, case: str) -> None:
    if case == "unsure":  # a complex input has no stats: whether abs made the NaN cannot be told
        model, x = Magnitude(), torch.tensor([1 + 1j, complex(float("nan"), 0.0)])
    else:
        model, x = nn.Linear(2, 2), torch.tensor([[1.0, float("nan")]])
    with torch.no_grad(), dt.capture(model, values="stats") as g:
        model(x)
    found = g.first_nonfinite()
    assert found is not None and found.verdict == case
    p = Page(browser, g.render(tmp_path / f"{case}.html", depth="ops"))
    assert p.page.evaluate("DT.app.model.values.nf.verdict") == case
    p.page.click("#first-nf")
    p.idle()
    assert p.page.evaluate("DT.app.selected") == f"o{found.op.index}"
    details = p.page.inner_text("#details")
    assert "made the first NaN/Inf" not in details
    if case == "unsure":
        assert f"the first NaN/Inf shows here, its maker uncertain: {found.unsure}" in details
    else:
        assert "the first op to read the first NaN/Inf (already in its input)" in details
    p.page.select_option("#colour", "nonfinite")
    p.idle()
    legend = p.page.inner_text("#legend")
    assert "made the first" not in legend
    assert ("first NaN/Inf, maker uncertain" if case == "unsure" else "first read the first NaN/Inf") in legend
    p.close()
