"""Nested tree of module calls and ops, with parallel branches found in the data flow."""

from __future__ import annotations

import html
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .._text import shapes
from ..graph import AUTO_TREE_LINES, Call, Child, Depth, Graph, Op, PhaseView, TensorRef, check_depth
from ._branches import Par, Series, Tangle, decompose
from ._flow import Flow, dataflow
from ._labels import call_label
from ._noise import OutputKeys, is_noise, output_keys
from ._phases import phase_graph
from ._query import resolve
from ._statements import Statements, key, label, owner, statement_runs, where
from ._tree_metrics import Numbers, chosen, numbers

TreeNodeKind = Literal["call", "op", "parallel", "branch", "skip", "statement"]


@dataclass(frozen=True, slots=True, eq=False)
class TreeNode:
    """One line of the tree: a call, an op, a block of parallel branches, a branch, a skip path or a statement.

    ``source`` is the statement's ``Source`` for ``statement`` nodes and for branches labelled by
    one statement (``statements=True``); ``where`` is then ``models.py:30``.
    """

    kind: TreeNodeKind
    text: str
    shape: str = ""
    note: str = ""
    children: tuple[TreeNode, ...] = ()
    call: Call | None = None
    op: Op | None = None
    where: str = ""
    source: Any = None
    numbers: str = ""

    @property
    def line(self) -> str:
        """``max_pool#2 (MaxPool2d)  f32[1, 32, 8, 8]`` plus a note such as ``joins 2 branches`` (and the metrics
        asked for: ``Time: 1.2 ms``)."""
        return "  ".join(p for p in (self.text, self.shape, self.numbers, self.where, self.note and f"({self.note})") if p)

    def walk(self) -> Iterator[TreeNode]:
        """This node and every node below it, in printing order."""
        yield self
        for child in self.children:
            yield from child.walk()


class Tree:
    """What ``Graph.tree`` returns: ``str()`` draws it with box-drawing characters.

    >>> import torch, dispatchtrace as dt
    >>> lin, x = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()), torch.ones(1, 4)
    >>> with dt.capture(lin) as g:
    ...     _ = lin(x)
    >>> print(g.tree())
    Sequential  f32[1, 3]
    ├── 0 (Linear)  f32[1, 3]
    └── 1 (ReLU)  f32[1, 3]
    """

    __slots__ = ("root",)

    def __init__(self, root: TreeNode) -> None:
        self.root = root

    def lines(self) -> list[str]:
        out = [self.root.line]
        _draw(self.root, "", out)
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def __repr__(self) -> str:
        n = sum(1 for _ in self.root.walk())
        return f"<dispatchtrace.Tree {self.root.text!r}, {n} lines>"

    def walk(self) -> Iterator[TreeNode]:
        return self.root.walk()

    def _repr_html_(self) -> str:
        return f"<pre style=\"line-height: 1.2\">{html.escape(str(self))}</pre>"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(str(self))


def _draw(node: TreeNode, prefix: str, out: list[str]) -> None:
    last = len(node.children) - 1
    for i, child in enumerate(node.children):
        out.append(prefix + ("└── " if i == last else "├── ") + child.line)
        _draw(child, prefix + ("    " if i == last else "│   "), out)


