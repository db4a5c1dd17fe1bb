"""views.flow: data flow among the children of one call, by op producers."""

from __future__ import annotations

import torch
import torch.nn as nn
from models import traced

from dispatchtrace.graph import Call, Op
from dispatchtrace.views._flow import dataflow


class Fork(nn.Module):
    """Two calls read the input, an op joins them, a third call reads the join."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.c = nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c(self.a(x) + self.b(x))


def kinds(kids: list[Call | Op]) -> list[str]:
    return [k.path if isinstance(k, Call) else k.short for k in kids]


def test_edges_entry_and_exit_of_a_fork_and_join() -> None:
    g = traced(Fork(), torch.ones(1, 4), grad=False)
    call = g.calls[0]
    kids = list(call.children)
    assert kinds(kids) == ["a", "b", "aten::add", "c"]
    flow = dataflow(call, kids)
    assert flow.edges == {(0, 2), (1, 2), (2, 3)}
    assert flow.entry == {0, 1}  # both read the call's input
    assert flow.exit == {3}  # the call's output


def test_a_call_with_no_ops_passes_its_input_on() -> None:
    model = nn.Sequential(nn.Linear(4, 4), nn.Identity(), nn.Linear(4, 4))
    g = traced(model, torch.ones(1, 4), grad=False)
    call = g.calls[0]
    kids = list(call.children)
    assert [len(list(k.all_ops())) for k in kids] == [2, 0, 2]
    flow = dataflow(call, kids)
    assert flow.edges == {(0, 1), (1, 2)}  # the Identity sits between the two Linears
    assert flow.entry == {0} and flow.exit == {2}


def test_weights_and_constants_are_no_edges() -> None:
    g = traced(nn.Linear(4, 2), torch.ones(1, 4), grad=False)
    call = g.calls[0]
    kids = list(call.children)
    assert kinds(kids) == ["aten::t", "aten::addmm"]  # t reads only the weight
    flow = dataflow(call, kids)
    assert flow.edges == {(0, 1)} and flow.entry == {1} and flow.exit == {1}


def test_readers_that_keep_rejects_do_not_make_an_exit() -> None:
    class Side(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = x * 2
            return y + 1

    outer = nn.Sequential(Side())
    g = traced(outer, torch.ones(3), grad=False)
    inner = g.calls[1]
    kids = list(inner.children)
    assert kinds(kids) == ["aten::mul", "aten::add"]
    flow = dataflow(inner, kids)
    assert flow.exit == {1}
    assert dataflow(inner, kids[:1]).exit == {0}  # the add is outside these kids: the mul is read outside
    assert dataflow(inner, kids[:1], keep=lambda op: op.short != "aten::add").exit == frozenset()
