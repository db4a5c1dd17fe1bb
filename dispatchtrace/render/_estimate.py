"""How long ``dot`` will take to lay out a diagram, estimated from its size, and the refusal above a limit."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import DiagramTooLargeError
from ..views import layering

if TYPE_CHECKING:
    import graphviz

    from ..views import CollapsedGraph

# seconds ~ A * edges**P * span**Q, span = the edges' lengths in ranks added up (views.layers: the
# virtual nodes dot adds for long edges, DenseNet's concatenations make many). Least squares on log
# seconds over the runs of `benchmarks/dot_cost.py` that took 0.2 s or more (table in docs/benchmarks.md,
# "How long dot takes"): graphviz 2.43, the fast layout to_dot picks above 300 edges; within 2x of
# every measured run, from 0.2 s (encoder 24 layers) to 178 s (encoder 384 layers, 18,433 edges).
A = 1.8e-9
P = 1.34
Q = 1.16

MAX_LAYOUT_SECONDS = 60.0
"""Diagrams whose estimated ``dot`` time is above this are refused unless forced (``force=True``)."""


def estimate_seconds(*, edges: int, span: int) -> float:
    """Estimated wall time of ``dot -Tsvg`` on a diagram with ``edges`` edges whose lengths in ranks
    add up to ``span`` (see the constants' comment).

    >>> round(estimate_seconds(edges=968, span=27820), 1)  # DenseNet-121's ops: 2.1 s measured
    2.6
    """
    if edges <= 0:
        return 0.0
    return A * edges**P * max(span, 1) ** Q


def layout_seconds(diagram: CollapsedGraph | graphviz.Digraph) -> float:
    """``estimate_seconds`` of a collapsed graph, or of a ``graphviz.Digraph`` from its source lines."""
    size = _size(diagram)
    return estimate_seconds(edges=size.edges, span=size.span)


_EDGE = re.compile(r"^\s*(\w+) -> (\w+)")
_NODE = re.compile(r"^\s*(\w+) \[")
_CLUSTER = re.compile(r"^\s*subgraph cluster")


@dataclass(frozen=True, slots=True)
class Size:
    """What the estimate reads: ``nodes``, ``edges``, ``clusters`` and ``span`` (``views/_layers.py``)."""

    nodes: int
    edges: int
    clusters: int
    span: int


def _size(diagram: CollapsedGraph | graphviz.Digraph) -> Size:
    if hasattr(diagram, "nodes") and hasattr(diagram, "clusters"):
        cg: Any = diagram
        ids = [n.id for n in cg.nodes]
        pairs = [(e.src.id, e.dst.id) for e in cg.edges]
        clusters = len(cg.clusters)
    else:  # DOT source: node ids n0, n1, ... are in execution order (to_dot), others by first mention
        ids, pairs, clusters, seen = [], [], 0, set()
        for line in diagram.body:  # type: ignore[union-attr]
            edge, node = _EDGE.match(line), _NODE.match(line)
            names = edge.groups() if edge else (node.group(1),) if node else ()
            if edge:
                pairs.append((edge.group(1), edge.group(2)))
            elif _CLUSTER.match(line):
                clusters += 1
            for name in names:
                if name not in seen and name not in ("graph", "node", "edge", "subgraph"):
                    seen.add(name)
                    ids.append(name)
        ids.sort(key=lambda n: (0, int(n[1:])) if n[:1] == "n" and n[1:].isdigit() else (1, 0))
    return Size(len(ids), len(pairs), clusters, layering(ids, pairs).span)


def check_layout_cost(diagram: CollapsedGraph | graphviz.Digraph, *, force: bool = False,
                      limit: float = MAX_LAYOUT_SECONDS) -> float:
    """The estimated ``dot`` time of ``diagram``; raises ``DiagramTooLargeError`` above ``limit`` unless ``force``.

    >>> import graphviz
    >>> dense = graphviz.Digraph()  # every node feeds every later one, as in a DenseNet block
    >>> for j in range(150):
    ...     for i in range(j):
    ...         dense.edge(f"n{i}", f"n{j}")
    >>> check_layout_cost(dense)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dispatchtrace.errors.DiagramTooLargeError: dot would take about ... s to lay out this diagram (150 nodes, 11175 edges, 0 clusters; the limit is 60 s); draw a smaller depth (depth=2, --depth 2), fold=True, or write the .txt tree; force=True draws it anyway
    >>> check_layout_cost(dense, force=True) > 60
    True
    """
    size = _size(diagram)
    seconds = estimate_seconds(edges=size.edges, span=size.span)
    if seconds > limit and not force:
        raise DiagramTooLargeError(
            f"dot would take about {seconds:.0f} s to lay out this diagram ({size.nodes} nodes, {size.edges} edges, "
            f"{size.clusters} clusters; the limit is {limit:.0f} s); draw a smaller depth (depth=2, --depth 2), "
            "fold=True, or write the .txt tree; force=True draws it anyway",
            seconds,
        )
    return seconds
