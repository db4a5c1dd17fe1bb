"""views.statements: which line of a forward issued each item of a call, and runs of one line."""

from __future__ import annotations

import inspect

import torch
import torch.nn as nn
from models import traced

import dispatchtrace as dt
from dispatchtrace.graph import Op, Source
from dispatchtrace.views._statements import Statements, key, label, owner, owner_class, statement_runs, where


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.lin(x) + 1
        return y * 2


def line_of(text: str) -> int:
    """The file line of the statement of ``Net.forward`` that starts with ``text``."""
    lines, start = inspect.getsourcelines(Net.forward)
    return start + next(i for i, line in enumerate(lines) if line.strip().startswith(text))


def test_items_belong_to_the_line_that_issued_or_called_them() -> None:
    g = traced(Net(), torch.ones(1, 4), grad=False)
    net, lin = g.calls
    stmts = Statements()
    add, mul = (c for c in net.children if isinstance(c, Op))
    assert stmts.of(lin, net).line == stmts.of(add, net).line == line_of("y = self.lin(x) + 1")
    assert stmts.of(mul, net).line == line_of("return y * 2")
    assert stmts.site(lin) is lin.source and stmts.site(g.root) is None
    # inside lin, every op points at the line that called lin: that groups nothing
    assert [stmts.of(op, lin) for op in lin.children] == [None, None]


def test_a_call_without_a_recorded_line_has_no_statement() -> None:
    model = Net()
    x = torch.ones(1, 4)
    with torch.no_grad(), dt.capture(model, source=False) as g:
        model(x)
    net, lin = g.calls
    assert lin.source is None and Statements().of(lin, net) is None


def test_owner_is_the_innermost_call_whose_class_defines_the_function() -> None:
    g = traced(Net(), torch.ones(1, 4), grad=False)
    net, lin = g.calls
    addmm = next(op for op in lin.children if op.short == "aten::addmm")
    assert owner(addmm, "Net.forward", net) is net
    assert owner(addmm, "Net.forward", lin) is None  # the search stops at the given call
    assert owner(addmm, "helper", net) is None
    assert owner_class("Net.forward.<locals>.f") == "Net"


def test_key_where_and_label_of_a_source() -> None:
    src = Source("/a/b/net.py", 3, "Net.forward", "y = f(x)  # why")
    assert key(src) == ("/a/b/net.py", 3, "Net.forward") and key(None) is None
    assert where(src) == "net.py:3" and label(src) == "y = f(x)"
    assert label(Source("/a/net.py", 4, "Net.forward", "")) == "net.py:4 in Net.forward"


def test_statement_runs_group_two_items_or_more_of_one_line() -> None:
    assert statement_runs(["a", "a", "b"], [1, 1, 1]) == [(True, range(0, 2)), (False, range(2, 3))]
    assert statement_runs(["a", "a"], [1, 1], outer="a") == [(False, range(0, 1)), (False, range(1, 2))]
    assert statement_runs([None, None], [1, 1]) == [(False, range(0, 1)), (False, range(1, 2))]
