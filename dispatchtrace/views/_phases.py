"""Phase views: a training step's forward, backward or both as a graph every other view draws unchanged.

A capture keeps ``op.call`` a record of time: a top-level ``loss.backward()``'s ops are the root's.
The views group ops by call (``op_ranges``: a call's ops are one contiguous range), so showing
backward ops under the forward call they belong to (``op.origin``) needs another call tree. This
module builds it once per phase as a ``PhaseGraph``: a ``Graph`` whose calls are copies of the
capture's (``PhaseGraph.original`` maps them back), whose ops are copies placed under their new
call and numbered in walk order, with producers, users and refs linking only ops of the view.

- ``"forward"``: the forward ops (``op.phase == "forward"``, the loss included), where they ran.
- ``"backward"``: the backward and recompute ops, each under ``op.origin``; gradient accumulation
  (``op.param``) under the first call of the module that owns the parameter (an input's at the
  root); any other op (the loss's backward, no origin) at the root. A call's children are ordered by when their first op
  ran; calls with no such op are left out. Calls have no inputs or outputs here (their forward
  tensors are not what backward reads), the view has no outputs.
- ``"all"``: every op; each call holds its forward children as they ran, then the backward and
  recompute ops it owns (as in ``"backward"``). The optimizer ops that update one module's
  parameters (an op that writes them or their state, ``0.weight.momentum_buffer``) go into one
  *group* per module, ``optimizer: layer1.0.conv1``, beside that module's first call (at the end of
  its parent's children), holding a group per parameter, ``layer1.0.conv1.weight``, with that
  parameter's ops (an op over several of the module's parameters stays in the module's group). The
  optimizer ops over several modules' parameters (a foreach or fused step) go into one ``optimizer``
  group at the root, the backward ops with no call to go under (a functional loss's) into one
  ``backward`` group at the root, each where its first op was.

A group is a ``Call`` of the view with no module (``PhaseGraph.groups``; type ``optimizer``,
``parameter`` or ``backward``, its label its path): every view draws it as a box of its own, and
``depth="auto"`` counts it as any other box. It is not in ``PhaseGraph.original``.

Optimizer ops appear only under ``"all"``. A capture with no op outside ``forward`` is its own
view under every phase: the graph itself is returned.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field, replace
from itertools import repeat
from operator import attrgetter, ne
from typing import get_args

from ..graph import PHASE_VIEWS, Call, Child, Graph, Op, PhaseView, TensorRef, new_call

_BACKWARD = ("backward", "recompute")


class PhaseGraph(Graph):
    """A ``Graph`` that shows one phase of ``base``; ``original`` maps each of its calls to the capture's."""

    def __init__(self, base: Graph, phase: PhaseView) -> None:
        super().__init__()
        self._base = weakref.ref(base)  # the per-capture cache below holds views weakly keyed by their capture
        self.phase = phase
        self.original: dict[Call, Call] = {}
        self.source_op: dict[Op, Op] = {}
        """Each op of the view to the capture's op it copies."""
        self.groups: set[Call] = set()
        """The calls of the view that group ops by what they update (``"all"``: see the module docstring)."""

    @property
    def base(self) -> Graph | None:
        """The capture this view shows (``None`` once it is gone)."""
        return self._base()


def check_phase(phase: object) -> PhaseView:
    """``phase`` when it is one of ``PHASE_VIEWS``, else a ``ValueError`` that lists them.

    >>> check_phase("backward")
    'backward'
    """
    if phase not in get_args(PhaseView):
        raise ValueError(f"phase must be one of {', '.join(map(repr, PHASE_VIEWS))}, not {phase!r}")
    return phase  # type: ignore[return-value]


def has_training(graph: Graph) -> bool:
    """Whether any op of ``graph`` ran outside the forward phase."""
    return any(map(ne, map(_PHASE, graph.ops), repeat("forward")))  # (no Python call per op)


_PHASE = attrgetter("phase")

NO_BACKWARD = ("there is no backward phase in this capture (no op ran in autograd's backward), so phase='backward' "
               "has nothing to show; capture a training step: call loss.backward() inside the `with dt.capture(...)` "
               "block, or run `dispatchtrace MODEL --train`")


def has_backward(graph: Graph) -> bool:
    """Whether any op of ``graph`` ran in autograd's backward (or recomputed a checkpoint there)."""
    return any(op.phase == "backward" or op.phase == "recompute" for op in graph.ops)


