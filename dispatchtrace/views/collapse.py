"""The collapsed graph: module calls at one depth (or matching a predicate) as single nodes."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from ..graph import Call, Graph, Op
from ..shorten import shapes
from ..tensors import TensorRef
from .bundle import bundles
from .fold import Folding, Run, range_label, runs
from .fold import fold as fold_ops

NodeKind = Literal["input", "output", "call", "op", "tensor"]
Depth = int | None | Literal["ops", "auto"]
Predicate = Callable[[Call], bool]

AUTO_MAX_NODES = 150
"""``depth="auto"`` picks the deepest depth whose collapsed graph has at most this many nodes."""


@dataclass(frozen=True, slots=True, eq=False)
class Node:
    """One node of a collapsed graph.

    ``kind`` is ``"call"`` (a collapsed module call; ``calls`` holds every call folded into
    it, ``fold`` their number), ``"op"`` (one ATen op), ``"input"`` / ``"output"`` (a tensor
    entering or leaving the block) or ``"tensor"`` (a parameter, buffer or constant, shown
    on request). ``group`` is the id of the innermost expanded call around the node.
    """

    id: str
    kind: NodeKind
    name: str
    label: str
    call: Call | None = None
    op: Op | None = None
    ref: TensorRef | None = None
    fold: int = 1
    calls: tuple[Call, ...] = ()
    group: str | None = None
    outputs: tuple[TensorRef, ...] = ()

    def __repr__(self) -> str:
        return f"<Node {self.id} {self.kind} {self.label}>"


@dataclass(frozen=True, slots=True, eq=False)
class Edge:
    """Data flowing from ``src`` to ``dst``: the tensors ``dst`` read that ``src`` made or wrote."""

    src: Node
    dst: Node
    tensors: tuple[TensorRef, ...]

    def __repr__(self) -> str:
        return f"<Edge {self.src.name} -> {self.dst.name} {shapes([t.label for t in self.tensors])}>"


@dataclass(frozen=True, slots=True, eq=False)
class Group:
    """An expanded module call that encloses nodes (a cluster in diagrams)."""

    id: str
    call: Call
    label: str
    parent: str | None
    fold: int = 1
    calls: tuple[Call, ...] = ()

    def __repr__(self) -> str:
        return f"<Group {self.id} {self.label}>"


@dataclass(frozen=True, slots=True, eq=False)
class CollapsedGraph:
    """Nodes, edges and groups of a collapsed capture; ``depth`` is the depth used (``None``: ops)."""

    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    groups: tuple[Group, ...]
    depth: int | None

    def node(self, name: str) -> Node:
        """The node with this name (``"max_pool#0"``, ``"relu_1"``, ``"x"``, ``"output"``)."""
        for n in self.nodes:
            if n.name == name:
                return n
        names = ", ".join(n.name for n in self.nodes[:8])
        raise KeyError(f"no node named {name!r}; nodes are named like: {names}")

    def successors(self, node: Node) -> list[Node]:
        return [e.dst for e in self.edges if e.src is node]

    def predecessors(self, node: Node) -> list[Node]:
        return [e.src for e in self.edges if e.dst is node]

    def __len__(self) -> int:
        return len(self.nodes)

    def __repr__(self) -> str:
        depth = "ops" if self.depth is None else self.depth
        return f"<CollapsedGraph depth={depth}: {len(self.nodes)} nodes, {len(self.edges)} edges, {len(self.groups)} groups>"

    def __str__(self) -> str:
        lines = [f"{n.id} {n.kind} {n.label}" for n in self.nodes]
        for e in self.edges:
            lines.append(f"{e.src.name} -> {e.dst.name}  {shapes([t.label for t in e.tensors])}".rstrip())
        return "\n".join(lines)


def call_label(call: Call) -> str:
    """``layer1.0.relu#2 (ReLU)``; the model's own call is its type alone."""
    return f"{call.label} ({call.type})" if call.path else call.label


def fold_label(calls: tuple[Call, ...]) -> str:
    """``layers.0–11 (TransformerEncoderLayer) ×12``."""
    if len(calls) == 1:
        return call_label(calls[0])
    return f"{range_label(calls)} ({calls[0].type}) ×{len(calls)}"


