"""Scope: global forward hooks that report module calls on the creating thread only."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import torch
import torch.nn as nn

from dispatchtrace.recording._scope import Scope


class _Boom(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("boom")


def _events() -> tuple[list[tuple[str, str, Any]], Scope]:
    events: list[tuple[str, str, Any]] = []
    scope = Scope(lambda m, args: events.append(("enter", type(m).__name__, len(args))),
                  lambda m, out: events.append(("exit", type(m).__name__, None if out is None else tuple(out.shape))))
    return events, scope


def test_calls_are_reported_in_order_nested() -> None:
    model = nn.Sequential(nn.Linear(2, 3), nn.ReLU())
    events, scope = _events()
    try:
        model(torch.ones(1, 2))
    finally:
        scope.close()
    assert events == [("enter", "Sequential", 1), ("enter", "Linear", 1), ("exit", "Linear", (1, 3)),
                      ("enter", "ReLU", 1), ("exit", "ReLU", (1, 3)), ("exit", "Sequential", (1, 3))]


def test_a_forward_that_raises_still_exits_with_no_output() -> None:
    events, scope = _events()
    try:
        with pytest.raises(RuntimeError, match="boom"):
            _Boom()(torch.ones(1))
    finally:
        scope.close()
    assert events == [("enter", "_Boom", 1), ("exit", "_Boom", None)]


def test_other_threads_are_ignored() -> None:
    events, scope = _events()
    try:
        worker = threading.Thread(target=lambda: nn.ReLU()(torch.ones(1)))
        worker.start()
        worker.join()
    finally:
        scope.close()
    assert events == []


def test_close_removes_both_hooks() -> None:
    events, scope = _events()
    scope.close()
    nn.ReLU()(torch.ones(1))
    assert events == []
    scope.close()  # twice is harmless


def test_calls_made_while_backward_runs_are_ignored() -> None:
    from torch.utils.checkpoint import checkpoint

    lin = nn.Linear(2, 2)
    events, scope = _events()
    try:
        x = torch.ones(1, 2, requires_grad=True)
        checkpoint(lin, x, use_reentrant=False).sum().backward()  # backward recomputes lin
    finally:
        scope.close()
    assert x.grad is not None
    assert events == [("enter", "Linear", 1), ("exit", "Linear", (1, 2))]


def test_a_compiled_wrapper_is_transparent_and_noted_once() -> None:
    import warnings

    warnings.filterwarnings("ignore", message=".*global hooks on modules.*")
    model = nn.Sequential(nn.ReLU())
    compiled = torch.compile(model, backend="eager")
    events: list[tuple[str, str]] = []
    scope = Scope(lambda m, args: events.append(("enter", type(m).__name__)),
                  lambda m, out: events.append(("exit", type(m).__name__)),
                  lambda m, kind: events.append(("note", kind)))
    try:
        compiled(torch.ones(1))
        compiled(torch.ones(1))
    finally:
        scope.close()
    one = [("enter", "Sequential"), ("enter", "ReLU"), ("exit", "ReLU"), ("exit", "Sequential")]
    assert events == [("note", "compiled"), *one, *one]
