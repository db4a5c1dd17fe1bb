"""A rank's step as a schedule, not a sum: compute ops in order on one stream, collectives on a stream per group, waits where data needs them.

Given each op's compute time and each collective's time, the schedule plays the capture back as a
GPU runs it: compute ops one after another on the compute stream; a collective is issued when the
compute stream reaches it (its inputs are made by then) and runs on its group's communication stream
(NCCL serialises one communicator's work) from then until it is done; the compute stream waits for it
at the op that consumes it: a functional collective's ``wait_tensor`` (or its first reader), for a c10d
collective (``async_op=True`` work, DDP's buckets, FSDP2's all-gathers and reduce-scatters) the first
op that reads or writes what it wrote. A blocking collective (tensor parallelism's all-reduce, waited
at once) so stays on the critical path; a prefetched all-gather runs under the compute before its wait.

``exposed`` is the time the compute stream stands idle waiting for communication, ``overlap`` the
share of communication hidden behind compute. Both per call (charged to the call of the op that
waited) and per phase.

>>> import torch, dispatchtrace as dt
>>> with dt.capture() as g:
...     y = torch.ones(4).relu().sum()
>>> t = timeline(g, lambda op: 1e-3, lambda c: 0.0)
>>> round(t.total, 6), t.exposed, t.overlap
(0.003, 0.0, 1.0)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..graph import within
from ._collectives import Collective, collectives

if TYPE_CHECKING:
    from ..graph import Call, Graph, Op

COMPUTE = "compute"


@dataclass(frozen=True, slots=True)
class Span:
    """One op on the schedule: its ``stream`` (``"compute"``, or ``"comm <group>"``), ``start`` and ``end`` in
    seconds from the step's start, ``waited``: the seconds the compute stream stood idle before it for a
    collective (``0.0`` for most ops), and ``collective``, the collective a communication span runs."""

    op: Op
    stream: str
    start: float
    end: float
    waited: float = 0.0
    collective: Collective | None = None
    waited_for: Op | None = None
    """The collective op whose end the compute stream waited for before this op (``None`` when it did not wait)."""

    @property
    def seconds(self) -> float:
        return self.end - self.start


@dataclass(frozen=True, slots=True)
class Timeline:
    """A rank's simulated step: every op's ``Span`` in op order, the step's ``total`` (the last op's end),
    the busy ``compute`` and ``communication`` time, the ``exposed`` communication (compute idle waiting),
    ``overlap`` (hidden share of communication; 1.0 when there is none) and the ``critical_path`` (the ops,
    first to last, whose times make the total)."""

    spans: tuple[Span, ...]
    total: float
    compute: float
    communication: float
    exposed: float
    critical_path: tuple[Op, ...]
    tail: float = 0.0
    """Seconds the step's end waits, after its last compute op, for communication nothing waited for (a
    collective whose result the capture returned unread); part of ``exposed``, charged to the whole step."""
    _by_op: dict[int, Span] = field(default_factory=dict, repr=False, compare=False)

    @property
    def overlap(self) -> float:
        if self.communication <= 0:
            return 1.0
        return max(0.0, 1.0 - self.exposed / self.communication)

    def span(self, op: Op) -> Span:
        """The op's span on the schedule."""
        return self._by_op[op.index]

    def exposed_in(self, call: Call) -> float:
        """Seconds the compute stream waited for communication at ops inside ``call`` (its children's too; the
        root call also gets the ``tail``)."""
        waited = sum(s.waited for s in self.spans if s.waited and within(s.op.call, call))
        return waited + (self.tail if call.parent is None else 0.0)

    def communication_in(self, call: Call) -> float:
        """Seconds of the collectives issued inside ``call`` (its children's too)."""
        return sum(s.seconds for s in self.spans if s.collective is not None and within(s.op.call, call))

    def phases(self) -> dict[str, tuple[float, float]]:
        """Phase -> ``(elapsed, exposed)``: the time from the phase's first op's start to its last op's end on the
        compute stream, and the communication exposed inside it."""
        out: dict[str, list[float]] = {}
        for s in self.spans:
            if s.collective is not None:
                continue
            row = out.setdefault(s.op.phase, [s.start, s.end, 0.0])
            row[0], row[1], row[2] = min(row[0], s.start), max(row[1], s.end), row[2] + s.waited
        return {phase: (end - start, exposed) for phase, (start, end, exposed) in out.items()}

    def __str__(self) -> str:
        pct = 100 * self.overlap
        return (f"step {_ms(self.total)}: compute {_ms(self.compute)}, communication {_ms(self.communication)} "
                f"({pct:.0f}% hidden, {_ms(self.exposed)} exposed), {len(self.critical_path)} ops on the critical path")


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms" if seconds < 1 else f"{seconds:.3f} s"


