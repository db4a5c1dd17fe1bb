"""Diagram formats: images drawn by graphviz's ``dot`` (svg, pdf, png) and the DOT source itself."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import graphviz

from ..errors import DotFailedError, DotNotFoundError
from ._dot import DiagramOptions, draw
from ._estimate import check_layout_cost

if TYPE_CHECKING:
    from ..graph import Graph

INSTALL_HINT = (
    "install it with `apt-get install graphviz` (Debian/Ubuntu), `brew install graphviz` (macOS) "
    "or `conda install graphviz`; .dot, .txt and .json outputs work without it"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ImageOptions(DiagramOptions):
    """What an image drawn by ``dot`` takes: a diagram's options, and ``force`` to draw one ``dot`` would take
    over a minute to lay out (``render/_estimate.py``)."""

    force: bool = False


def dot_text(graph: Graph, o: DiagramOptions) -> bytes:
    """The DOT text of the diagram (``.dot``, ``.gv``; graphviz calls it ``Digraph.source``): no ``dot`` program needed."""
    return draw(graph, o).source.encode("utf-8")


def image(fmt: str) -> Callable[[Graph, ImageOptions], bytes]:
    """The writer of the diagram drawn by ``dot`` as ``fmt`` (``"svg"``, ``"pdf"``, ``"png"``)."""

    def drawn(graph: Graph, o: ImageOptions) -> bytes:
        return run_dot(draw(graph, o), fmt, what=f"the {fmt} diagram", force=o.force)

    drawn.__name__ = drawn.__qualname__ = f"draw_{fmt}"
    return drawn


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
