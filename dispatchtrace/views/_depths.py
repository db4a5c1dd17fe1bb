"""What a depth means for one graph (``"auto"`` by ``views/_auto.py``'s rule, ``"all"`` the deepest call,
``N``, ``"ops"``), and ``collapse`` at any of them.

>>> import torch, dispatchtrace as dt
>>> net, x = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()), torch.ones(1, 4)
>>> with dt.capture(net) as g:
...     _ = net(x)
>>> resolve_depth(g, "all"), resolve_depth(g, "auto"), collapse(g, "all").depth
((1, False), (1, False), 1)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..graph import AUTO_DIAGRAM_NODES, Depth, check_depth
from ._auto import choose, max_depth
from ._collapse import CollapsedGraph, OpDepth, Predicate, collapse_at
from ._phases import phase_graph

if TYPE_CHECKING:
    from ..graph import Graph, PhaseView


def resolve_depth(graph: Graph, depth: Depth, *, max_nodes: int = AUTO_DIAGRAM_NODES, predicate: Predicate | None = None,
                  fold: bool = False, params: bool = False, noise: bool = False) -> tuple[OpDepth, bool]:
    """``(call depth or "ops", bundle)``: what ``depth`` means for ``graph`` (see ``graph/_depth.py``);
    ``bundle`` says whether ``"auto"`` needed bundled ops to fit (``views/_auto.py``'s ``choose``)."""
    check_depth(depth)
    if depth == "auto":
        return choose(graph, max_nodes=max_nodes, predicate=predicate, fold=fold, params=params, noise=noise)
    if depth == "all":  # every call at the deepest depth and every leaf call above it is one node
        deepest = max_depth(graph)
        return (deepest if deepest >= 0 else "ops"), False
    return depth, False  # type: ignore[return-value]


def collapse(graph: Graph, depth: Depth = "ops", *, predicate: Predicate | None = None, fold: bool = False,
             params: bool = False, noise: bool = False, bundle: bool = False,
             phase: PhaseView | None = None) -> CollapsedGraph:
    """Collapse ``graph`` so that every module call at ``depth`` is one node (``collapse_at``'s options); of its
    ``phase`` (``views/_phases.py``) when given, else of ``graph`` as it is."""
    if phase is not None:
        graph = phase_graph(graph, phase)
    if not isinstance(noise, bool):
        raise ValueError(f"noise must be True (show bookkeeping ops) or False (hide them), not {noise!r}")
    used, needs_bundle = resolve_depth(graph, depth, predicate=predicate, fold=fold, params=params, noise=noise)
    return collapse_at(graph, used, predicate=predicate, fold=fold, params=params, noise=noise,
                       bundle=bundle or needs_bundle)