def phase_graph(graph: Graph, phase: PhaseView = "forward") -> Graph:
    """The graph of ``phase`` (see the module docstring); ``graph`` itself when it has nothing but forward ops.

    >>> import torch, dispatchtrace as dt
    >>> net, x = torch.nn.Sequential(torch.nn.Linear(4, 2)), torch.ones(3, 4)
    >>> with dt.capture(net) as g:
    ...     net(x).sum().backward()
    >>> [op.short for op in phase_graph(g, "backward").calls[1].ops]
    ['aten::t', 'aten::mm', 'aten::t', 'aten::sum', 'aten::view', 'aten::detach', 'aten::t', 'aten::detach']
    >>> phase_graph(g, "backward").calls[1].label, len(phase_graph(g, "all").ops) == len(g.ops)
    ('0', True)
    """
    check_phase(phase)
    if isinstance(graph, PhaseGraph) and graph.base is not None:
        graph = graph.base
    if phase == "backward" and not has_backward(graph):
        raise ValueError(NO_BACKWARD)
    if not has_training(graph):
        return graph
    cached = _CACHE.get(graph, {}).get(phase)
    if cached is not None:
        return cached
    view = _Builder(graph, phase).build()
    if graph.complete:
        _CACHE.setdefault(graph, {})[phase] = view
    return view


_CACHE: weakref.WeakKeyDictionary[Graph, dict[str, Graph]] = weakref.WeakKeyDictionary()


@dataclass(eq=False, slots=True)
class _Group:
    """A box of the ``"all"`` view that no module call made (``PhaseGraph.groups``): its label and its children."""

    path: str
    type: str
    children: list[Op | _Group] = field(default_factory=list)


