"""``capture(timing=True)``: each op's own time, the wall clock on the CPU, events on CUDA read once at the end."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from time import perf_counter_ns
from typing import Any

import torch

from .._torch import fake_mode_running, has_values
from ..graph import GraphBuilder, Op

Tensor = torch.Tensor
_PLAIN = (Tensor, torch.nn.Parameter)  # no subclass: neither fake nor meta but by its device


class WallEvent:
    """``torch.cuda.Event(enable_timing=True)``'s interface on the wall clock: ``record`` reads
    ``time.perf_counter_ns``, ``elapsed_time`` is in milliseconds, as CUDA's. ``WALL_EVENTS`` times CPU ops
    the way ``CUDA_EVENTS`` times CUDA ops (marks read at the end), so that path runs without a GPU.

    >>> start, end = WallEvent(), WallEvent()
    >>> start.record(); end.record()
    >>> end.elapsed_time(start) <= 0 <= start.elapsed_time(end)
    True
    """

    __slots__ = ("ns",)

    def __init__(self) -> None:
        self.ns = 0

    def record(self, stream: Any = None) -> None:
        self.ns = perf_counter_ns()

    def elapsed_time(self, end: WallEvent) -> float:
        return (end.ns - self.ns) / 1e6


@dataclass(frozen=True, slots=True)
class Events:
    """How one device type's ops are timed with events: ``event()`` makes one (``record(stream)``,
    ``elapsed_time(end)`` in ms), ``stream(device)`` is the stream the op runs on, ``synchronize()`` waits
    for every event recorded (once, when the capture ends)."""

    event: Callable[[], Any]
    stream: Callable[[Any], Any]
    synchronize: Callable[[], None]


def _cuda_event() -> Any:
    return torch.cuda.Event(enable_timing=True)


CUDA_EVENTS = Events(_cuda_event, torch.cuda.current_stream, torch.cuda.synchronize)
"""CUDA's ops: an event pair on the op's current stream, read after one ``torch.cuda.synchronize()`` at the end."""

WALL_EVENTS = Events(WallEvent, lambda device: None, lambda: None)
"""The CPU's ops timed by deferred marks, as CUDA's are (tests; the capture times CPU ops directly)."""

NOTHING_RAN = ("timing=True: {n} ops ran on meta or fake tensors, where no kernel runs: their op.time is None "
               "(capture on real tensors to measure time)")
ELSEWHERE = ("timing=True times ops on the CPU and on CUDA; the ops on {kinds} were not timed (their op.time is None)")


class Timer:
    """Times each op ``OpMode`` runs (``run``), and gives the time to the op recorded for it (``took``).

    An op's device is its first tensor argument's (a factory op's ``device=``): CPU ops are timed by the
    wall clock around the op's own call (``time.perf_counter_ns``), ops of a device type in ``events``
    (CUDA's by default) by an event pair on the op's stream, read in ``finish``; ops on meta or fake tensors
    are not timed (``None``, and ``finish`` notes how many). The capture's bookkeeping (recording the op, its
    statistics, kept copies) runs after the span and is never in it.
    """

    __slots__ = ("events", "_span", "_pending", "_used", "_unran", "_elsewhere")

    def __init__(self, events: dict[str, Events] | None = None) -> None:
        self.events = {"cuda": CUDA_EVENTS} if events is None else events
        self._span: Any = None  # the op just run: its seconds, its events, or None
        self._pending: list[tuple[Op, Any, Any]] = []
        self._used: dict[int, Events] = {}  # the events that timed an op: each waited for once
        self._unran = 0  # ops on meta or fake tensors
        self._elsewhere: set[str] = set()  # device types with no clock here (mps, xpu): their ops untimed

    def run(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """``func(*args, **kwargs)``, timed."""
        where = self._where(args, kwargs)
        if where is None or where is False:
            self._span = where
            return func(*args, **kwargs)
        if where is True:
            t0 = perf_counter_ns()
            out = func(*args, **kwargs)
            self._span = (perf_counter_ns() - t0) * 1e-9
            return out
        events, device = where
        self._used[id(events)] = events
        stream = events.stream(device)
        start, end = events.event(), events.event()
        start.record(stream)
        out = func(*args, **kwargs)
        end.record(stream)
        self._span = (start, end)
        return out

    def _where(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """``True``: the wall clock; ``(events, device)``; ``False``: nothing runs (meta, fake); ``None``: a device
        with no clock here."""
        t = None
        for a in args:
            if isinstance(a, Tensor):
                t = a
                break
            if type(a) in (list, tuple) and a and isinstance(a[0], Tensor):
                t = a[0]
                break
        if t is None:  # a factory op: its device= (or the default device), inside a fake mode or not
            if fake_mode_running():
                return False
            device = kwargs.get("device")
            device = torch.device(device) if device is not None else torch.get_default_device()
            return self._device(device.type, device)
        if type(t) not in _PLAIN and not has_values(t):  # a fake tensor
            return False
        if t.is_cpu:
            events = self.events.get("cpu")
            return True if events is None else (events, t.device)
        return self._device(t.device.type, t.device)

    def _device(self, kind: str, device: Any) -> Any:
        if kind == "cpu" and "cpu" not in self.events:
            return True
        events = self.events.get(kind)
        if events is not None:
            return events, device
        if kind == "meta":
            return False
        self._elsewhere.add(kind)
        return None

    def took(self, op: Op) -> None:
        """``op`` was recorded for the op ``run`` ran last: its time (now, or in ``finish`` for events)."""
        span = self._span
        if span is None:
            return
        if span is False:
            self._unran += 1
        elif type(span) is float:
            op.time = span
        else:
            self._pending.append((op, *span))

    def finish(self, builder: GraphBuilder) -> None:
        """Read every event pair once, after one wait per device type; note the ops that did not run."""
        if self._pending:
            for events in self._used.values():
                events.synchronize()
            for op, start, end in self._pending:
                op.time = start.elapsed_time(end) * 1e-3
            self._pending.clear()
        if self._unran:
            builder.add_note(NOTHING_RAN.format(n=self._unran))
        if self._elsewhere:
            builder.add_note(ELSEWHERE.format(kinds=", ".join(sorted(self._elsewhere))))