def tree(graph: Graph, depth: Depth = "all", *, ops: bool = False, noise: bool = False,
         at: str | Call | None = None, statements: bool = False, phase: PhaseView = "forward",
         metrics: str | Sequence[str] = ()) -> Tree:
    """The calls of ``graph`` as a tree, opened down to ``depth`` (see ``graph/_depth.py``).

    ``depth`` counts from the model's call (0), or from the ``at=`` call when given; ``"auto"``
    keeps the tree within ``AUTO_TREE_LINES`` lines. Inside each call shown open, its sub-calls and
    its own ops are laid out along the data flow: independent paths that later join become
    sibling ``branch`` nodes, and the node that
    reads them is marked ``joins N branches`` (rules: docs/semantics.md). The smallest
    stretch where the flow is not series-parallel (DenseNet's concatenations) stays in call order,
    each node saying what it reads (``<- input, denselayer1``; ops are then named,
    ``aten::cat %cat_6``). A call with only ops inside is shown open only with ``ops=True`` (or
    ``depth="ops"``), which also lists the ops of the calls shown closed; a capture whose module
    calls have no submodules (one attention block) lists its ops at ``"all"`` and ``"auto"``. ``noise=True`` keeps the
    bookkeeping ops nothing reads (see ``views/_noise.py``). ``at`` (a call, or a label as
    ``Call.label`` spells it: ``"layer1.0"``, ``"layer1.0.relu#2"``; see ``query.resolve``) starts
    the tree there. ``statements=True`` groups consecutive items of one call (sub-calls, ops,
    whole parallel blocks) issued by one source line under a ``statement`` node labelled with
    that line (``x = (main_path + parallel_path) / 2  models.py:32``); a branch that is one
    statement is labelled by it. A sub-call whose own ``forward`` is user code has no known
    statement and stays alone (see ``views/_statements.py``). ``phase`` shows a training step's
    forward, backward (each op under the forward call it belongs to) or both, ops outside the
    forward then marked ``[backward]`` (see ``views/_phases.py``). ``metrics`` names metrics of the registry
    (``"time"``, ``"est_time"``, ``"flops"``: ``dt.views.metrics(g)`` lists those that apply) to write on each
    call's line, and on each op's line where the metric has an op computation (``views/_tree_metrics.py``).

    >>> import torch, dispatchtrace as dt
    >>> class Net(torch.nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.lin = torch.nn.Linear(4, 3)
    ...     def forward(self, x):
    ...         y = torch.relu(self.lin(x))
    ...         return y * 2
    >>> net, x = Net(), torch.ones(1, 4)
    >>> with dt.capture(net) as g:
    ...     _ = net(x)
    >>> print(g.tree(statements=True))  # doctest: +ELLIPSIS
    Net  f32[1, 3]
    ├── y = torch.relu(self.lin(x))  <doctest ...>:6
    │   ├── lin (Linear)  f32[1, 3]
    │   └── aten::relu  f32[1, 3]
    └── aten::mul  f32[1, 3]
    """
    check_depth(depth)
    if not isinstance(noise, bool):
        raise ValueError(f"noise must be True (show bookkeeping ops) or False (hide them), not {noise!r}")
    picked = chosen(graph, metrics)
    graph = phase_graph(graph, phase)
    root = _root(graph) if at is None else resolve(graph, at)
    written = numbers(graph, picked)
    stmts = Statements() if statements else None
    outputs = output_keys(graph)

    leaf = at is None and depth in ("all", "auto") and root.parent is not None and all(_leaf_call(c) for c in graph.calls)

    def build(levels: int | None) -> Tree:
        limit = None if levels is None else max(root.depth, 0) + levels
        return Tree(_TreeBuilder(limit, ops or depth == "ops" or leaf, noise, outputs, stmts, written).call(root))

    if depth == "auto":
        deepest = max((c.depth for c in root.walk() if isinstance(c, Call)), default=max(root.depth, 0))
        for levels in range(deepest - max(root.depth, 0), 0, -1):
            shown = build(levels)
            if len(shown.lines()) <= AUTO_TREE_LINES:
                return shown
        return build(0)
    return build(None if depth in ("all", "ops") else depth)  # type: ignore[arg-type]


def _root(graph: Graph) -> Call:
    """The model's call when the block made just that one call, else the capture's own root."""
    calls = [c for c in graph.root.children if isinstance(c, Call)]
    return calls[0] if len(calls) == 1 and len(graph.root.children) == 1 else graph.root


def _leaf_call(call: Call) -> bool:
    return not any(isinstance(c, Call) for c in call.children)


