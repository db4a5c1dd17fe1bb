"""Jupyter display: a graph shows its default-depth diagram as SVG, or text without ``dot``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .dot import to_dot
from .estimate import DiagramTooLargeError
from .files import DotFailedError, DotNotFoundError, run_dot

if TYPE_CHECKING:
    from ..graph import Graph


def mimebundle(graph: Graph, include: Iterable[str] | None = None, exclude: Iterable[str] | None = None, **options: Any) -> dict[str, str]:
    """``{"image/svg+xml": ..., "text/plain": ...}`` for ``_repr_mimebundle_``.

    The SVG is left out when ``dot`` is missing or fails, or the diagram is too large to lay out
    in reasonable time, so notebooks fall back to text.

    >>> import torch, dispatchtrace as dt
    >>> lin, x = torch.nn.Linear(4, 2), torch.ones(1, 4)
    >>> with dt.capture(lin) as g:
    ...     _ = lin(x)
    >>> sorted(mimebundle(g, include=["text/plain"]))
    ['text/plain']
    """
    wanted = set(include) if include is not None else None
    unwanted = set(exclude or ())
    bundle = {"text/plain": repr(graph)}
    if (wanted is None or "image/svg+xml" in wanted) and "image/svg+xml" not in unwanted:
        try:
            bundle["image/svg+xml"] = run_dot(to_dot(graph, **options), "svg").decode("utf-8")
        except (DotNotFoundError, DotFailedError, DiagramTooLargeError):
            pass
    return {k: v for k, v in bundle.items() if (wanted is None or k in wanted) and k not in unwanted}
