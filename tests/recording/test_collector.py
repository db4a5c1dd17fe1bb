"""The cyclic collector is paused inside a capture block and put back as it was on every way out."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
import torch
import torch.nn as nn

import dispatchtrace as dt
from dispatchtrace._collector import Paused


@pytest.fixture(autouse=True)
def _collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if was:
        gc.enable()
    else:
        gc.disable()


class Raises(nn.Module):
    def __init__(self, error: type[BaseException]) -> None:
        super().__init__()
        self.error = error

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x.relu()
        raise self.error("stop")


def test_paused_inside_and_restored_after() -> None:
    lin, x = nn.Linear(2, 2), torch.ones(1, 2)
    with dt.capture(lin) as g:
        inside = gc.isenabled()
        lin(x)
    assert (inside, gc.isenabled()) == (False, True)
    assert len(g.ops) == 2


@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
def test_restored_when_the_block_raises(error: type[BaseException]) -> None:
    model, x = Raises(error), torch.ones(2)
    with pytest.raises(error), dt.capture(model) as g:
        model(x)
    assert gc.isenabled()
    assert isinstance(g.error, error) and [op.target for op in g.ops] == ["aten.relu.default"]


def test_left_off_when_it_was_off() -> None:
    gc.disable()
    with dt.capture() as g:
        torch.ones(2).relu()
    assert not gc.isenabled() and len(g.ops) == 2


def test_nested_captures_restore_in_turn() -> None:
    with dt.capture() as outer:
        with dt.capture() as inner:
            torch.ones(2).relu()
        assert not gc.isenabled()
    assert gc.isenabled() and len(inner.ops) == len(outer.ops) == 2


def test_a_refused_reentry_keeps_the_running_block_paused() -> None:
    cap = dt.capture()
    with cap:
        with pytest.raises(RuntimeError, match="already recording"):
            cap.__enter__()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_restored_when_entering_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(self: object, *args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(dt.capture, "_watch_keywords", fail)
    with pytest.raises(KeyboardInterrupt), dt.capture(nn.ReLU()):
        pass
    assert gc.isenabled()


def test_paused_stop_twice_is_harmless() -> None:
    paused = Paused()
    paused.start()
    paused.stop()
    gc.disable()
    paused.stop()
    assert not gc.isenabled()
