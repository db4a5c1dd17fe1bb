"""The viewer payload's values (``render/_html_stats.py``): stats per op and call, the first non-finite op as
Python finds it (also in a phase view of a training step), and the one-line states without values."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

import dispatchtrace as dt
from dispatchtrace.render._html import HtmlOptions, page, payload


class Root(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sqrt(x).sum()


def test_ops_and_calls_carry_their_stats() -> None:
    torch.manual_seed(0)
    lin = nn.Linear(4, 3)
    with torch.no_grad(), dt.capture(lin, values="stats") as g:
        lin(torch.randn(2, 4))
    p = payload(g, HtmlOptions())
    s = p["s"]
    addmm = next(op for op in g.ops if op.target == "aten.addmm.default")
    (name, row), = p["st"][addmm.index][0]
    st = g.stats[addmm.outputs[0].id]
    assert s[name] == f"%addmm: {addmm.outputs[0].shape_text}"
    assert row == [st.numel, st.nan, st.posinf, st.neginf, st.zeros, st.min, st.max, st.mean, st.norm]
    assert [s[n] for n, _ in p["st"][addmm.index][1]] == [f"{r.text}: {r.shape_text}" for r in addmm.inputs]
    assert p["cst"][1] == [row]  # the Linear call's output is addmm's result
    assert p["nf"] is None and p["vals"] == "stats"


def test_a_backward_nan_is_found_in_the_phase_that_holds_it() -> None:
    x = torch.tensor([0.0, 1.0], requires_grad=True)
    with dt.capture(Root(), values="stats") as g:
        Root()(x).backward()
    found = g.first_nonfinite()
    assert found is not None and found.phase == "backward"
    forward = payload(dt.views.phase_graph(g, "forward"), HtmlOptions())
    assert forward["nf"]["op"] is None and forward["nf"]["phase"] == "backward"  # not in this view: the page says where
    view = dt.views.phase_graph(g, "backward")
    back = payload(view, HtmlOptions(phase="backward"))
    assert view.ops[back["nf"]["op"]].name == found.op.name and back["nf"]["text"] == str(found)
    everything = payload(g, HtmlOptions())
    assert everything["nf"]["op"] == found.op.index


@pytest.mark.parametrize(("how", "state"), [("none", "none"), ("meta", "absent")])
def test_no_values_is_a_state_not_a_failure(how: str, state: str) -> None:
    lin = nn.Linear(4, 2, device="meta" if how == "meta" else "cpu")
    with dt.capture(lin, values="stats" if how == "meta" else "none") as g:
        lin(torch.ones(1, 4, device=lin.weight.device))
    p = payload(g, HtmlOptions())
    assert p["vals"] == state and "st" not in p and "nf" not in p


def test_an_overflowed_norm_stays_valid_json() -> None:
    with torch.no_grad(), dt.capture(values="stats", stats="mean") as g:
        torch.full((4,), 1e308, dtype=torch.float64) * 10
    text = page(g, HtmlOptions())
    data = text.split('id="dt-data">', 1)[1].split("</script>", 1)[0]
    p = json.loads(data, parse_constant=lambda c: pytest.fail(f"{c} is no JSON: JSON.parse fails on it"))
    assert p["st"][1][1][0][1][7:] == ["inf", "inf"]  # the input's mean and norm, as Python prints them
    assert p["st"][1][0][0][1][1:4] == [0, 4, 0]
