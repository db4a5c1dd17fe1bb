"""Diagram formats: images drawn by graphviz's ``dot`` (svg, pdf, png) and the DOT source itself."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import graphviz

from ..errors import DotFailedError, DotNotFoundError
from ..graph import AUTO_BUDGET
from ..views import Predicate
from ._dot import Layout, Rankdir, to_dot
from ._estimate import check_layout_cost

if TYPE_CHECKING:
    from ..graph import Depth, Graph, PhaseView

INSTALL_HINT = (
    "install it with `apt-get install graphviz` (Debian/Ubuntu), `brew install graphviz` (macOS) "
    "or `conda install graphviz`; .dot, .txt and .json outputs work without it"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class DiagramOptions:
    """What a diagram takes: ``Graph.to_dot``'s options, with the same meanings and defaults."""

    depth: Depth = "auto"
    predicate: Predicate | None = None
    fold: bool = True
    params: bool = False
    noise: bool = False
    rankdir: Rankdir = "TB"
    edge_labels: bool = True
    max_nodes: int = AUTO_BUDGET
    title: str | None = None
    source: bool = True
    layout: Layout = "auto"
    force: bool = False  # draw even when dot would take over a minute (``render.estimate``)
    phase: PhaseView = "forward"


def digraph(graph: Graph, o: DiagramOptions) -> graphviz.Digraph:
    """``to_dot(graph, ...)`` with these options."""
    return to_dot(graph, o.depth, predicate=o.predicate, fold=o.fold, params=o.params, noise=o.noise,
                  rankdir=o.rankdir, edge_labels=o.edge_labels, max_nodes=o.max_nodes, title=o.title,
                  source=o.source, layout=o.layout, phase=o.phase)


def source(graph: Graph, o: DiagramOptions) -> bytes:
    """The DOT source of the diagram (``.dot``, ``.gv``): no ``dot`` program needed."""
    return digraph(graph, o).source.encode("utf-8")


def image(fmt: str) -> Callable[[Graph, DiagramOptions], bytes]:
    """The writer of the diagram drawn by ``dot`` as ``fmt`` (``"svg"``, ``"pdf"``, ``"png"``)."""

    def draw(graph: Graph, o: DiagramOptions) -> bytes:
        return run_dot(digraph(graph, o), fmt, what=f"the {fmt} diagram", force=o.force)

    draw.__name__ = draw.__qualname__ = f"draw_{fmt}"
    return draw


def run_dot(dot: graphviz.Digraph, fmt: str, *, what: str = "the diagram", force: bool = False) -> bytes:
    """Lay out ``dot`` with graphviz's ``dot`` program and return the ``fmt`` bytes.

    A diagram ``dot`` would take more than ``estimate.MAX_LAYOUT_SECONDS`` to lay out is refused
    first (``DiagramTooLargeError``, with the estimate and what to do) unless ``force``.
    """
    check_layout_cost(dot, force=force)
    try:
        return dot.pipe(format=fmt)
    except graphviz.ExecutableNotFound as exc:
        raise DotNotFoundError(f"graphviz's `dot` program was not found, so {what} cannot be drawn; {INSTALL_HINT}") from exc
    except graphviz.CalledProcessError as exc:
        stderr = (exc.stderr or b"").decode(errors="replace").strip()
        raise DotFailedError(f"`dot` failed to draw {what} as {fmt}: {stderr or exc}; write a .dot file to inspect the source") from exc
