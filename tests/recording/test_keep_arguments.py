"""``capture(keep=..., keep_bytes=...)``'s arguments refused at capture start, and ``g.value`` by name."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

import dispatchtrace as dt


def _lin() -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 3), nn.ReLU()), torch.randn(2, 4)


@pytest.mark.parametrize("keep", [42, 1.5, object()])
def test_a_keep_that_is_no_glob_list_or_predicate_says_what_keep_takes(keep: object) -> None:
    with pytest.raises(TypeError) as e:
        dt.capture(keep=keep)  # type: ignore[arg-type]
    text = str(e.value)
    assert text.startswith(f"keep={keep!r} is ") and "keep= takes a glob" in text and "\n" not in text


def test_a_list_holding_a_non_glob_is_refused_at_capture_start_too() -> None:
    with pytest.raises(TypeError, match=r"keep= holds int 3: keep= takes a glob"):
        dt.capture(keep=["aten.addmm*", 3])  # type: ignore[list-item]


@pytest.mark.parametrize("budget", [-1, "1GB", None])
def test_a_negative_or_non_number_keep_bytes_is_refused_before_the_forward(budget: object) -> None:
    net, x = _lin()
    ran = []
    net.register_forward_hook(lambda *a: ran.append(1))
    with pytest.raises(ValueError, match=r"keep_bytes=.*: the budget of the copies keep= makes is a number of bytes >= 0"):
        with dt.capture(net, keep="aten.addmm*", keep_bytes=budget):  # type: ignore[arg-type]
            net(x)
    assert ran == []  # refused at dt.capture(...), before the model ran


def test_value_takes_an_op_name_or_a_call_label() -> None:
    net, x = _lin()
    with torch.no_grad(), dt.capture(net, keep=["aten.addmm*", "1"], keep_bytes=1 << 20) as g:
        y = net(x)
    assert torch.equal(g.value("addmm"), g.value(g.op("addmm")))
    assert torch.equal(g.value("1"), y)  # the ReLU call's label: its output
    with pytest.raises(KeyError, match=r"no op named 'adddmm' and no call labelled 'adddmm': g.value takes an op"):
        g.value("adddmm")
    with pytest.raises(TypeError, match=r"g.value takes an op, a call, a tensor ref or an op's name"):
        g.value(3)  # type: ignore[arg-type]


def test_a_call_glob_keeps_the_calls_outputs_not_the_ops_inside_it() -> None:
    net, x = _lin()
    with torch.no_grad(), dt.capture(net, keep="0") as g:
        y0 = net[0](x)
        net[1](y0)
    lin = g.calls[0]
    assert lin.label == "0" and torch.equal(g.value(lin), y0)
    with pytest.raises(dt.NotKeptError):
        g.value("t")  # the transpose inside Linear: not kept by the call's glob