class _Builder:
    """One phase view: which op goes under which call, then the copies."""

    def __init__(self, graph: Graph, phase: PhaseView) -> None:
        self.g, self.phase = graph, phase
        self.view = PhaseGraph(graph, phase)
        self.copy: dict[Call, Call] = {}
        self.new_op: dict[Op, Op] = {}
        self.refs: dict[int, TensorRef] = {}
        self.first: dict[str, Call] = {}
        for call in reversed(graph.calls):
            self.first[call.path] = call
        self.inputs = {r.name for r in graph.inputs}  # a leaf input's gradient is accumulated at the root
        self.param: dict[Op, str] = {}  # "all": the parameter each optimizer op updates, where it is one

    def _home(self, op: Op) -> Call | None:
        """The capture's call a backward or recompute op is shown under (``None``: the root)."""
        if op.origin is not None:
            return op.origin
        if op.param is not None and op.param not in self.inputs:
            return self.first.get(op.param.rpartition(".")[0])
        return None

    def _updates(self, op: Op) -> Call | None:
        """The first call of the one module whose parameters (or their optimizer state, ``0.weight.exp_avg``)
        an optimizer op writes; ``None`` (the root) for an op that writes several modules' or none."""
        homes: set[str] = set()
        for ref in op.mutated or op.inputs:
            if ref.name is None or ref.kind not in ("parameter", "constant") or ref.name in self.inputs:
                continue
            path = ref.name
            while path and path not in self.first:
                path = path.rpartition(".")[0]
            if path in self.first and (path or "" in self.first):
                homes.add(path)
        return self.first[homes.pop()] if len(homes) == 1 else None

    @staticmethod
    def _parameter(op: Op, module: str) -> str | None:
        """The one parameter of module path ``module`` that optimizer op ``op`` updates (a state's parameter:
        ``conv1.weight`` for ``conv1.weight.momentum_buffer``), ``None`` when it touches several."""
        names: set[str] = set()
        for ref in op.mutated or op.inputs:
            if ref.name is None or ref.kind not in ("parameter", "constant"):
                continue
            name = ref.name if ref.kind == "parameter" else ref.name.rpartition(".")[0]
            if name.rpartition(".")[0] == module:
                names.add(name)
        return names.pop() if len(names) == 1 else None

    def _optimizer_homes(self) -> dict[Op, Call]:
        """``"all"``: the root's optimizer ops that update one module, each with that module's first call, and
        ``self.param`` the parameter each updates where it is one. An op that touches no named tensor (a
        momentum buffer's ``clone`` of a gradient) belongs where every op reading its result belongs."""
        ops = [op for op in self.g.ops if op.phase == "optimizer" and op.call is self.g.root]
        homes: dict[Op, Call] = {}
        self.param.clear()
        for op in ops:
            home = self._updates(op)
            if home is not None:
                homes[op] = home
                name = self._parameter(op, home.path)
                if name is not None:
                    self.param[op] = name
        for op in reversed(ops):
            if op in homes or not op.users or any(u.phase != "optimizer" for u in op.users):
                continue
            found = {homes.get(u) for u in op.users}
            if len(found) == 1 and None not in found:
                homes[op] = found.pop()
                names = {self.param.get(u) for u in op.users}
                if len(names) == 1 and None not in names:
                    self.param[op] = names.pop()
        return homes

    def _optimizer_groups(self, updates: dict[Call, list[Op]]) -> dict[Call, list[_Group]]:
        """``"all"``: each module's optimizer ops as one group, a group per parameter inside, by the parent of
        the module's first call (``updates``: the ops by that first call)."""
        out: dict[Call, list[_Group]] = {}
        for home, ops in updates.items():
            box = _Group(f"optimizer: {home.path or home.type}", "optimizer")
            per: dict[str, _Group] = {}
            for op in ops:
                name = self.param.get(op)
                if name is None:
                    box.children.append(op)
                    continue
                group = per.get(name)
                if group is None:
                    group = per[name] = _Group(name, "parameter")
                    box.children.append(group)
                group.children.append(op)
            out.setdefault(home.parent or self.g.root, []).append(box)
        return out

    def _children(self) -> dict[Call, list[Child | _Group]]:
        """The children of each capture call in the view, still the capture's objects (and ``"all"``'s groups)."""
        moved: dict[Call, list[Op]] = {}  # backward, recompute ops, by the call shown under
        updates: dict[Call, list[Op]] = {}  # "all": optimizer ops, by the first call of the module they update
        placed: set[Op] = set()
        for op in self.g.ops:
            if op.phase in _BACKWARD and self.phase != "forward":
                home = self._home(op)
                if home is not None or self.phase == "backward":
                    moved.setdefault(home or self.g.root, []).append(op)
        if self.phase == "all":
            homes = self._optimizer_homes()
            for op in self.g.ops:
                if op in homes:
                    updates.setdefault(homes[op], []).append(op)
                    placed.add(op)
        if self.phase == "backward":
            return self._backward_tree(moved)  # type: ignore[return-value]
        keep = ("forward",) if self.phase == "forward" else ("forward", "optimizer", *_BACKWARD)
        kids: dict[Call, list[Child | _Group]] = {}
        for call in [self.g.root, *self.g.calls]:
            kids[call] = [c for c in call.children if isinstance(c, Call) or (
                c.phase in keep and c not in placed and (c.phase not in _BACKWARD or self._home(c) is None))]
        for call, ops in moved.items():  # "all": a call's own backward ops after its forward children
            kids[call].extend(ops)
        if self.phase == "all":
            for call, boxes in self._optimizer_groups(updates).items():
                kids[call].extend(boxes)
            kids[self.g.root] = self._root_groups(kids[self.g.root])
        return kids

    @staticmethod
    def _root_groups(items: list[Child | _Group]) -> list[Child | _Group]:
        """``"all"``: the root's backward ops (no call to go under) as one ``backward`` group, its optimizer ops
        over several modules as one ``optimizer`` group, each where its first op was."""
        out: list[Child | _Group] = []
        boxes: dict[str, _Group] = {}
        for item in items:
            phase = item.phase if isinstance(item, Op) else None
            kind = "backward" if phase in _BACKWARD else "optimizer" if phase == "optimizer" else None
            if kind is None:
                out.append(item)
                continue
            box = boxes.get(kind)
            if box is None:
                box = boxes[kind] = _Group(kind, kind)
                out.append(box)
            box.children.append(item)  # type: ignore[arg-type]
        return out

    def _backward_tree(self, extra: dict[Call, list[Op]]) -> dict[Call, list[Child]]:
        """``"backward"``: the calls that own a backward op (and their parents), children by first op run."""
        first: dict[Call, int] = {}
        for call, ops in extra.items():
            start = ops[0].index
            c: Call | None = call
            while c is not None:
                if first.get(c, start + 1) > start:
                    first[c] = start
                c = c.parent
        kids: dict[Call, list[Child]] = {c: list(extra.get(c, [])) for c in first}
        for call in self.g.calls:
            if call in first and call.parent is not None:
                kids.setdefault(call.parent, []).append(call)
        for items in kids.values():
            items.sort(key=lambda c: c.index if isinstance(c, Op) else first[c] - 0.5)
        return kids

    def build(self) -> PhaseGraph:
        kids = self._children()
        view, g = self.view, self.g
        view.root = self.copy[g.root] = _clone(g.root, None, self.phase)
        view.original[view.root] = g.root
        self._fill(g.root, kids)
        if self.phase == "all":  # entry order, as the capture's, with the groups where they stand
            view.calls = [c for c in view.root.walk() if isinstance(c, Call)]
        else:
            view.calls = [self.copy[c] for c in g.calls if c in self.copy]  # entry order, as the capture's
        for op, new in self.new_op.items():
            new.producers = tuple(self.new_op[p] for p in op.producers if p in self.new_op)
            new.users = tuple(self.new_op[u] for u in op.users if u in self.new_op)
            new.inputs = tuple(self._ref(r) for r in op.inputs)
            new.outputs = tuple(self._ref(r) for r in op.outputs)
            new.mutated = tuple(self._ref(r) for r in op.mutated)
            new.args = tuple(self._arg(a) for a in op.args)
            new.kwargs = {k: self._arg(v) for k, v in op.kwargs.items()}
            new.grad_of = self.new_op.get(op.grad_of) if op.grad_of is not None else None
        view.inputs = [self._ref(r) for r in g.inputs]
        view.outputs = [self._ref(r) for r in g.outputs] if self.phase != "backward" else []
        for call in view.calls:
            if self.phase != "backward":
                call.inputs = tuple(self._ref(r) for r in call.inputs)
                call.outputs = tuple(self._ref(r) for r in call.outputs)
        view.constants, view.saved, view.notes, view.error = g.constants, g.saved, g.notes, g.error
        view.timed = g.timed
        view.complete = g.complete
        return view

    def _fill(self, call: Call, kids: dict[Call, list[Child | _Group]]) -> None:
        """Copy ``call``'s children in view order: ops numbered as they are met, sub-calls recursively."""
        self._place(self.copy[call], kids.get(call, []), kids)

    def _place(self, new: Call, items: list[Child | _Group], kids: dict[Call, list[Child | _Group]]) -> None:
        for child in items:
            if isinstance(child, Call):
                sub = self.copy[child] = _clone(child, new, self.phase)
                self.view.original[sub] = child
                new.children.append(sub)
                self._fill(child, kids)
            elif isinstance(child, _Group):
                box = new_call(child.path, child.type, 0, new)
                self.view.groups.add(box)
                new.children.append(box)
                self._place(box, child.children, kids)  # type: ignore[arg-type]
            else:
                op = replace(child, index=len(self.view.ops), call=new, _users=())
                op.origin = self.copy.get(child.origin) if child.origin is not None else None
                self.new_op[child] = op
                self.view.source_op[op] = child
                self.view.ops.append(op)
                new.children.append(op)
                new.ops.append(op)

    def _ref(self, ref: TensorRef) -> TensorRef:
        """The view's copy of ``ref``: its producer the view's op, or none when that op is not shown."""
        out = self.refs.get(id(ref))
        if out is None:
            producer = self.new_op.get(ref.producer) if ref.producer is not None else None
            out = self.refs[id(ref)] = replace(ref, producer=producer)
        return out

    def _arg(self, value: object) -> object:
        if isinstance(value, TensorRef):
            return self._ref(value)
        if isinstance(value, list):
            return [self._arg(v) for v in value]
        if isinstance(value, tuple):
            return tuple(self._arg(v) for v in value)
        return value


def _clone(call: Call, parent: Call | None, phase: PhaseView) -> Call:
    """A childless copy of ``call`` under ``parent`` (the view fills its children)."""
    new = new_call(call.path, call.type, call.index, parent)
    new.depth, new.repeat, new._module = call.depth, call.repeat, call._module
    new.params, new.self_params, new.source = call.params, call.self_params, call.source
    new.returned, new.arguments = call.returned, call.arguments
    new.inputs, new.outputs = (call.inputs, call.outputs) if phase != "backward" else ((), ())
    return new