def timeline(graph: Graph, op_seconds: Callable[[Op], float], collective_seconds: Callable[[Collective], float],
             found: Iterable[Collective] | None = None) -> Timeline:
    """The schedule of ``graph``'s ops: ``op_seconds(op)`` for each compute op, ``collective_seconds(c)`` for each
    collective (``views/_collectives.py``'s records: ``found`` when the caller has them, else read here)."""
    found = {c.op.index: c for c in (collectives(graph) if found is None else found)}
    waits: dict[int, list[Collective]] = {}  # op index -> the collectives it must wait for
    for c in found.values():
        waiter = c.wait if c.wait is not None else _first_touch(c.op)
        if waiter is not None:
            waits.setdefault(waiter.index, []).append(c)
    spans: list[Span] = []
    by_op: dict[int, Span] = {}
    streams: dict[str, float] = {}
    done: dict[int, Span] = {}  # collective op index -> its span
    clock = 0.0
    compute = communication = exposed = 0.0
    why: dict[int, int | None] = {}  # op index -> the op whose end set its start (for the critical path)
    last_compute: int | None = None
    for op in graph.ops:
        c = found.get(op.index)
        if c is not None:
            stream = f"comm {c.group.name if c.group is not None else '?'}"
            start = max(clock, streams.get(stream, 0.0))
            seconds = float(collective_seconds(c))
            span = Span(op, stream, start, start + seconds, collective=c)
            streams[stream] = span.end
            communication += seconds
            done[op.index] = span
            why[op.index] = last_compute if start == clock else _last_on(spans, stream)
        else:
            ready, blocker = clock, last_compute
            for w in waits.get(op.index, ()):
                end = done[w.op.index].end if w.op.index in done else 0.0
                if end > ready:
                    ready, blocker = end, w.op.index
            seconds = float(op_seconds(op))
            waited_for = graph.ops[blocker] if ready > clock and blocker is not None else None
            span = Span(op, COMPUTE, ready, ready + seconds, waited=ready - clock, waited_for=waited_for)
            exposed += ready - clock
            compute += seconds
            clock = span.end
            why[op.index] = blocker
            last_compute = op.index
        spans.append(span)
        by_op[op.index] = span
    total = max((s.end for s in spans), default=0.0)
    tail = max(0.0, total - clock)  # the step ends when its last collective does
    path = _critical_path(spans, why, total)
    return Timeline(tuple(spans), total, compute, communication, exposed + tail, tuple(s.op for s in path), tail, by_op)


def _first_touch(op: Op) -> Op | None:
    """The first op after a c10d collective that reads what it wrote (its users)."""
    users = [u for u in op.users if u.index > op.index]
    return min(users, key=lambda u: u.index) if users else None


def _last_on(spans: list[Span], stream: str) -> int | None:
    for s in reversed(spans):
        if s.stream == stream:
            return s.op.index
    return None


def _critical_path(spans: list[Span], why: dict[int, int | None], total: float) -> list[Span]:
    if not spans:
        return []
    by_index = {s.op.index: s for s in spans}
    current: Span | None = max(spans, key=lambda s: (s.end, s.stream == COMPUTE))
    path: list[Span] = []
    while current is not None:
        path.append(current)
        before = why.get(current.op.index)
        current = by_index.get(before) if before is not None else None
    path.reverse()
    return path


def measured_timeline(graph: Graph) -> Timeline | None:
    """What a timed capture measured, as a schedule: every op after the one before, for its measured ``op.time``
    (collectives on their group's stream, still in order: the capture's device ran them so); ``None`` when no
    op has a time (an untimed capture, meta, fake)."""
    times = [getattr(op, "time", None) for op in graph.ops]
    if all(t is None for t in times):
        return None
    found = {c.op.index: c for c in collectives(graph)}
    spans: list[Span] = []
    clock = compute = communication = 0.0
    for op, t in zip(graph.ops, times, strict=True):
        seconds = float(t or 0.0)
        c = found.get(op.index)
        stream = COMPUTE if c is None else f"comm {c.group.name if c.group is not None else '?'}"
        spans.append(Span(op, stream, clock, clock + seconds, collective=c))
        clock += seconds
        if c is None:
            compute += seconds
        else:
            communication += seconds
    return Timeline(tuple(spans), clock, compute, communication, communication, tuple(s.op for s in spans), 0.0,
                    {s.op.index: s for s in spans})
