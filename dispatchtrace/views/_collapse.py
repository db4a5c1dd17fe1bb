"""The collapsed graph: module calls at one depth (or matching a predicate) as single nodes."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from .._text import shapes
from ..graph import Call, Graph, Op, TensorRef
from ._bundle import bundles
from ._fold import Folding, Run, foldable_runs
from ._fold import fold as fold_ops
from ._labels import fold_label
from ._noise import noise_ops

GraphNodeKind = Literal["input", "output", "call", "op", "tensor"]
Predicate = Callable[[Call], bool]
OpDepth = int | Literal["ops"]
"""A depth resolved to what a collapse uses: a call depth, or ``"ops"`` (nothing collapsed)."""

@dataclass(frozen=True, slots=True, eq=False)
class Node:
    """One node of a collapsed graph.

    ``kind`` is ``"call"`` (a collapsed module call; ``calls`` holds every call folded into
    it, ``fold`` their number), ``"op"`` (one ATen op), ``"input"`` / ``"output"`` (a tensor
    entering or leaving the block) or ``"tensor"`` (a parameter, buffer or constant, shown
    on request). ``group`` is the id of the innermost expanded call around the node.
    """

    id: str
    kind: GraphNodeKind
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
        return f"<Edge {self.src.name} -> {self.dst.name} {shapes([t.shape_text for t in self.tensors])}>"


@dataclass(frozen=True, slots=True, eq=False)
class Cluster:
    """An expanded module call that encloses nodes (a cluster in diagrams)."""

    id: str
    call: Call
    label: str
    parent: str | None
    fold: int = 1
    calls: tuple[Call, ...] = ()

    def __repr__(self) -> str:
        return f"<Cluster {self.id} {self.label}>"


@dataclass(frozen=True, slots=True, eq=False)
class CollapsedGraph:
    """Nodes, edges and clusters of a collapsed capture; ``depth`` is the depth used (an int, or ``"ops"``)."""

    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    clusters: tuple[Cluster, ...]
    depth: OpDepth

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
        return f"<CollapsedGraph depth={self.depth}: {len(self.nodes)} nodes, {len(self.edges)} edges, {len(self.clusters)} clusters>"

    def __str__(self) -> str:
        lines = [f"{n.id} {n.kind} {n.label}" for n in self.nodes]
        for e in self.edges:
            lines.append(f"{e.src.name} -> {e.dst.name}  {shapes([t.shape_text for t in e.tensors])}".rstrip())
        return "\n".join(lines)


def _is_leaf(call: Call) -> bool:
    return not any(isinstance(c, Call) for c in call.children)


def collapse_at(
    graph: Graph,
    depth: OpDepth = "ops",
    *,
    predicate: Predicate | None = None,
    fold: bool = False,
    params: bool = False,
    noise: bool = False,
    bundle: bool = False,
) -> CollapsedGraph:
    """Collapse ``graph`` so that every module call at call depth ``depth`` is one node (``views/_collapse.py``
    also takes ``"auto"`` and ``"all"``, and resolves them first: ``views/_depths.py``).

    A leaf call (one that calls no other module) above that depth is one node too, as it has
    nothing but ops inside; ``"ops"`` (the default) keeps every op.
    ``predicate``: also collapse every call it accepts (the outermost collapsed call wins).
    ``fold``: show a run of identical, chained sibling calls once, with their count.
    ``params``: show parameters, buffers and constants as nodes. ``noise``: show the
    bookkeeping ops nothing reads (see ``views/_noise.py``), hidden by default.
    ``bundle``: draw the ops an expanded call issued between two of its sub-calls as one node
    (``5028 ops: aten::select ×1512, …``; ``views/_bundle.py``); ``"auto"`` does so when no depth
    fits otherwise (``views/_auto.py``'s ``auto_depth``: a node budget and a width budget).

    >>> import torch, dispatchtrace as dt
    >>> net, x = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()), torch.ones(1, 4)
    >>> with dt.capture(net) as g:
    ...     _ = net(x)
    >>> print(collapse_at(g, 1))
    n0 input input
    n1 call 0 (Linear)
    n2 call 1 (ReLU)
    n3 output output
    input -> 0  f32[1, 4]
    0 -> 1  f32[1, 4]
    1 -> output  f32[1, 4]
    """
    if not isinstance(noise, bool):
        raise ValueError(f"noise must be True (show bookkeeping ops) or False (hide them), not {noise!r}")
    if depth != "ops" and (type(depth) is not int or depth < 0):
        raise ValueError(f"collapse_at takes a call depth >= 0 or 'ops', not {depth!r} (views.collapse resolves the others)")
    return _Collapser(graph, depth, predicate, fold, params, noise, bundle).build()


Origin = Op | Call | None  # where a tensor comes from: an op, an empty call passing it on, or outside
Key = tuple[int, int]  # (storage, version): one value of one tensor


class _Collapser:
    """One collapse: decides each op's node, then maps op-level dependencies onto nodes.

    Ops and the collapsed calls that ran no shown op (an ``Identity``, a ``Dropout`` in eval) lie
    on one timeline of ticks, in the order they ran: such an empty call passes its inputs on, so
    whoever reads them at a later tick reads them from it.
    """

    def __init__(self, graph: Graph, depth: OpDepth, predicate: Predicate | None, fold: bool, params: bool, noise: bool,
                 bundle: bool = False) -> None:
        self.g = graph
        self.depth = depth
        self.params = params
        level = None if depth == "ops" else depth
        self.owner: dict[Call, Call | None] = {graph.root: None}
        for call in graph.calls:  # entry order: parents come first
            up = self.owner.get(call.parent) if call.parent is not None else None
            hit = (level is not None and (call.depth == level or (call.depth < level and _is_leaf(call)))) or (
                predicate is not None and predicate(call)
            )
            self.owner[call] = up if up is not None else (call if hit else None)
        self.folding: Folding = fold_ops(foldable_runs(graph, lambda c: self.owner.get(c) is None) if fold else [])
        self.hidden = frozenset() if noise else noise_ops(graph)
        self.bundles = bundles(graph, lambda c: self.owner.get(c) is None, self.hidden) if bundle else {}
        self.nodes: list[Node] = []
        self.by_key: dict[object, Node] = {}
        self.groups: dict[Call, Cluster] = {}
        self.edges: dict[tuple[str, str], list[TensorRef]] = {}
        self.op_tick: list[int] = []  # by op index
        self.empties: list[tuple[Call, int]] = []  # empty collapsed calls with their tick
        self.through: dict[Key, list[tuple[int, Call]]] = {}  # tensors empty calls passed on, by tick
        self.writer: dict[Key, Op] = {}  # the op whose in-place write made each tensor version

    # ---- nodes --------------------------------------------------------------------------------
    def _group(self, call: Call | None) -> str | None:
        """Cluster id for the expanded call ``call`` (None for the root), creating its chain."""
        if call is None or call.parent is None:
            return None
        group = self.groups.get(call)
        if group is None:
            parent = self._group(call.parent)
            run: Run | None = self.folding.run_of.get(call)
            calls = run.calls if run is not None else (call,)
            group = Cluster(f"g{len(self.groups)}", call, fold_label(calls), parent, len(calls), calls)
            self.groups[call] = group
        return group.id

    def _add(self, key: object, kind: GraphNodeKind, name: str, label: str, **fields: object) -> Node:
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
            kind: GraphNodeKind = "input"
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

    # ---- the timeline -------------------------------------------------------------------------
    def _timeline(self) -> None:
        """Ticks for ops and empty collapsed calls, what each empty call passes on, who wrote what."""
        tick = 0
        for child in self.g.root.walk():
            if isinstance(child, Op):
                self.op_tick.append(tick)
            elif self.owner.get(child) is child and all(op in self.hidden for op in child.all_ops()):
                self.empties.append((child, tick))
                for r in child.outputs:
                    self.through.setdefault((r.storage, r.version), []).append((tick, child))
            else:
                continue
            tick += 1
        for op in self.g.ops:
            for m in op.mutated:
                self.writer[(m.storage, m.version)] = op

    def _via(self, ref: TensorRef, tick: int) -> Call | None:
        """The last empty call before ``tick`` that passed ``ref`` on, if any."""
        entries = self.through.get((ref.storage, ref.version))
        if not entries:
            return None
        i = bisect_left([t for t, _ in entries], tick)
        return entries[i - 1][1] if i else None

    def _origin(self, ref: TensorRef, tick: int) -> Origin:
        return self._via(ref, tick) or self.writer.get((ref.storage, ref.version)) or ref.producer

    # ---- building ------------------------------------------------------------------------------
    def build(self) -> CollapsedGraph:
        for ref in self.g.inputs:
            self._external(ref)
        self._timeline()
        pending = list(self.empties)
        for op in self.g.ops:
            tick = self.op_tick[op.index]
            while pending and pending[0][1] < tick:
                self._enter(*pending.pop(0))
            if op not in self.hidden:
                self._op_node(op)
                self._link_inputs(op, tick)
        for call, tick in pending:
            self._enter(call, tick)
        self._link_outputs()
        return self._result()

    def _enter(self, call: Call, tick: int) -> None:
        """An empty collapsed call: its node, and edges from where its inputs came from."""
        self._call_node(call)
        for r in call.inputs:
            self._connect(self._origin(r, tick), call, [r])

    def _link_inputs(self, op: Op, tick: int) -> None:
        """Edges into ``op``: from its producers (through any empty call that passed a tensor on),
        and from outside the block for the tensors no op made."""
        done: set[int] = set()
        for p in op.producers:
            written = {m.storage for m in p.mutated}
            refs = [r for r in op.inputs if r.producer is p or r.storage in written]
            rest = []
            for r in refs:
                call = self._via(r, tick)
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
                self._connect(self._via(r, tick), op, [r])

    def _link_outputs(self) -> None:
        """The ``output`` node, and edges from where each output of the block came from."""
        if not self.g.outputs:
            return
        out = self._add(("output",), "output", "output", "output", outputs=tuple(self.g.outputs))
        end = len(self.op_tick) + len(self.empties)  # after everything
        for r in self.g.outputs:
            self._connect(self._origin(r, end), None, [r], out)

    def _result(self) -> CollapsedGraph:
        by_id = {n.id: n for n in self.nodes}
        edges = [Edge(by_id[s], by_id[d], tuple(t)) for (s, d), t in self.edges.items()]
        edges.sort(key=lambda e: (int(e.src.id[1:]), int(e.dst.id[1:])))
        return CollapsedGraph(tuple(self.nodes), tuple(edges), tuple(self.groups.values()), self.depth)