class _TreeBuilder:
    """One tree: which calls are open, which ops are shown, and the nodes for them."""

    def __init__(self, depth: int | None, ops: bool, noise: bool, outputs: OutputKeys, stmts: Statements | None,
                 numbers: Numbers) -> None:
        self.depth, self.ops, self.noise, self.outputs, self.stmts = depth, ops, noise, outputs, stmts
        self.numbers = numbers

    def keep(self, op: Op) -> bool:
        return self.noise or not is_noise(op, self.outputs)

    def call(self, call: Call, note: str = "") -> TreeNode:
        open_ = call.parent is None or (
            (self.depth is None or call.depth < self.depth)
            and (self.ops or any(isinstance(c, Call) for c in call.children))
        )
        if open_:
            children = self.inside(call)
        elif self.ops:
            children = self.flat(call)
        else:
            children = ()
        return TreeNode("call", call_label(call), _shapes(call.outputs), note, children, call=call,
                        numbers=self.numbers(call))

    def flat(self, call: Call) -> tuple[TreeNode, ...]:
        """The ops of a closed call in order; with statements, grouped by line and the call whose code has it."""
        ops_ = [o for o in call.all_ops() if self.keep(o)]
        nodes = [self.op(o) for o in ops_]
        if self.stmts is None:
            return tuple(nodes)
        mine = key(self.stmts.site(call))
        srcs = [o.source if key(o.source) != mine else None for o in ops_]
        keys = [None if s is None else (key(s), id(owner(o, s.function, call) or call)) for o, s in zip(ops_, srcs, strict=True)]
        return statement_nodes([[n] for n in nodes], srcs, keys, [1] * len(nodes))

    def op(self, op: Op, note: str = "", named: bool = False) -> TreeNode:
        text = f"{op.short} %{op.name}" if named else op.short
        if op.phase != "forward":
            text += f" [{op.phase}]"
        return TreeNode("op", text, _shapes(op.outputs), note, op=op, numbers=self.numbers(op))

    def node(self, child: Child, note: str = "", named: bool = False) -> TreeNode:
        return self.call(child, note) if isinstance(child, Call) else self.op(child, note, named)

    def inside(self, call: Call) -> tuple[TreeNode, ...]:
        kids: list[Child] = [c for c in call.children if isinstance(c, Call) or self.keep(c)]
        flow = dataflow(call, kids, keep=self.keep)
        series = decompose(len(kids), flow.edges, entry=flow.entry, exit=flow.exit)
        return _Layout(self, call, kids, flow, named=_tangled(series)).series(series)


