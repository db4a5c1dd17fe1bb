"""The measured-time metrics of a capture taken with ``timing=True``: time, own time, share of the step.

Declared once with ``views/_metrics.py``, so the summary, the viewer (details, a colour mode by time) and
Model Explorer's attributes show them for a timed capture, and none of them for an untimed one.

>>> import torch, dispatchtrace as dt
>>> model, x = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU()), torch.ones(8, 64)
>>> with dt.capture(model, timing=True) as g:
...     y = model(x)
>>> row = g.summary().rows()[0]
>>> row["time"] == g.time, row["time_share"]
(True, 1.0)
>>> "Time" in str(g.summary()), [m.name for m in dt.views.metrics(g, "call", "summary") if m.when is timed]
(True, ['time', 'self_time', 'time_share'])
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..graph import Op, times_sum
from . import _metric_defs  # noqa: F401 - registers the built-in metrics first: their columns lead, the times follow
from ._metrics import Metric, capture_of, register_metric, shared
from ._phases import PhaseGraph, has_backward, has_training, phase_graph

if TYPE_CHECKING:
    from ..graph import Call, Graph

__all__ = ["TIME_METRICS", "call_self_time", "call_time", "op_time", "percent", "seconds", "share", "timed"]


def timed(graph: Graph) -> bool:
    """``Metric.when`` of the time metrics: a capture taken with ``timing=True``."""
    return capture_of(graph).timed


def seconds(value: float | None) -> str:
    """Seconds as the views write them, three significant digits in s, ms or µs; ``None`` is ``-``.

    >>> seconds(1.2345), seconds(0.0456), seconds(0.000789), seconds(1.23e-05), seconds(0.0), seconds(None)
    ('1.23 s', '45.6 ms', '789 µs', '12.3 µs', '0 s', '-')
    """
    if value is None:
        return "-"
    if value == 0:
        return "0 s"
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if abs(value) >= scale * 0.9995 or unit == "µs":
            v = value / scale
            digits = 2 if abs(v) < 9.995 else 1 if abs(v) < 99.95 else 0
            return f"{v:.{digits}f} {unit}"
    raise AssertionError("unreachable")


def percent(value: float | None) -> str:
    """A share as a percentage: ``0.123`` is ``12.3%``; ``None`` is ``-``.

    >>> percent(0.1234), percent(1.0), percent(0.0004), percent(None)
    ('12.3%', '100%', '0.04%', '-')
    """
    if value is None:
        return "-"
    p = value * 100
    return f"{p:.0f}%" if p >= 99.95 else f"{p:.1f}%" if p >= 0.095 else f"{p:.2f}%"


class _Times:
    """Each call's inclusive and own time in one pass over the tree (``call.time`` walks it once per call)."""

    __slots__ = ("inclusive", "own")

    def __init__(self, graph: Graph) -> None:
        self.inclusive: dict[Call, float | None] = {}
        self.own: dict[Call, float | None] = {}
        self._visit(graph.root)

    def _visit(self, call: Call) -> float | None:
        own = times_sum(call.ops)
        total = own
        for child in call.children:
            if not isinstance(child, Op):
                sub = self._visit(child)  # type: ignore[arg-type]
                if sub is not None:
                    total = sub if total is None else total + sub
        self.own[call], self.inclusive[call] = own, total
        return total


def _times(graph: Graph) -> _Times:
    return shared(graph, _Times)


def op_time(graph: Graph, op: Op) -> float | None:
    """The op's measured seconds (``op.time``)."""
    return op.time


def call_time(graph: Graph, call: Call) -> float | None:
    """The call's measured seconds, its sub-calls' included (``call.time``): in a phase view, the ops the view
    puts under it (a backward op under the forward call it belongs to)."""
    return _times(graph).inclusive.get(call, call.time)


def call_self_time(graph: Graph, call: Call) -> float | None:
    """The seconds of the ops the call issued itself (``call.self_time``)."""
    return _times(graph).own.get(call, call.self_time)


def share(graph: Graph, x: Call | Op) -> float | None:
    """``x``'s time as a share of the whole step's (the capture's, whatever the phase view shows)."""
    total = _times(capture_of(graph)).inclusive.get(capture_of(graph).root)
    t = x.time if isinstance(x, Op) else call_time(graph, x)
    return None if t is None or not total else t / total


def _op_share(graph: Graph, op: Op) -> float | None:
    return share(graph, op)


def _call_share(graph: Graph, call: Call) -> float | None:
    return share(graph, call)


def timed_training(graph: Graph) -> bool:
    """``Metric.when`` of the per-phase time columns: a timed training step."""
    return timed(graph) and has_training(capture_of(graph))


class _Split:
    """Each capture call's time in the forward view and in the backward view (``views/_phases.py``)."""

    __slots__ = ("forward", "backward")

    def __init__(self, graph: Graph) -> None:
        self.forward = self._of(graph, "forward")
        self.backward = self._of(graph, "backward") if has_backward(graph) else {}

    @staticmethod
    def _of(graph: Graph, phase: str) -> dict[Call, float | None]:
        view = phase_graph(graph, phase)  # type: ignore[arg-type]
        times = _times(view).inclusive
        original = view.original if isinstance(view, PhaseGraph) else {}
        out = {original.get(c, c): t for c, t in times.items() if c.parent is not None}
        out[graph.root] = times.get(view.root)
        return out


def _split(graph: Graph) -> _Split:
    return shared(capture_of(graph), _Split)


def _original(graph: Graph, call: Call) -> Call:
    if call.parent is None:
        return capture_of(graph).root
    return graph.original.get(call, call) if isinstance(graph, PhaseGraph) else call


def _forward_time(graph: Graph, call: Call) -> float | None:
    return _split(graph).forward.get(_original(graph, call))


def _backward_time(graph: Graph, call: Call) -> float | None:
    return _split(graph).backward.get(_original(graph, call))


TIME_METRICS = (
    Metric(name="time", header="Time", unit="s", title="measured time", op=op_time, call=call_time, format=seconds,
           when=timed),
    Metric(name="self_time", header="Own time", unit="s", title="measured time of its own ops", call=call_self_time,
           format=seconds, when=timed, colour=False),
    Metric(name="time_share", header="Share", title="share of the step's measured time", op=_op_share,
           call=_call_share, format=percent, when=timed, colour=False, fold="sum"),
    Metric(name="forward_time", header="Fwd time", unit="s", title="measured forward time", call=_forward_time,
           format=seconds, when=timed_training, shown=("summary",)),
    Metric(name="backward_time", header="Bwd time", unit="s", title="measured backward time (the backward and "
           "recompute ops that belong to the call)", call=_backward_time, format=seconds, when=timed_training,
           shown=("summary",)),
)

for _m in TIME_METRICS:
    register_metric(_m)
