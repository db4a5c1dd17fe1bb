"""The estimate's metrics (estimated time, share, bound, efficiency, estimated over measured) in every view.

An estimate is of a capture *and* a device, so the views show the one last made of the capture: after
``est = g.estimate("h100")``, ``g.summary()``, the viewer (details, a colour mode by estimated time) and
Model Explorer's attributes carry it, through the metric registry (``views/_metrics.py``); before, none of
these columns appear. ``forget_estimate(g)`` takes it off again.

>>> import torch, dispatchtrace as dt
>>> model, x = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU()), torch.ones(8, 64)
>>> with dt.capture(model) as g:
...     y = model(x)
>>> "Est. time" in str(g.summary())
False
>>> est = g.estimate("h100")
>>> row = g.summary().rows()[1]
>>> row["est_time"] == est.time(g.calls[1]), row["bound"]
(True, 'overhead')
>>> forget_estimate(g); "Est. time" in str(g.summary())
False
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from ..graph import Call, Op
from ._metrics import Metric, capture_of, register_metric
from ._time_metrics import percent, seconds, timed

if TYPE_CHECKING:
    from ..graph import Graph
    from ._estimate import Estimate

_SHOWN: weakref.WeakKeyDictionary[Graph, Estimate] = weakref.WeakKeyDictionary()

_VIEW_PHASES = {"forward": ("forward",), "backward": ("backward", "recompute")}
"""The op phases a phase view shows under each call (``"all"`` and a plain capture: every phase)."""


def show_estimate(graph: Graph, est: Estimate) -> None:
    """Make ``est`` the estimate the views of ``graph`` show (``g.estimate`` does this)."""
    _SHOWN[graph] = est


def forget_estimate(graph: Graph) -> None:
    """The views of ``graph`` show no estimate again."""
    _SHOWN.pop(graph, None)


def shown_estimate(graph: Graph) -> Estimate | None:
    """The estimate the views of ``graph`` (a capture or one of its phase views) show, if any."""
    return _SHOWN.get(capture_of(graph))


def estimated(graph: Graph) -> bool:
    """``Metric.when`` of the estimate's metrics: an estimate was made of this capture."""
    return shown_estimate(graph) is not None


def _op(graph: Graph, op: Op) -> Op:
    source = getattr(graph, "source_op", None)
    return source.get(op, op) if source else op


def _call(graph: Graph, call: Call) -> Call:
    if call.parent is None:
        return capture_of(graph).root
    original = getattr(graph, "original", None)
    return original.get(call, call) if original else call


def _time(graph: Graph, x: Op | Call) -> float | None:
    est = shown_estimate(graph)
    if est is None:
        return None
    if isinstance(x, Op):
        return est.time(_op(graph, x))
    call = _call(graph, x)
    if call.parent is not None and getattr(graph, "original", None) and x not in graph.original:  # type: ignore[attr-defined]
        return None  # a group the phase view made (what the optimizer updates): no call of the capture
    phases = _VIEW_PHASES.get(getattr(graph, "phase", "all"))
    if phases is None:
        return est.time(call)
    return sum(est.time(call, phase=p) for p in phases)  # type: ignore[arg-type]


def _share(graph: Graph, x: Op | Call) -> float | None:
    est, t = shown_estimate(graph), _time(graph, x)
    return None if est is None or t is None or not est.total else t / est.total


def _bound(graph: Graph, x: Op | Call) -> str | None:
    est = shown_estimate(graph)
    if est is None:
        return None
    if isinstance(x, Op):
        return est.bound(_op(graph, x))
    return est.dominant_bound(_call(graph, x))


def _efficiency(graph: Graph, x: Op | Call) -> float | None:
    """The roofline time over the estimate: of the op, or of all the call's ops together."""
    est = shown_estimate(graph)
    if est is None:
        return None
    if isinstance(x, Op):
        return est.efficiency(_op(graph, x))
    t = _time(graph, x)
    if not t:
        return None
    return est.roofline_time(_call(graph, x)) / t


def _ratio(graph: Graph, x: Op | Call) -> float | None:
    est = shown_estimate(graph)
    if est is None:
        return None
    t = _time(graph, x)
    if isinstance(x, Op):
        m = est.measured(_op(graph, x))
    else:
        phases = _VIEW_PHASES.get(getattr(graph, "phase", "all"))
        call = _call(graph, x)
        parts = [est.measured(call)] if phases is None else [est.measured(call, phase=p) for p in phases]  # type: ignore[arg-type]
        m = None if all(p is None for p in parts) else sum(p for p in parts if p is not None)
    return t / m if m and t is not None else None


def _estimated_and_timed(graph: Graph) -> bool:
    return estimated(graph) and timed(graph)


def _text(value: Any) -> str:
    return "-" if value is None else str(value)


def _fraction(value: Any) -> str:
    return "-" if value is None else f"{value:.2f}"


ESTIMATE_METRICS = (
    Metric(name="est_time", header="Est. time", unit="s", title="estimated time", op=_time, call=_time,
           format=seconds, when=estimated),
    Metric(name="est_share", header="Est. share", title="share of the step's estimated time", op=_share, call=_share,
           format=percent, when=estimated, colour=False),
    Metric(name="bound", header="Bound", title="what bounds it (compute, memory, launch overhead)", op=_bound,
           call=_bound, format=_text, when=estimated, colour=False, fold="max", shown=("summary", "model_explorer")),
    Metric(name="efficiency", header="Roofline", title="roofline time over the estimate", op=_efficiency,
           call=_efficiency, format=percent, when=estimated, colour=False, fold="max"),
    Metric(name="est_ratio", header="Est/meas", title="estimated over measured time", op=_ratio, call=_ratio,
           format=_fraction, when=_estimated_and_timed, colour=False, fold="max"),
)

for _m in ESTIMATE_METRICS:
    register_metric(_m)