def _is_leaf(call: Call) -> bool:
    return not any(isinstance(c, Call) for c in call.children)


_FLOWING = ("input", "activation")


def _is_dead(op: Op, outputs: set[tuple[int, int]]) -> bool:
    """Bookkeeping nothing reads: an unused ``aten::detach`` (autograd saving a tensor for
    backward), or an op that touches no activation, such as batch norm's scratch
    ``aten::empty`` or its ``num_batches_tracked.add_(1)``."""
    if op.users or any(r.kind in _FLOWING for r in op.mutated) or any((r.storage, r.version) in outputs for r in op.outputs):
        return False
    if op.target == "aten.detach.default":
        return True
    return not any(r.kind in _FLOWING for r in op.inputs)


def _check_depth(depth: object) -> None:
    if depth is None or depth in ("ops", "auto"):
        return
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 0:
        raise ValueError(
            f"depth must be a call depth >= 0 (the model's own call is 0, its children 1, ...), "
            f"None or 'ops' for every op, or 'auto'; got {depth!r}"
        )


def max_depth(graph: Graph) -> int:
    """Depth of the deepest module call (-1 when the capture saw no module call)."""
    return max((c.depth for c in graph.calls), default=-1)


def auto_depth(graph: Graph, *, max_nodes: int = AUTO_MAX_NODES, **options: object) -> int | None:
    """The depth ``"auto"`` draws, within ``max_nodes`` nodes and a width budget: ``views.auto.auto_depth``."""
    from .auto import auto_depth as pick

    return pick(graph, max_nodes=max_nodes, **options)


def collapse(
    graph: Graph,
    depth: Depth = None,
    *,
    predicate: Predicate | None = None,
    fold: bool = False,
    params: bool = False,
    dead: bool = False,
    bundle: bool = False,
) -> CollapsedGraph:
    """Collapse ``graph`` so that every module call at ``depth`` is one node.

    ``depth``: the model's call is 0, its children 1, ...; a leaf call (one that calls no
    other module) above that depth is one node too, as it has nothing but ops inside.
    ``None`` or ``"ops"`` keeps every op; ``"auto"`` picks the deepest depth with at most
    ``AUTO_MAX_NODES`` nodes and ``AUTO_MAX_WIDTH`` side by side (ops for a model without
    submodules; the rule is ``views.auto.auto_depth``'s).
    ``predicate``: also collapse every call it accepts (the outermost collapsed call wins).
    ``fold``: show a run of identical, chained sibling calls once, with their count.
    ``params``: show parameters, buffers and constants as nodes. ``dead``: show the
    bookkeeping ops nothing reads (unused ``aten::detach``, and ops that touch no
    activation: scratch allocations, ``num_batches_tracked`` counters), hidden by default.
    ``bundle``: draw the ops an expanded call issued between two of its sub-calls as one node
    (``5028 ops: aten::select ×1512, …``; ``views.bundle``); ``"auto"`` does so when no depth
    fits otherwise.

    >>> import torch, dispatchtrace as dt
    >>> net, x = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()), torch.ones(1, 4)
    >>> with dt.capture(net) as g:
    ...     _ = net(x)
    >>> print(collapse(g, 1))
    n0 input input
    n1 call 0 (Linear)
    n2 call 1 (ReLU)
    n3 output output
    input -> 0  f32[1, 4]
    0 -> 1  f32[1, 4]
    1 -> output  f32[1, 4]
    """
    _check_depth(depth)
    if depth == "auto":
        from .auto import choose

        depth, bundle = choose(graph, predicate=predicate, fold=fold, params=params, dead=dead)
    elif depth == "ops":
        depth = None
    return _Builder(graph, depth, predicate, fold, params, dead, bundle).build()  # type: ignore[arg-type]


Origin = Op | Call | None  # where a tensor comes from: an op, an empty call passing it on, or outside


