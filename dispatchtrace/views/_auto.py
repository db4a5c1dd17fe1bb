"""``depth="auto"``: the deepest depth whose diagram stays within a node budget and a width budget.

>>> import torch, dispatchtrace as dt
>>> attention, q = torch.nn.MultiheadAttention(8, 2, batch_first=True), torch.ones(1, 3, 8)
>>> with dt.capture(attention) as g:
...     _ = attention(q, q, q)
>>> auto_depth(g)  # one module with no submodules: its ops
'ops'
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..graph import AUTO_DIAGRAM_NODES, Call
from ._collapse import CollapsedGraph, OpDepth, Predicate, collapse_at
from ._layers import Layering, layering

if TYPE_CHECKING:
    from ..graph import Graph

AUTO_MAX_WIDTH = 12
"""``depth="auto"`` keeps at most this many nodes side by side on one rank (a longest-path layering)."""


def shape(cg: CollapsedGraph) -> Layering:
    """The layering of a collapsed graph: its ranks, widest rank and the edges' reach."""
    return layering([n.id for n in cg.nodes], [(e.src.id, e.dst.id) for e in cg.edges])


def fits(cg: CollapsedGraph, *, max_nodes: int, max_width: int = AUTO_MAX_WIDTH) -> bool:
    """Whether ``cg`` has at most ``max_nodes`` nodes and at most ``max_width`` on its widest rank."""
    return len(cg.nodes) <= max_nodes and shape(cg).width <= max_width


def auto_depth(graph: Graph, *, max_nodes: int | None = None, max_width: int = AUTO_MAX_WIDTH,
               predicate: Predicate | None = None, fold: bool = False, params: bool = False,
               noise: bool = False) -> OpDepth:
    """The depth ``depth="auto"`` draws: ``"ops"`` (every op) or a call depth (``choose`` says
    whether it bundles ops too).

    The rule, in order:

    1. A capture with no module call, or whose module calls have no submodules (a function,
       one attention block, one ``nn.Linear``), shows its ops (``"ops"``): a box per module
       would say nothing.
    2. Otherwise the deepest call depth ``d >= 1`` whose collapsed graph (with ``options``:
       ``fold``, ``params``, ``noise``) has at most ``max_nodes`` nodes (``AUTO_DIAGRAM_NODES``, 150)
       and at most ``max_width`` nodes side by side (``AUTO_MAX_WIDTH``, 12): width is the
       largest rank of a longest-path layering (``views/_layers.py``), the rank ``dot`` puts a
       node on, so a graph of 5,000 independent ops is refused however few ranks it has.
    3. Otherwise the same with bundles (``collapse(bundle=True)``, ``views/_bundle.py``): the ops
       an expanded call ran between two of its sub-calls as one node. Mask R-CNN's 5,000
       post-processing ops in the model's own ``forward`` become one node and its parts show.
    4. When no depth fits even so, depth 0: the model as one box (its inputs and outputs).
    """
    return choose(graph, max_nodes=max_nodes, max_width=max_width, predicate=predicate, fold=fold, params=params,
                  noise=noise)[0]


def choose(graph: Graph, *, max_nodes: int | None = None, max_width: int = AUTO_MAX_WIDTH,
           predicate: Predicate | None = None, fold: bool = False, params: bool = False,
           noise: bool = False) -> tuple[OpDepth, bool]:
    """``(depth, bundle)`` for ``depth="auto"``, by the rule of ``auto_depth``."""
    budget = AUTO_DIAGRAM_NODES if max_nodes is None else max_nodes
    deepest = max_depth(graph)
    if deepest < 0 or all(_leaf(c) for c in graph.calls):
        return "ops", False
    for bundle in (False, True):
        for depth in range(deepest, 0, -1):
            cg = collapse_at(graph, depth, predicate=predicate, fold=fold, params=params, noise=noise, bundle=bundle)
            if fits(cg, max_nodes=budget, max_width=max_width):
                return depth, bundle
    return 0, False


def max_depth(graph: Graph) -> int:
    """Depth of the deepest module call (-1 when the capture saw no module call)."""
    return max((c.depth for c in graph.calls), default=-1)


def _leaf(call: Any) -> bool:
    return not any(isinstance(c, Call) for c in call.children)
