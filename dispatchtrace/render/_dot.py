"""DOT diagrams: a collapsed graph as a ``graphviz.Digraph``, clusters for expanded calls."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import graphviz

from .._text import shapes
from ..graph import AUTO_DIAGRAM_NODES, Depth
from ..views import (
    Cluster,
    CollapsedGraph,
    Edge,
    Node,
    Predicate,
    attributes,
    attributes_text,
    collapse,
    phase_graph,
    resolve_depth,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ..graph import Graph, PhaseView
    from ._options import DotOptions

Rankdir = Literal["TB", "LR"]
Layout = Literal["auto", "quality", "fast"]
OptionsT = TypeVar("OptionsT")

FAST_EDGES = 300
"""``layout="auto"`` switches to the fast layout above this many edges."""
FAST_GRAPH_ATTR = {"nslimit": "0.2", "nslimit1": "0.2", "mclimit": "0.2"}
"""Fewer network-simplex and crossing-minimisation passes: dense graphs lay out in seconds."""

GRAPH_ATTR = {
    "fontname": "Helvetica",
    "fontsize": "10",
    "nodesep": "0.2",
    "ranksep": "0.3",
    "newrank": "true",
}
NODE_ATTR = {"fontname": "Helvetica", "fontsize": "10", "height": "0.3", "margin": "0.08,0.03"}
EDGE_ATTR = {"fontname": "Helvetica", "fontsize": "8", "arrowsize": "0.6", "color": "#555555", "fontcolor": "#555555"}

STYLE: dict[str, dict[str, str]] = {
    "call": {"shape": "box", "style": "rounded,filled", "fillcolor": "#dae8fc", "color": "#6c8ebf"},
    "fold": {"shape": "box", "style": "rounded,filled", "fillcolor": "#d5e8d4", "color": "#82b366", "peripheries": "2"},
    "op": {"shape": "box", "style": "filled", "fillcolor": "#f5f5f5", "color": "#999999", "fontsize": "9"},
    "input": {"shape": "oval", "style": "filled", "fillcolor": "#fff2cc", "color": "#d6b656"},
    "output": {"shape": "oval", "style": "filled", "fillcolor": "#fff2cc", "color": "#d6b656"},
    "tensor": {"shape": "note", "style": "filled", "fillcolor": "#eeeeee", "color": "#aaaaaa", "fontsize": "8"},
}
PHASE_FILL = {"backward": "#f8cecc", "recompute": "#ffe6cc", "optimizer": "#e1d5e7"}
"""Fill of an op node that ran outside the forward, by ``op.phase``."""
CLUSTER = {"style": "rounded,dashed", "color": "#888888", "fontsize": "10", "labeljust": "l"}
FOLD_CLUSTER = {"style": "rounded,filled", "fillcolor": "#f0f7ee", "color": "#82b366", "penwidth": "2", "fontsize": "10", "labeljust": "l"}


def text(*lines: str) -> graphviz.quoting.NoHtml:
    """A DOT string of several lines, backslashes and ``<...>`` taken literally.

    >>> print(text("aten::add", "f32[2]"))
    aten::add\\nf32[2]
    """
    return graphviz.nohtml("\\n".join(line.replace("\\", "\\\\") for line in lines))


def edge_label(edge: Edge, *, limit: int = 2) -> str:
    """``f32[1, 64, 56, 56]``; several different tensors: the first ``limit`` and a count; more than
    ``limit`` tensors of one shape: ``100 × f32[3]``."""
    labels = list(dict.fromkeys(t.shape_text for t in edge.tensors))
    if len(labels) == 1 and len(edge.tensors) > limit:
        return f"{len(edge.tensors)} × {labels[0]}"
    if len(labels) > limit:
        return ", ".join(labels[:limit]) + f" +{len(labels) - limit}"
    return ", ".join(labels)


def _node_label(node: Node) -> graphviz.quoting.NoHtml:
    if node.kind in ("input", "tensor") and node.ref is not None:
        return text(node.label, node.ref.shape_text)
    if node.kind == "output":
        return text("output", *_capped(list(dict.fromkeys(r.shape_text for r in node.outputs))))
    return text(node.label)


def _tooltip(node: Node, source: bool) -> graphviz.quoting.NoHtml:
    if node.op is not None:
        lines = [str(node.op)]
        if source and node.op.source is not None:
            lines.append(str(node.op.source))
        return text(*lines)
    if node.call is not None:
        n_ops = sum(1 for _ in node.call.all_ops())
        ins = shapes([r.shape_text for r in node.call.inputs]) or "()"
        outs = shapes([r.shape_text for r in node.outputs]) or "()"
        count = f"{n_ops} op{'s' if n_ops != 1 else ''}" + (f" per call, {node.fold} calls" if node.fold > 1 else "")
        where = node.call.source if source else None
        attrs = attributes_text(attributes(node.call.module)) if node.call.module is not None else ""
        return text(node.label, f"{ins} -> {outs}", count, *([attrs] if attrs else []),
                    *([f"called at {where}"] if where is not None else []))
    refs = [f"{r.text}: {r.shape_text} ({r.kind})" for r in node.outputs]
    return text(*_capped(refs)) if refs else text(node.label)


def _capped(lines: list[str], limit: int = 8) -> list[str]:
    """At most ``limit`` lines of a label or tooltip, the rest counted: ``… +92``."""
    return lines if len(lines) <= limit else [*lines[:limit], f"… +{len(lines) - limit}"]


def _node_attrs(node: Node, source: bool) -> dict[str, object]:
    style = STYLE["fold" if node.fold > 1 else node.kind]
    if node.op is not None and node.op.phase in PHASE_FILL:
        style = {**style, "fillcolor": PHASE_FILL[node.op.phase]}
    return {"label": _node_label(node), "tooltip": _tooltip(node, source), **style}


def digraph(
    cg: CollapsedGraph,
    *,
    name: str = "dispatchtrace",
    rankdir: Rankdir = "TB",
    edge_labels: bool = True,
    title: str | None = None,
    source: bool = True,
    layout: Layout = "auto",
) -> graphviz.Digraph:
    """The ``graphviz.Digraph`` of a collapsed graph (no ``dot`` run: this is only source).

    ``layout="fast"`` (chosen by ``"auto"`` above ``FAST_EDGES`` edges) caps ``dot``'s
    optimisation passes and places edge labels after layout (``xlabel``), which keeps dense
    graphs (DenseNet) in seconds at some cost in neatness.
    """
    fast = layout == "fast" or (layout == "auto" and len(cg.edges) > FAST_EDGES)
    graph_attr = {**GRAPH_ATTR, "rankdir": rankdir, **(FAST_GRAPH_ATTR if fast else {})}
    dot = graphviz.Digraph(name, graph_attr=graph_attr, node_attr=NODE_ATTR, edge_attr=EDGE_ATTR)
    if title:
        dot.attr(label=text(title), labelloc="t", fontsize="12")
    order = {n.id: i for i, n in enumerate(cg.nodes)}
    members: dict[str | None, list[Node | Cluster]] = {}
    first: dict[str, int] = {}
    by_id = {g.id: g for g in cg.clusters}
    for node in cg.nodes:
        members.setdefault(node.group, []).append(node)
        gid = node.group
        while gid is not None and gid not in first:
            first[gid] = order[node.id]
            gid = by_id[gid].parent
    for group in cg.clusters:
        if group.id in first:
            members.setdefault(group.parent, []).append(group)

    def position(item: Node | Cluster) -> tuple[int, int]:
        return (order[item.id], 1) if isinstance(item, Node) else (first[item.id], 0)

    def emit(container: graphviz.Digraph, gid: str | None) -> None:
        for item in sorted(members.get(gid, []), key=position):
            if isinstance(item, Node):
                container.node(item.id, **_node_attrs(item, source))  # type: ignore[arg-type]
                continue
            with container.subgraph(name=f"cluster_{item.id}") as sub:
                attrs = FOLD_CLUSTER if item.fold > 1 else CLUSTER
                where = item.call.source if source else None
                tip = text(item.label, *([f"called at {where}"] if where is not None else []))
                sub.attr(label=text(item.label), tooltip=tip, **attrs)
                emit(sub, item.id)

    emit(dot, None)
    for edge in cg.edges:
        attrs: dict[str, object] = {}
        if edge.tensors:
            label = edge_label(edge)
            tips = [f"{t.text}: {t.shape_text}" for t in edge.tensors]
            attrs["tooltip"] = text(*_capped(tips))
            if edge_labels:
                attrs["xlabel" if fast else "label"] = text(label)
        dot.edge(edge.src.id, edge.dst.id, **attrs)  # type: ignore[arg-type]
    return dot


@dataclass(frozen=True, slots=True, kw_only=True)
class DiagramOptions:
    """What a diagram takes (``to_dot``, ``.dot``, and with ``ImageOptions``'s ``force`` the images): the one
    declaration of these options, their meanings in ``to_dot``'s docstring."""

    depth: Depth = "auto"
    predicate: Predicate | None = None
    fold: bool = True
    params: bool = False
    noise: bool = False
    rankdir: Rankdir = "TB"
    edge_labels: bool = True
    max_nodes: int = AUTO_DIAGRAM_NODES
    title: str | None = None
    source: bool = True
    layout: Layout = "auto"
    phase: PhaseView = "forward"


def options_of(kind: type[OptionsT], what: str, values: dict[str, Any]) -> OptionsT:
    """``kind(**values)``, with an option ``kind`` does not declare as a ``TypeError`` naming the ones it has.

    >>> options_of(DiagramOptions, "to_dot", {"rankdir": "LR"}).rankdir
    'LR'
    >>> options_of(DiagramOptions, "to_dot", {"rank_dir": "LR"})
    Traceback (most recent call last):
    ...
    TypeError: to_dot takes no option 'rank_dir'; its options: depth, predicate, fold, params, noise, rankdir, edge_labels, max_nodes, title, source, layout, phase
    """
    names = [f.name for f in dataclasses.fields(kind)]  # type: ignore[arg-type]
    unknown = [k for k in values if k not in names]
    if unknown:
        raise TypeError(f"{what} takes no option{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
                        f"its options: {', '.join(names) or 'none'}")
    return kind(**values)


def to_dot(graph: Graph | CollapsedGraph, depth: Depth = "auto", **options: Unpack[DotOptions]) -> graphviz.Digraph:
    """A diagram of ``graph`` collapsed at ``depth``, as a ``graphviz.Digraph``.

    ``depth`` as in ``graph/_depth.py`` (``"auto"``, the default: the deepest call depth whose
    diagram has at most ``max_nodes`` nodes and at most ``AUTO_MAX_WIDTH`` side by side, or every op
    for a model without submodules, bundling a call's loose ops into one node when nothing fits
    otherwise: ``views/_auto.py``'s ``auto_depth``; ``"ops"``: every op, inside a cluster per module call).
    A ``CollapsedGraph`` is drawn as it is, ``depth`` and the collapse options unused.
    ``fold`` shows runs of identical chained calls once with ``×N``; ``params`` shows
    parameters, buffers and constants; ``noise`` shows bookkeeping ops nothing reads (``views/_noise.py``);
    ``source`` adds each op's source line (``op.source``) to its tooltip; ``edge_labels``
    writes tensor shapes on edges (they are in the edge tooltips either way); ``layout``
    ``"fast"`` trades neatness for speed on dense graphs (``"auto"``: above 300 edges).
    ``phase`` draws a training step's forward, backward or both (``views/_phases.py``); ops that ran
    outside the forward are filled by phase (``PHASE_FILL``).

    >>> import torch, dispatchtrace as dt
    >>> lin, x = torch.nn.Linear(4, 2), torch.ones(1, 4)
    >>> with dt.capture(lin) as g:
    ...     _ = lin(x)
    >>> src = to_dot(g, "ops", source=False).source
    >>> [line.strip() for line in src.splitlines() if "->" in line][-1]
    'n2 -> n3 [label="f32[1, 2]" tooltip="%addmm: f32[1, 2]"]'
    >>> "subgraph cluster_g0" in src and 'label="aten::addmm"' in src
    True
    """
    return draw(graph, options_of(DiagramOptions, "to_dot", {"depth": depth, **options}))


def draw(graph: Graph | CollapsedGraph, o: DiagramOptions) -> graphviz.Digraph:
    """``to_dot`` with its options as one ``DiagramOptions``."""
    if isinstance(graph, CollapsedGraph):
        cg = graph
    else:

        graph = phase_graph(graph, o.phase)
        used, bundle = resolve_depth(graph, o.depth, max_nodes=o.max_nodes, predicate=o.predicate, fold=o.fold,
                                     params=o.params, noise=o.noise)
        cg = collapse(graph, used, predicate=o.predicate, fold=o.fold, params=o.params, noise=o.noise, bundle=bundle)
    return digraph(cg, rankdir=o.rankdir, edge_labels=o.edge_labels, title=o.title, source=o.source, layout=o.layout)
