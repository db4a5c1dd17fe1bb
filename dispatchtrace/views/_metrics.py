"""Metrics: each per-op and per-call number the views show, declared once (``Metric``), in one registry.

The summary's columns, the viewer's details panel and colour modes and the Model Explorer attributes
list the metrics that apply to a capture (``metrics``) and name none themselves; a metric registered
by the user's code shows up in all of them, and goes when it is unregistered.

>>> import torch, dispatchtrace as dt
>>> lin, x = torch.nn.Linear(4, 2), torch.ones(3, 4)
>>> with dt.capture(lin) as g:
...     _ = lin(x)
>>> def outputs(graph, call):
...     return sum(r.numel for r in call.outputs)
>>> dt.register_metric(dt.Metric(name="out_elems", header="Out elems", call=outputs))
Metric(name='out_elems', ...)
>>> g.summary().rows()[0]["out_elems"], "Out elems" in str(g.summary())
(6, True)
>>> [m.name for m in metrics(g, "call", "summary")][-1]
'out_elems'
>>> _ = dt.unregister_metric("out_elems")
>>> "out_elems" in g.summary().rows()[0]
False
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from .._text import human

if TYPE_CHECKING:
    from ..graph import Call, Graph, Op

PLACES = ("summary", "viewer", "model_explorer")
"""Where a metric can show: the summary table (text, ``rows()``, the notebook's HTML, markdown), the
HTML viewer (details panel, colour modes), Google Model Explorer's node and box attributes."""

Kind = Literal["op", "call"]


def always(graph: Graph) -> bool:
    """``Metric.when`` of a metric that applies to every capture."""
    return True


@dataclass(frozen=True, slots=True, kw_only=True)
class Metric:
    """One number per op and/or per module call, declared once for every view that shows numbers.

    ``name`` is the key in ``Summary.rows()``, the viewer payload and the Model Explorer attributes (an
    identifier); ``header`` the summary's column header; ``unit`` what ``human(value, unit)`` appends
    (``"FLOPs"``, ``"B"``); ``title`` the longer name of the viewer's panel and colour legend (default: ``header``).
    ``op`` and ``call``: how to compute it, ``(graph, op) -> value`` and ``(graph, call) -> value``, where
    ``graph`` is the graph (or the phase view, ``views/_phases.py``) being shown; ``call`` is also asked
    for the capture's root call (``graph.root``: the summary's total). At least one of the two.
    A value is a number or ``None`` (unknown); computations that share work read it through ``shared``.
    ``format``: a known value as text (default ``human(value, unit)``); ``unknown``: the text of ``None``. ``when``: whether
    it applies to a capture (``always``, ``training``, ``with_stats`` or any ``(graph) -> bool``, asked with
    the capture, never a phase view). ``shown``: the places of ``PLACES`` that list it. ``colour``: the viewer
    offers a colour mode of it (a log scale); ``fold``: how a folded run of calls adds up in the viewer.
    """

    name: str
    header: str
    unit: str = ""
    op: Callable[[Graph, Op], Any] | None = None
    call: Callable[[Graph, Call], Any] | None = None
    format: Callable[[Any], str] | None = None
    unknown: str = "-"
    when: Callable[[Graph], bool] = always
    title: str = ""
    shown: tuple[str, ...] = PLACES
    colour: bool = True
    fold: Literal["sum", "max"] = "sum"

    def text(self, value: Any) -> str:
        """``value`` as the summary and Model Explorer's panel write it."""
        if value is None:
            return self.unknown
        return human(value, self.unit) if self.format is None else self.format(value)

    @property
    def label(self) -> str:
        """The viewer's name for it: ``title``, else ``header``."""
        return self.title or self.header

    def __repr__(self) -> str:
        return f"Metric(name={self.name!r}, ...)"


_REGISTRY: dict[str, Metric] = {}


def register_metric(metric: Metric) -> Metric:
    """Add ``metric`` after the ones registered (the built-ins first); returns it. A name taken, or a field of
    the wrong kind, is an error that says what to do (``unregister_metric(name)`` first, or another name)."""
    if not isinstance(metric, Metric):
        raise TypeError(f"register_metric takes a dt.Metric, got {type(metric).__name__}; "
                        "declare it as dt.Metric(name=..., header=..., op=... and/or call=...)")
    m = metric
    if type(m.name) is not str or not m.name.isidentifier():
        raise ValueError(f"a metric's name must be an identifier (the key in rows() and the viewer), got {m.name!r}")
    if type(m.header) is not str or not m.header:
        raise ValueError(f"metric {m.name!r} needs a header, the summary's column title (a non-empty string), got {m.header!r}")
    if type(m.unit) is not str or type(m.title) is not str or type(m.unknown) is not str:
        raise TypeError(f"metric {m.name!r}: unit, title and unknown must be strings, got {m.unit!r}, {m.title!r} "
                        f"and {m.unknown!r}")
    if m.op is None and m.call is None:
        raise ValueError(f"metric {m.name!r} computes nothing: give it op=(graph, op) -> value and/or "
                         f"call=(graph, call) -> value")
    for field in ("op", "call", "format", "when"):
        fn = getattr(m, field)
        if fn is not None and not callable(fn):
            raise TypeError(f"metric {m.name!r}: {field} must be a function, got {type(fn).__name__} {fn!r}")
    bad = [p for p in m.shown if p not in PLACES] if isinstance(m.shown, tuple) else [m.shown]
    if bad:
        raise ValueError(f"metric {m.name!r}: shown must be a tuple of {', '.join(map(repr, PLACES))}, got {m.shown!r}")
    if m.fold not in ("sum", "max"):
        raise ValueError(f"metric {m.name!r}: fold must be 'sum' or 'max', got {m.fold!r}")
    if m.name in _REGISTRY:
        raise ValueError(f"a metric named {m.name!r} is already registered; unregister it first "
                         f"(dt.unregister_metric({m.name!r})) or choose another name")
    _REGISTRY[m.name] = m
    return m


def unregister_metric(name: str) -> Metric:
    """Remove the metric called ``name`` and return it; an unknown name is a ``ValueError`` listing the known."""
    if name not in _REGISTRY:
        raise ValueError(f"no metric named {name!r} is registered; the metrics are: {', '.join(_REGISTRY)}")
    return _REGISTRY.pop(name)


def all_metrics() -> tuple[Metric, ...]:
    """Every registered metric, in the order registered."""
    return tuple(_REGISTRY.values())


def capture_of(graph: Graph) -> Graph:
    """The capture a phase view shows (``views/_phases.py``), or ``graph`` itself."""
    return getattr(graph, "base", None) or graph


def metrics(graph: Graph, kind: Kind | None = None, place: str | None = None) -> list[Metric]:
    """The metrics that apply to ``graph``'s capture (``Metric.when``), computed for ``kind`` (``"op"``,
    ``"call"``, ``None``: either) and shown in ``place`` (one of ``PLACES``, ``None``: anywhere), in order."""
    capture = capture_of(graph)
    return [m for m in _REGISTRY.values()
            if (place is None or place in m.shown)
            and (kind is None or (m.op if kind == "op" else m.call) is not None)
            and m.when(capture)]


def with_stats(graph: Graph) -> bool:
    """``Metric.when`` of the statistics' metrics: a capture with ``values="stats"`` that holds some."""
    return bool(graph.stats)


_SHARED: weakref.WeakKeyDictionary[Graph, dict[Any, tuple[tuple[int, int, bool], Any]]] = weakref.WeakKeyDictionary()


def shared(graph: Graph, make: Callable[[Graph], Any]) -> Any:
    """``make(graph)``, made once per graph and kept while the graph lives (made again when ops were added):
    what several metrics' computations share, so that all of them cost one pass (``shared(graph, costs)``)."""
    per = _SHARED.get(graph)
    if per is None:
        per = _SHARED[graph] = {}
    stamp = (len(graph.ops), len(graph.calls), graph.complete)
    hit = per.get(make)
    if hit is None or hit[0] != stamp:
        hit = per[make] = (stamp, make(graph))
    return hit[1]