class _Builder:
    """One collapse: decides each op's node, then maps op-level dependencies onto nodes."""

    def __init__(self, graph: Graph, depth: int | None, predicate: Predicate | None, fold: bool, params: bool, dead: bool,
                 bundle: bool = False) -> None:
        self.g = graph
        self.depth = depth
        self.params = params
        self.owner: dict[Call, Call | None] = {graph.root: None}
        for call in graph.calls:  # entry order: parents come first
            up = self.owner.get(call.parent) if call.parent is not None else None
            hit = (depth is not None and (call.depth == depth or (call.depth < depth and _is_leaf(call)))) or (
                predicate is not None and predicate(call)
            )
            self.owner[call] = up if up is not None else (call if hit else None)
        self.folding: Folding = fold_ops(runs(graph, lambda c: self.owner.get(c) is None) if fold else [])
        out_keys = {(r.storage, r.version) for r in graph.outputs}
        self.hidden = set() if dead else {op for op in graph.ops if _is_dead(op, out_keys)}
        self.bundles = bundles(graph, lambda c: self.owner.get(c) is None, self.hidden) if bundle else {}
        self.nodes: list[Node] = []
        self.by_key: dict[object, Node] = {}
        self.groups: dict[Call, Group] = {}
        self.edges: dict[tuple[str, str], list[TensorRef]] = {}

    # ---- nodes --------------------------------------------------------------------------------
    def _group(self, call: Call | None) -> str | None:
        """Group id for the expanded call ``call`` (None for the root), creating its chain."""
        if call is None or call.parent is None:
            return None
        group = self.groups.get(call)
        if group is None:
            parent = self._group(call.parent)
            run: Run | None = self.folding.run_of.get(call)
            calls = run.calls if run is not None else (call,)
            group = Group(f"g{len(self.groups)}", call, fold_label(calls), parent, len(calls), calls)
            self.groups[call] = group
        return group.id

    def _add(self, key: object, kind: NodeKind, name: str, label: str, **fields: object) -> Node:
        node = Node(f"n{len(self.nodes)}", kind, name, label, **fields)  # type: ignore[arg-type]
        self.nodes.append(node)
        self.by_key[key] = node
        return node

    def _call_node(self, call: Call) -> Node:
        call = self.folding.stand_in(call)  # type: ignore[assignment]
        node = self.by_key.get(call)
        if node is None:
            run = self.folding.run_of.get(call)
            calls = run.calls if run is not None else (call,)
            name = call.label if len(calls) == 1 else f"{call.label}×{len(calls)}"
            node = self._add(call, "call", name, fold_label(calls), call=call, fold=len(calls), calls=calls,
                             group=self._group(call.parent), outputs=calls[-1].outputs)
        return node

    def _op_node(self, op: Op) -> Node:
        op = self.folding.stand_in(op)  # type: ignore[assignment]
        owner = self.owner.get(op.call)
        if owner is not None:
            return self._call_node(owner)
        run = self.bundles.get(op)
        if run is not None:
            node = self.by_key.get(run)
            return node or self._add(run, "op", run.name, run.label, group=self._group(op.call))
        node = self.by_key.get(op)
        if node is None:
            node = self._add(op, "op", op.name, op.short, op=op, group=self._group(op.call), outputs=op.outputs)
        return node

    def _external(self, ref: TensorRef) -> Node | None:
        if ref.kind == "input":
            key: tuple[int, str] = (ref.storage, ref.name or "")
            kind: NodeKind = "input"
        elif self.params and ref.kind != "activation":
            key, kind = (ref.storage, ref.name or ""), "tensor"
        else:
            return None
        node = self.by_key.get(key)
        if node is None:
            name = ref.name or f"t{ref.id}"
            node = self._add(key, kind, name, name, ref=ref, outputs=(ref,))
        return node

    # ---- edges --------------------------------------------------------------------------------
    def _node_of(self, item: Origin, ref: TensorRef | None) -> Node | None:
        if isinstance(item, Call):
            return self._call_node(item)
        if isinstance(item, Op):
            return self._op_node(item)
        return self._external(ref) if ref is not None else None

    def _connect(self, src: Origin, dst: Op | Call | None, refs: list[TensorRef], dst_node: Node | None = None) -> None:
        """Edge from ``src`` (op, empty call, or None: the refs' external tensor) to ``dst``."""
        if src is not None and dst is not None and self.folding.apart(src, dst):
            return  # one repetition of a folded run feeding the next
        src_node = self._node_of(src, refs[0] if refs else None)
        dst_node = dst_node or self._node_of(dst, None)
        if src_node is None or dst_node is None or src_node is dst_node:
            return
        tensors = self.edges.setdefault((src_node.id, dst_node.id), [])
        canonical = all(x not in self.folding.canon for x in (src, dst) if x is not None)
        if tensors and not canonical:
            return  # later repetitions of a fold repeat the first one's tensors
        for r in refs:
            if all(r is not t for t in tensors):
                tensors.append(r)

    def _empty_calls(self) -> list[tuple[Call, tuple[int, int]]]:
        """Collapsed calls that ran no shown op (``Dropout`` in eval, ``Identity``, a call that
        failed early), with when they ran."""
        found: list[tuple[Call, tuple[int, int]]] = []
        seen = 0
        for child in self.g.root.walk():
            if isinstance(child, Op):
                seen += 1
            elif self.owner.get(child) is child and all(op in self.hidden for op in child.all_ops()):
                found.append((child, (seen, len(found))))
        return found

    def build(self) -> CollapsedGraph:
        g = self.g
        for ref in g.inputs:
            self._external(ref)
        empties = self._empty_calls()
        # an empty call passes tensors through: who reads them after it, reads them from it
        through: dict[tuple[int, int], list[tuple[tuple[int, int], Call]]] = {}
        for call, when in empties:
            for r in call.outputs:
                through.setdefault((r.storage, r.version), []).append((when, call))
        writer: dict[tuple[int, int], Op] = {}
        for op in g.ops:
            for m in op.mutated:
                writer[(m.storage, m.version)] = op
        end = 1 << 62

        def via(ref: TensorRef, at: tuple[int, int]) -> Call | None:
            entries = through.get((ref.storage, ref.version))
            if not entries:
                return None
            i = bisect_right([w for w, _ in entries], at)
            return entries[i - 1][1] if i else None

        def origin(ref: TensorRef, at: tuple[int, int]) -> Origin:
            return via(ref, at) or writer.get((ref.storage, ref.version)) or ref.producer

        def enter(call: Call, when: tuple[int, int]) -> None:
            self._call_node(call)
            for r in call.inputs:
                self._connect(origin(r, (when[0], when[1] - 1)), call, [r])

        pending = list(empties)
        for op in g.ops:
            while pending and pending[0][1][0] <= op.index:
                enter(*pending.pop(0))
            if op in self.hidden:
                continue
            self._op_node(op)
            at = (op.index, end)
            done: set[int] = set()
            for p in op.producers:
                written = {m.storage for m in p.mutated}
                refs = [r for r in op.inputs if r.producer is p or r.storage in written]
                rest = []
                for r in refs:
                    call = via(r, at)
                    if call is not None:
                        self._connect(call, op, [r])
                        done.add(id(r))
                    else:
                        rest.append(r)
                if rest or not refs:
                    self._connect(p, op, rest)
            covered = {m.storage for p in op.producers for m in p.mutated}
            for r in op.inputs:
                if r.producer is None and r.storage not in covered and id(r) not in done:
                    self._connect(via(r, at), op, [r])
        for item in pending:
            enter(*item)
        if g.outputs:
            out = self._add(("output",), "output", "output", "output", outputs=tuple(g.outputs))
            for r in g.outputs:
                self._connect(origin(r, (len(g.ops), end)), None, [r], out)
        by_id = {n.id: n for n in self.nodes}
        edges = [Edge(by_id[s], by_id[d], tuple(t)) for (s, d), t in self.edges.items()]
        edges.sort(key=lambda e: (int(e.src.id[1:]), int(e.dst.id[1:])))
        return CollapsedGraph(tuple(self.nodes), tuple(edges), tuple(self.groups.values()), self.depth)
