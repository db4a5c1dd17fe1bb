"""``g.estimate(spec)``: how long each op and call would take on a device, by a roofline with efficiency curves.

Each op costs ``max(flops / (peak(dtype) · compute_eff), bytes / (bandwidth · memory_eff)) + fresh + launch_overhead``
(the efficiencies from the spec's curve for the op's class, size and shape, or its kernel's own where the spec
has one, ``views/_kernels.py``; ``fresh`` what
its new outputs cost beyond their bytes, ``DeviceSpec.fresh_output``, on a CPU past the mmap threshold); views and
allocations cost nothing. An SDPA call the capture ran as the math path is charged as one flash kernel
forward and one backward (``views/_attention.py``), unless it has dropout and the spec's device runs that unfused
(``DeviceSpec.attention_dropout_fused``: the CPU); a ``_foreach_*`` op is one launch over all its
tensors. An op with no FLOP formula whose class is not known to be memory-bound is charged its bytes
and listed in ``Estimate.unsure``, never left free.

>>> import torch, dispatchtrace as dt
>>> model, x = torch.nn.Sequential(torch.nn.Linear(4096, 4096), torch.nn.ReLU()), torch.ones(512, 4096)
>>> with dt.capture(model) as g:
...     y = model(x)
>>> est = g.estimate("h100")
>>> est.bound(g.ops[1]), est.bound(g.ops[2])  # the addmm, the relu
('compute', 'memory')
>>> est.time(g.calls[0]) == est.time(g.calls[1]) + est.time(g.calls[2])
True
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..graph import PHASES, Call, Op, is_collective
from ..hardware import spec_of
from ._attention import regions
from ._collectives import Collective, collectives
from ._costs import costs
from ._estimate_comms import Cluster, cluster_of, price_collectives, schedule_seconds
from ._estimate_metrics import show_estimate
from ._estimate_text import estimate_text
from ._kernels import Bytes, kernel_name, op_work
from ._timeline import Timeline, timeline

if TYPE_CHECKING:
    import os

    from ..graph import Graph, Phase
    from ..hardware import CollectiveCost, DeviceSpec, Link

Bound = str
"""What bounds an op: ``"compute"``, ``"memory"``, ``"overhead"`` (launch), ``"communication"`` (a collective,
on its group's stream), ``"free"`` (a view or an
allocation: no kernel) or ``"fused"`` (an op of an SDPA region charged to the region's first op)."""


@dataclass(frozen=True, slots=True, eq=False)
class Estimate:
    """Estimated time of every op and call of one capture on one device (``g.estimate(spec)``).

    Per op (indexed as ``graph.ops``): ``time`` in seconds, what bounds it, its roofline time (the
    datasheet peak and bandwidth at full efficiency, with no launch cost). A call's time is inclusive:
    its ops and its sub-calls', and the backward and recompute ops of a training step that belong to it
    (``op.origin``); ``self_time`` leaves the sub-calls out.
    """

    spec: DeviceSpec
    _graph: weakref.ref[Graph] = field(repr=False)
    times: tuple[float, ...]
    bounds: tuple[Bound, ...]
    roofline: tuple[float, ...]
    classes: tuple[str, ...]
    unsure: tuple[Op, ...]
    """The ops whose estimate lacks a FLOP formula and whose class is not known to be memory-bound: charged
    their bytes moved, so possibly too fast."""
    _self: dict[int, dict[str, float]] = field(repr=False)
    _incl: dict[int, dict[str, float]] = field(repr=False)
    _measured: dict[int, dict[str, float]] = field(repr=False)  # inclusive measured seconds by phase
    _bounds: dict[int, dict[str, float]] = field(repr=False)  # inclusive estimated seconds by bound
    _roofs: dict[int, dict[str, float]] = field(repr=False)  # inclusive roofline seconds ("all")
    timeline: Timeline = field(repr=False)
    """The step as a schedule (``views/_timeline.py``): compute in order, each collective on its group's stream
    from issue to wait; what ``total``, ``exposed``, ``overlap`` and ``critical_path`` read."""
    cluster: Cluster = field(repr=False)
    """Where the ranks sit and the links collectives were priced on (``views/_estimate_comms.py``)."""
    collectives: dict[int, tuple[Collective, CollectiveCost]] = field(repr=False)
    """Op index -> each collective and its price (kind, algorithm, protocol, nodes, the bounding link)."""

    @property
    def unsure_calls(self) -> tuple[Call, ...]:
        """The calls an unsure op belongs to (where it ran, or the forward call of a backward op), in order."""
        return tuple(dict.fromkeys(_owner(op) for op in self.unsure))

    @property
    def graph(self) -> Graph:
        """The capture this estimate is of (held weakly: the views keep a capture's estimate while it lives)."""
        graph = self._graph()
        if graph is None:
            raise ReferenceError("the capture this estimate is of is gone: keep the graph while its estimate is used")
        return graph

    @property
    def total(self) -> float:
        """Seconds for the whole capture, every phase: the step's length on the schedule, where communication that
        compute hides costs nothing and the rest adds (the sum of the ops' times without collectives)."""
        return self.timeline.total

    @property
    def communication(self) -> float:
        """Seconds of all the collectives, hidden or not."""
        return self.timeline.communication

    @property
    def exposed(self) -> float:
        """Seconds the compute stream stands idle waiting for communication."""
        return self.timeline.exposed

    @property
    def overlap(self) -> float:
        """The share of communication hidden behind compute (1.0 when there is none)."""
        return self.timeline.overlap

    @property
    def critical_path(self) -> tuple[Op, ...]:
        """The ops whose times make the total, first to last (``Timeline.critical_path``)."""
        return self.timeline.critical_path

    def exposed_in(self, call: Call) -> float:
        """Seconds of communication exposed at ops inside ``call`` (its sub-calls' too)."""
        return self.timeline.exposed_in(call)

    @property
    def phases(self) -> dict[str, float]:
        """Seconds per phase that ran (``"forward"``, ``"backward"``, ``"recompute"``, ``"optimizer"``)."""
        out: dict[str, float] = {}
        for op, t in zip(self.graph.ops, self.times, strict=True):
            out[op.phase] = out.get(op.phase, 0.0) + t
        return {p: out[p] for p in PHASES if p in out}

    def phase(self, name: Phase) -> float:
        """Seconds of one phase (0.0 when it did not run)."""
        if name not in PHASES:
            raise ValueError(f"a phase is one of {', '.join(PHASES)}, not {name!r}")
        return self.phases.get(name, 0.0)

    def time(self, item: Op | Call, *, phase: Phase | None = None) -> float:
        """Seconds of one op, or of one call inclusive (``phase``: only the ops of that phase)."""
        if isinstance(item, Op):
            return self.times[self._index(item)] if phase is None or item.phase == phase else 0.0
        return self._of(self._incl, item, phase)

    def self_time(self, call: Call, *, phase: Phase | None = None) -> float:
        """Seconds of a call's own ops (with the backward ops that belong to it), sub-calls left out."""
        return self._of(self._self, call, phase)

    def bound(self, op: Op) -> Bound:
        """What bounds ``op`` on this device (see ``Bound``)."""
        return self.bounds[self._index(op)]

    def efficiency(self, op: Op, *, measured: bool = False) -> float | None:
        """The op's roofline time over its estimated time (``measured=True``: over its measured time, ``None``
        when it was not timed); ``None`` for a free op."""
        i = self._index(op)
        roof = self.roofline[i]
        if self.bounds[i] in ("free", "fused"):
            return None
        took = _op_time(op) if measured else self.times[i]
        if not took:
            return None
        return roof / took

    def measured(self, item: Op | Call, *, phase: Phase | None = None) -> float | None:
        """The measured seconds of an op or a call (inclusive, as ``time``), from a timed capture
        (``dt.capture(model, timing=True)``); ``None`` when nothing in it was timed."""
        if isinstance(item, Op):
            return _op_time(item) if phase is None or item.phase == phase else None
        row = self._row(self._measured, item)
        if phase is not None:
            return row.get(phase)
        return sum(row.values()) if row else None

    def dominant_bound(self, call: Call) -> Bound:
        """The bound of the ops that take most of a call's estimated time (``"free"`` for a call with none)."""
        row = self._row(self._bounds, call)
        return max(row, key=row.__getitem__) if row else "free"

    def roofline_time(self, call: Call) -> float:
        """The roofline seconds of a call's ops (datasheet peak and bandwidth, no launch cost), inclusive."""
        return self._row(self._roofs, call).get("all", 0.0)

    def _row(self, table: dict[int, dict[str, float]], call: Call) -> dict[str, float]:
        row = table.get(id(call))
        if row is None:
            if call is not self.graph.root:
                raise ValueError(f"{call.label} is not a call of the capture this estimate is of")
            return {}
        return row

    @property
    def timed(self) -> bool:
        """Whether the capture has measured times (``op.time``) to hold the estimate against."""
        return any(_op_time(op) is not None for op in self.graph.ops)

    def _index(self, op: Op) -> int:
        ops = self.graph.ops
        i = op.index
        if i >= len(ops) or ops[i] is not op:
            raise ValueError(f"%{op.name} is not an op of the capture this estimate is of")
        return i

    def _of(self, table: dict[int, dict[str, float]], call: Call, phase: Phase | None) -> float:
        row = table.get(id(call))
        if row is None:
            if call is self.graph.root:
                row = {}
            else:
                raise ValueError(f"{call.label} is not a call of the capture this estimate is of")
        if phase is None:
            return sum(row.values()) if call is not self.graph.root else self.total
        if call is self.graph.root:
            return self.phase(phase)
        return row.get(phase, 0.0)

    def text(self, top: int = 15) -> str:
        """The ``top`` calls by time with their share of the step (and the measured time beside, when timed)."""
        return estimate_text(self, top)

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        return f"<Estimate {self.total * 1e3:.3f} ms on {self.spec.name}, {len(self.times)} ops>"


_DROPOUT = frozenset({"aten.bernoulli_.float", "aten.bernoulli.default", "aten.bernoulli.p", "aten.native_dropout.default",
                      "aten.rand_like.default", "aten.rand.default"})
"""The ops of the math path's dropout: a region with one is an SDPA call with dropout."""


def _op_time(op: Op) -> float | None:
    t = getattr(op, "time", None)
    return t if isinstance(t, (int, float)) else None


def _owner(op: Op) -> Call:
    """The call an op's time belongs to: where it ran, or for a backward or recompute op, the forward call
    it differentiates or recomputes."""
    if op.phase in ("backward", "recompute"):
        origin = op.origin
        if origin is not None:
            return origin
    return op.call


Table = dict[int, dict[str, float]]
"""``id(call) -> {key: seconds}``: a sum over the ops a call owns, by a key (phase, bound)."""


def _rolled(graph: Graph, owners: list[Call], values: list[float] | list[float | None], keys: list[str]
            ) -> tuple[Table, Table]:
    """Each call's own and inclusive sums of ``values`` by ``keys`` (one of each per op, ``None`` left out)."""
    own: Table = {id(c): {} for c in graph.calls}
    own[id(graph.root)] = {}
    for owner, v, k in zip(owners, values, keys, strict=True):
        if v:
            row = own.setdefault(id(owner), {})
            row[k] = row.get(k, 0.0) + v
    incl = {c: dict(row) for c, row in own.items()}
    for call in reversed(graph.calls):  # children entered after their parents: add each to its parent
        parent = call.parent
        if parent is None:
            continue
        into = incl.setdefault(id(parent), {})
        for k, v in incl[id(call)].items():
            into[k] = into.get(k, 0.0) + v
    return own, incl


def estimate(graph: Graph, spec: str | os.PathLike[str] | DeviceSpec, *, ranks_per_node: int | None = None,
             intra_node: Link | str | None = None, inter_node: Link | str | None = None) -> Estimate:
    """The ``Estimate`` of a finished capture on ``spec`` (a built-in name such as ``"h100"``, a
    ``DeviceSpec``, or the path of a JSON spec); the capture's views show it from now on (its summary, viewer
    and Model Explorer attributes: ``views/_estimate_metrics.py``). Collectives are priced on the spec's links
    with ``ranks_per_node`` ranks to a node (each overridable: ``inter_node="roce-400"``), and the total is the
    step's length on the schedule (``views/_estimate_comms.py``, ``views/_timeline.py``)."""
    device = spec_of(spec)
    cluster = cluster_of(device, ranks_per_node=ranks_per_node, intra_node=intra_node, inter_node=inter_node)
    base = getattr(graph, "base", None)  # a phase view: its capture's ops
    if base is not None:
        graph = base
    ops = graph.ops
    n = len(ops)
    cost, nbytes = costs(graph), Bytes()
    times = [0.0] * n
    bounds: list[Bound] = ["free"] * n
    roof = [0.0] * n
    classes = [""] * n
    unsure: list[Op] = []
    launch = device.launch_overhead
    bandwidth = device.memory_bandwidth
    cache: dict[Any, tuple[float, Bound, float]] = {}

    own = device.kernel_efficiency

    def charge(cls: str, dtype: str, flops: int | None, moved: int, shape: int | None = None,
               fresh: tuple[int, ...] = (), kernel: str | None = None) -> tuple[float, Bound, float]:
        kernel = kernel if kernel in own else None
        key = (cls, dtype, flops, moved, shape, fresh, kernel)
        hit = cache.get(key)
        if hit is not None:
            return hit
        ce, me = device.efficiency(cls, flops=flops, nbytes=moved, shape=shape, kernel=kernel)
        peak = device.peak(dtype) or device.peak("float32")
        compute = flops / peak if flops and peak else 0.0
        memory = moved / bandwidth if moved else 0.0
        c, m = (compute / ce if ce > 0 else compute), (memory / me if me > 0 else memory)
        busy = max(c, m) + sum(device.fresh_seconds(b) for b in fresh)
        bound: Bound = "overhead" if launch > busy else "compute" if c >= m else "memory"
        hit = cache[key] = (busy + launch, bound, max(compute, memory))
        return hit

    fused: set[int] = set()
    for r in regions(graph):
        if not device.attention_dropout_fused and any(ops[i].target in _DROPOUT for i in range(r.start, r.stop)):
            continue  # the device runs this call as the math path: its ops are charged one by one, as recorded
        heads = [i for i in range(r.start, r.stop) if not ops[i].is_view]
        fused.update(range(r.start, r.stop))
        if heads:
            head = heads[0]
            times[head], bounds[head], roof[head] = charge("attention", r.dtype, r.flops, r.nbytes)
            classes[head] = "attention"
            for i in range(r.start, r.stop):
                if i != head and not ops[i].is_view:
                    bounds[i], classes[i] = "fused", "attention"
        back = [i for i in r.backward if not ops[i].is_view]
        fused.update(r.backward)
        if back:
            head = back[0]
            flops = None if r.flops is None else int(r.flops * 2.5)
            times[head], bounds[head], roof[head] = charge("attention", r.dtype, flops, r.backward_bytes)
            classes[head] = "attention"
            for i in back[1:]:
                bounds[i], classes[i] = "fused", "attention"

    for op in ops:
        i = op.index
        if i in fused:
            continue
        work = op_work(op, cost, nbytes)
        classes[i] = work.cls
        if work.cls == "free":
            continue
        if work.flops is None and work.cls in ("other", "matmul", "convolution", "attention"):
            unsure.append(op)
        times[i], bounds[i], roof[i] = charge(work.cls, work.dtype, work.flops, work.nbytes, work.shape, work.fresh,
                                              kernel_name(op.target))

    found = collectives(graph)  # read once: priced, then scheduled
    priced = price_collectives(graph, cluster, found)
    for op in ops:  # waits and wrappers of collectives launch nothing: the wait is the schedule's
        if is_collective(op.target) and op.index not in priced:
            times[op.index], bounds[op.index], classes[op.index], roof[op.index] = 0.0, "free", "free", 0.0
    for i, (_, price) in priced.items():
        times[i], bounds[i], classes[i], roof[i] = price.seconds, "communication", "collective", price.seconds
    unsure = [op for op in unsure if not is_collective(op.target)]  # collectives have a model of their own
    schedule = timeline(graph, lambda op: times[op.index], schedule_seconds(priced), found)

    owners = [_owner(op) for op in ops]
    phases = [op.phase for op in ops]
    own, incl = _rolled(graph, owners, times, phases)
    measured = [_op_time(op) for op in ops]
    _, measured_incl = _rolled(graph, owners, measured, phases)
    _, bound_incl = _rolled(graph, owners, times, bounds)
    _, roof_incl = _rolled(graph, owners, roof, ["all"] * n)
    est = Estimate(device, weakref.ref(graph), tuple(times), tuple(bounds), tuple(roof), tuple(classes), tuple(unsure),
                   own, incl, measured_incl, bound_incl, roof_incl, schedule, cluster, priced)
    show_estimate(graph, est)  # the views of the capture show the estimate last made of it
    return est
