"""Memory of a capture: bytes saved for backward per call, and live tensor bytes over the ops, with the peak.

Each storage counts once (views share their base's storage). Its size is the byte size autograd's
saved storage had (``graph.saved``), else the largest tensor the capture saw on it
(``numel * itemsize``). What is approximated:

- *live* means "from the op that made it to the last op that reads, writes or returns it": eager
  PyTorch frees a tensor when its last reference goes, which is never earlier and may be later
  (a local variable held to the end of a ``forward``), so the timeline is a lower bound of what an
  allocator holds; allocator rounding and caching are not modelled.
- an activation autograd saved stays live until the last backward op in ``graph.ops`` that reads
  it; when no such op was recorded (no backward ran in the block, or backward ops are not part of
  ``graph.ops``), until the end of the capture: autograd holds it past the block.
- parameters, buffers, inputs and constants the ops read, and the block's inputs, are live
  throughout (``baseline``); a storage of unknown size (symbolic shapes) counts 0.

>>> import torch, dispatchtrace as dt
>>> net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Sigmoid(), torch.nn.Linear(8, 2))
>>> x = torch.ones(3, 4)
>>> with dt.capture(net) as g:
...     y = net(x)
>>> m = memory(g)
>>> [(c.label, m.call(c).self_saved) for c in g.calls]   # sigmoid saves its result, the last Linear its input
[('Sequential', 0), ('0', 0), ('1', 96), ('2', 0)]
>>> m.call(g.calls[0]).saved, m.call(g.calls[0]).saved_external   # x (input) and the second weight
(96, 112)
>>> m.call(g.calls[0]).retained   # kept past the block: the saved sigmoid output and y
120
>>> m.baseline, m.peak, m.peak_op.name   # parameters and x; the peak while sigmoid reads addmm's result
(280, 472, 'sigmoid')
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..graph import op_ranges
from ._costs import tensor_bytes
from ._labels import call_label
from ._summary import human

if TYPE_CHECKING:
    from ..graph import Call, Graph, Kind, Op


@dataclass(frozen=True, slots=True)
class CallMemory:
    """Memory of one module call, in bytes.

    ``saved``: activations (tensors made inside the block) autograd saved for backward while the call
    ran, sub-calls included, each storage once, credited to the innermost call running when it was
    first saved; ``self_saved`` only those saved while it was the innermost call. ``saved_external``:
    parameters, buffers, inputs and constants saved the same way (sub-calls included): memory that
    exists anyway, so not counted as activations. ``retained``: activations made inside the call
    that are still live when it returns (saved for backward, returned, or read later), sub-calls
    included: what the call adds to live memory, ``MemTracker``'s activation growth over the call;
    for ``graph.root``, the activations live past the block (its outputs, saved ones backward did not
    free).
    """

    saved: int
    self_saved: int
    saved_external: int
    retained: int


@dataclass(frozen=True, slots=True, eq=False)
class Memory:
    """Saved bytes per call and live bytes over the ops of one capture (see the module docstring).

    ``timeline[i]`` is the bytes live while ``graph.ops[i]`` runs (its inputs and outputs included),
    ``baseline`` the part live throughout (parameters, buffers, inputs, constants), ``peak`` the
    largest value (``baseline`` when there are no ops), ``peak_op`` the first op where it is reached,
    ``at_peak`` the activation bytes live there by the call holding them, largest first (a saved
    activation is held by the call that saved it, any other by the call of the op that made it; a
    backward op's by the forward call it belongs to, ``op.origin``, where the graph has it).
    ``calls`` maps every call (the root included) to its ``CallMemory``.
    """

    timeline: tuple[int, ...]
    baseline: int
    peak: int
    peak_op: Op | None
    at_peak: tuple[tuple[Call, int], ...]
    calls: dict[Call, CallMemory]
    peak_call: Call | None = None
    """The call the peak op belongs to, where its phase view places it: a backward op's forward call
    (``op.origin``), a gradient accumulation's parameter's module, else the call it ran in."""

    def call(self, call: Call) -> CallMemory:
        """The memory of one call (``graph.root`` gives the whole capture)."""
        try:
            return self.calls[call]
        except KeyError:
            raise KeyError(f"{call!r} is not a call of this capture; pass one of g.calls or g.root") from None

    def __str__(self) -> str:
        total = next((m for c, m in self.calls.items() if c.parent is None), CallMemory(0, 0, 0, 0))
        op = self.peak_op
        where = "" if op is None else f" at %{op.name} ({call_label(self.peak_call or op.call)}, {op.phase})"
        lines = [f"peak {human(self.peak, 'B')}{where}: {human(self.peak - self.baseline, 'B')} activations, "
                 f"{human(self.baseline, 'B')} parameters, buffers and inputs"]
        if self.at_peak:
            lines.append("activations live at the peak, by the call holding them:")
            lines += _listed(list(self.at_peak))
        lines.append(f"saved for backward: {human(total.saved, 'B')} activations, "
                     f"{human(total.saved_external, 'B')} parameters, buffers and inputs")
        saved = sorted(((c, m.self_saved) for c, m in self.calls.items() if m.self_saved), key=lambda cm: -cm[1])
        if saved:
            lines.append("activations saved for backward, by the call that saved them:")
            lines += _listed(saved)
        return "\n".join(lines)


def _listed(rows: list[tuple[Call, int]]) -> list[str]:
    lines = [f"  {human(n, 'B'):>8}  {call_label(c)}" for c, n in rows[:10]]
    if len(rows) > 10:
        lines.append(f"  ... {len(rows) - 10} more calls")
    return lines


def _placed(graph: Graph, op: Op) -> Call:
    """Where a phase view places ``op`` (``views.phases``): a backward op under its forward call, a
    gradient accumulation under the first call of its parameter's module, any other where it ran."""
    if op.origin is not None:
        return op.origin
    if op.param is not None:
        module = op.param.rpartition(".")[0]
        found = next((c for c in graph.calls if c.path == module), None)
        if found is not None:
            return found
    return op.call


class _Storage:
    """One storage while the timeline is built: kind, size, first and last op, owning call."""

    __slots__ = ("kind", "bytes", "born", "end", "owner", "past")

    def __init__(self, kind: Kind, born: int, owner: Call | None) -> None:
        self.kind = kind
        self.bytes = 0
        self.born = born
        self.end = born
        self.owner = owner
        self.past = False  # live past the block: returned by it, or saved and not freed by a backward op


def _storages(graph: Graph) -> dict[int, _Storage]:
    """Every storage the ops touch and the block's inputs, first sight fixing its kind and birth."""
    out: dict[int, _Storage] = {}
    last = len(graph.ops) - 1

    def see(ref: object, i: int, op: Op | None) -> None:
        s = out.get(ref.storage)  # type: ignore[attr-defined]
        if s is None:
            external = op is None or ref.producer is not op or ref.kind != "activation"  # type: ignore[attr-defined]
            owner = None if op is None else (getattr(op, "origin", None) or op.call)
            s = out[ref.storage] = _Storage("input" if op is None else ref.kind, 0 if external else i, owner)  # type: ignore[attr-defined]
            if external:
                s.end = last
        n = tensor_bytes(ref)  # type: ignore[arg-type]
        if n is not None and n > s.bytes:
            s.bytes = n
        if i > s.end:
            s.end = i

    for ref in graph.inputs:
        see(ref, 0, None)
    for op in graph.ops:
        i = op.index
        for ref in op.inputs:
            see(ref, i, op)
        for ref in op.mutated:
            see(ref, i, op)
        for ref in op.outputs:
            see(ref, i, op)
    for ref in graph.outputs:
        s = out.get(ref.storage)
        if s is not None:
            s.end = last
            s.past = True
    return out


def _saved_until(graph: Graph, storages: dict[int, _Storage]) -> None:
    """Saved activations live until the last backward op reading them, else to the end."""
    read_in_backward: set[int] = set()
    for op in graph.ops:
        if op.phase != "forward":
            read_in_backward.update(r.storage for r in op.inputs)
    last = len(graph.ops) - 1
    for rec in graph.saved:
        s = storages.get(rec.storage) if rec.storage is not None else None
        if s is None:
            continue
        if rec.bytes is not None:
            s.bytes = rec.bytes
        if s.kind == "activation":
            s.owner = rec.call
            if rec.storage not in read_in_backward:
                s.end = last
                s.past = True


def _calls(graph: Graph, storages: dict[int, _Storage]) -> dict[Call, CallMemory]:
    calls = [graph.root, *graph.calls]
    own = dict.fromkeys(calls, 0)
    external = dict.fromkeys(calls, 0)
    seen: set[int] = set()
    for rec in graph.saved:
        s = None
        if rec.storage is not None:
            if rec.storage in seen:
                continue
            seen.add(rec.storage)
            s = storages.get(rec.storage)
        nbytes = rec.bytes if rec.bytes is not None else (s.bytes if s is not None else 0)
        table = own if s is None or s.kind == "activation" else external
        table[rec.call] = table.get(rec.call, 0) + nbytes
    retained = dict.fromkeys(calls, 0)
    if graph.ops:
        spans = op_ranges(graph.root)
        outputs = {c: {r.storage for r in c.outputs} for c in graph.calls}
        for sid, s in storages.items():
            if s.kind != "activation":
                continue
            if s.past:
                retained[graph.root] += s.bytes
            call = graph.ops[s.born].call
            while call.parent is not None:  # each enclosing call it outlives, or returns
                if s.past or s.end >= spans[id(call)].stop or sid in outputs[call]:
                    retained[call] += s.bytes
                call = call.parent
    saved, saved_external = dict(own), dict(external)
    for c in reversed(graph.calls):  # children come after their parent: sums flow up
        assert c.parent is not None
        saved[c.parent] += saved[c]
        saved_external[c.parent] += saved_external[c]
    return {c: CallMemory(saved[c], own[c], saved_external[c], retained[c]) for c in calls}


def memory(graph: Graph) -> Memory:
    """The (cached) ``Memory`` of a finished capture; a capture still recording is not cached."""
    cached = _CACHE.get(graph)
    if cached is not None:
        return cached
    storages = _storages(graph)
    _saved_until(graph, storages)
    n = len(graph.ops)
    delta = [0] * (n + 1)
    baseline = 0
    for s in storages.values():
        if s.kind == "activation":
            delta[s.born] += s.bytes
            delta[s.end + 1] -= s.bytes
        else:
            baseline += s.bytes
    timeline: list[int] = []
    live = baseline
    for i in range(n):
        live += delta[i]
        timeline.append(live)
    peak_at = max(range(n), key=timeline.__getitem__) if n else None
    held: dict[Call, int] = {}
    if peak_at is not None:
        for s in storages.values():
            if s.kind == "activation" and s.born <= peak_at <= s.end and s.bytes and s.owner is not None:
                held[s.owner] = held.get(s.owner, 0) + s.bytes
    result = Memory(tuple(timeline), baseline, baseline if peak_at is None else timeline[peak_at],
                    None if peak_at is None else graph.ops[peak_at],
                    tuple(sorted(held.items(), key=lambda kv: -kv[1])), _calls(graph, storages),
                    None if peak_at is None else _placed(graph, graph.ops[peak_at]))
    if graph.complete:
        _CACHE[graph] = result
    return result


_CACHE: weakref.WeakKeyDictionary[Graph, Memory] = weakref.WeakKeyDictionary()
