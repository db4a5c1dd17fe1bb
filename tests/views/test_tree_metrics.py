"""``g.tree(metrics=...)``: the registry's metrics on the tree's lines, on request (time, the estimate, FLOPs, a metric
the user registered), each value as the summary writes it; a name that is unknown or does not apply is an error
that lists those that do."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

import dispatchtrace as dt
from dispatchtrace.views import seconds


def net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Sequential(nn.Linear(32, 32), nn.Tanh()), nn.Linear(32, 4))


@pytest.fixture(scope="module")
def timed() -> dt.Graph:
    m, x = net(), torch.randn(8, 16)
    with torch.no_grad(), dt.capture(m, timing=True) as g:
        m(x)
    return g


def lines_of(tree: dt.Tree) -> dict[object, str]:
    return {n.call or n.op: n.line for n in tree.walk() if n.call is not None or n.op is not None}


def test_each_call_and_op_line_shows_its_measured_time(timed: dt.Graph) -> None:
    tree = timed.tree(ops=True, metrics=("time", "self_time"))
    lines = lines_of(tree)
    assert set(lines) == set(timed.calls) | {op for op in timed.ops if op in lines}
    for call in timed.calls:
        assert f"Time: {seconds(call.time)}, Own time: {seconds(call.self_time) if call.self_time else '-'}" in lines[call]
    ops = [x for x in lines if isinstance(x, dt.Op)]
    assert ops and all(lines[op].endswith(f"Time: {seconds(op.time)}") for op in ops)  # own time is a call's only
    assert str(tree).splitlines()[0] == tree.root.line and "Time: " in str(tree).splitlines()[0]
    plain = timed.tree(ops=True)
    assert "Time" not in str(plain) and len(str(plain).splitlines()) == len(str(tree).splitlines())


def test_the_estimate_flops_and_a_registered_metric(timed: dt.Graph) -> None:
    est = timed.estimate("h100")
    dt.register_metric(dt.Metric(name="out_elems", header="Out elems", call=lambda g, c: sum(r.numel for r in c.outputs)))
    try:
        lines = lines_of(timed.tree(1, metrics=["est_time", "flops", "out_elems"]))
    finally:
        dt.unregister_metric("out_elems")
    lin = timed.calls[1]
    assert lin.label == "0"
    assert lines[lin].endswith(f"Est. time: {seconds(est.time(lin))}, FLOPs: 8.2 kFLOPs, Out elems: 256")  # 2*8*16*32


def test_a_training_step_phase_view(tmp_path: Path) -> None:
    m, x = net(), torch.randn(8, 16)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    with dt.capture(m, timing=True) as g:
        m(x).sum().backward()
        opt.step()
    fwd = lines_of(g.tree(phase="forward", metrics="time"))
    both = lines_of(g.tree(phase="all", metrics=("time", "backward_time")))
    first = g.calls[1]
    fwd_line = next(v for k, v in fwd.items() if isinstance(k, dt.Call) and k.label == first.label)
    both_line = next(v for k, v in both.items() if isinstance(k, dt.Call) and k.label == first.label)
    assert "Time: " in fwd_line and "Bwd time: " in both_line
    assert g.render(tmp_path / "t.txt", metrics=("time",)).read_text() == f"{g.tree(metrics=('time',))}\n"


def test_unknown_and_inapplicable_names_say_what_applies(timed: dt.Graph) -> None:
    with pytest.raises(ValueError, match=r"no metric is named 'tim'; did you mean 'time'\? The metrics that apply .*\btime\b"):
        timed.tree(metrics=("tim",))
    m = net()
    with torch.no_grad(), dt.capture(m) as g:
        m(torch.randn(2, 16))
    with pytest.raises(ValueError, match=r"'time' does not apply to this capture \(the time metrics need capture\(timing=True\)"):
        g.tree(metrics="time")
    with pytest.raises(ValueError, match=r"'est_time' does not apply"):
        g.tree(metrics=["flops", "est_time"])