class _Layout:
    """Turns one call's decomposition into tree nodes."""

    def __init__(self, builder: _TreeBuilder, call: Call, kids: list[Child], flow: Flow, *, named: bool) -> None:
        self.builder, self.call, self.kids, self.flow, self.named = builder, call, kids, flow, named
        self.preds: dict[int, list[int]] = {}
        self.stmt_cache: dict[int, Any] = {}
        for a, b in sorted(flow.edges):
            self.preds.setdefault(b, []).append(a)

    def series(self, series: Series, outer: Any = None) -> tuple[TreeNode, ...]:
        units: list[list[TreeNode]] = []
        srcs: list[Any] = []
        sizes: list[int] = []
        loose: list[bool] = []
        join, joined = 0, frozenset[int]()  # the last block's width and nodes, until a node reads from it
        for item in series:
            if isinstance(item, Par):
                common = self.common((item,))
                units.append([self.par(item, common or outer)])
                srcs.append(common)
                sizes.append(_size(item))
                loose.append(False)
                join, joined = item.width, frozenset(_nodes(item))
                continue
            if isinstance(item, Tangle):
                join = 0
                for i in item.nodes:
                    units.append([self.builder.node(self.kids[i], self.reads(i), named=True)])
                    srcs.append(None)
                    sizes.append(1)
                    loose.append(False)
            else:
                # the join is the node that reads from the block, not a weight or constant op placed before it
                joins = join and any(p in joined for p in self.preds.get(item, ()))
                units.append([self.builder.node(self.kids[item], f"joins {join} branches" if joins else "", self.named)])
                srcs.append(self.stmt(item))
                sizes.append(1)
                kid = self.kids[item]
                loose.append(isinstance(kid, Call) and srcs[-1] is None and next(kid.all_ops(), None) is None)
                if joins:
                    join = 0
        if self.builder.stmts is None:
            return tuple(n for u in units for n in u)
        return statement_nodes(units, srcs, [key(s) for s in srcs], sizes, key(outer), loose)

    def stmt(self, i: int) -> Any:
        """The statement of child ``i``, or ``None`` (always ``None`` without ``statements=True``)."""
        stmts = self.builder.stmts
        if stmts is None:
            return None
        if i not in self.stmt_cache:
            self.stmt_cache[i] = stmts.of(self.kids[i], self.call)
        return self.stmt_cache[i]

    def common(self, series: Series) -> Any:
        """The one statement every item of ``series`` belongs to, or ``None``."""
        if self.builder.stmts is None:
            return None
        found = None
        for item in series:
            if isinstance(item, Tangle):
                return None
            subs = [self.common(b) for b in item.branches] if isinstance(item, Par) else [self.stmt(item)]
            for s in subs:
                if s is None or (found is not None and key(s) != key(found)):
                    return None
                found = s
        return found

    def par(self, par: Par, outer: Any = None) -> TreeNode:
        branches = []
        for i, b in enumerate(par.branches):
            nodes = self.series(b, outer)
            if len(nodes) == 1 and nodes[0].kind == "statement":  # a branch that is one statement is named by it
                one = nodes[0]
                branches.append(TreeNode("branch", one.text, children=one.children, where=one.where, source=one.source))
            else:
                branches.append(TreeNode("branch", f"branch {i + 1}", children=nodes))
        if par.skip:
            branches.append(TreeNode("skip", f"branch {len(branches) + 1}: skip (no ops on this path)"))
        return TreeNode("parallel", f"{par.width} parallel branches", children=tuple(branches))

    def reads(self, i: int) -> str:
        """``<- input, conv0, %add_1``: what a node outside the branch structure reads."""
        names = ["input"] if i in self.flow.outside else []
        names += [_ref_name(self.kids[a], self.call) for a in self.preds.get(i, [])]
        return "<- " + ", ".join(names) if names else ""


def statement_nodes(units: list[list[TreeNode]], srcs: list[Any], keys: list[Any], sizes: list[int],
                    outer: Any = None, loose: list[bool] | None = None) -> tuple[TreeNode, ...]:
    """``units`` in order, runs of one statement (``keys``) with 2 items or more under a ``statement`` node."""
    out: list[TreeNode] = []
    for grouped, span in statement_runs(keys, sizes, outer, loose):
        nodes = tuple(n for p in span for n in units[p])
        if grouped:
            src = srcs[span.start]
            out.append(TreeNode("statement", label(src), children=nodes, where=where(src), source=src))
        else:
            out.extend(nodes)
    return tuple(out)


def _size(item: Par) -> int:
    """How many nodes a parallel block holds."""
    return sum(_size(i) if isinstance(i, Par) else len(i.nodes) if isinstance(i, Tangle) else 1
               for b in item.branches for i in b)


def _nodes(item: Par) -> Iterator[int]:
    """Every node inside a parallel block."""
    for b in item.branches:
        for i in b:
            if isinstance(i, Par):
                yield from _nodes(i)
            elif isinstance(i, Tangle):
                yield from i.nodes
            else:
                yield i


def _tangled(series: Series) -> bool:
    """Whether any stretch is listed with reads (then ops are named, so reads can point at them)."""
    return any(isinstance(i, Tangle) or (isinstance(i, Par) and any(_tangled(b) for b in i.branches)) for i in series)


def _ref_name(kid: Child, parent: Call) -> str:
    if isinstance(kid, Op):
        return f"%{kid.name}"
    prefix = parent.path + "." if parent.path else ""
    name = kid.path[len(prefix):] if prefix and kid.path.startswith(prefix) else kid.path or kid.type
    return f"{name}#{kid.index}" if kid.repeat > 1 else name


def _shapes(refs: tuple[TensorRef, ...]) -> str:
    return shapes([r.shape_text for r in refs])
