"""Jupyter display: a graph shows its default-depth diagram (the registry's ``svg``), or text without ``dot``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from .errors import DotFailedError, DotNotFoundError
from .estimate import DiagramTooLargeError
from .formats import get

if TYPE_CHECKING:
    from ..graph import Graph

#: the formats a notebook shows, richest first, by registry name; the text repr is always there
SHOWN = ("svg",)


def mimebundle(graph: Graph, include: Iterable[str] | None = None, exclude: Iterable[str] | None = None) -> dict[str, str]:
    """``{"image/svg+xml": ..., "text/plain": ...}`` for ``_repr_mimebundle_``.

    Each format in ``SHOWN`` is written with its default options; one that cannot be drawn
    (``dot`` missing or failing, or a diagram too large to lay out in reasonable time) is left out, so notebooks fall back to text.

    >>> import torch, dispatchtrace as dt
    >>> lin, x = torch.nn.Linear(4, 2), torch.ones(1, 4)
    >>> with dt.capture(lin) as g:
    ...     _ = lin(x)
    >>> sorted(mimebundle(g, include=["text/plain"]))
    ['text/plain']
    """
    wanted = set(include) if include is not None else None
    unwanted = set(exclude or ())

    def shown(mime: str) -> bool:
        return (wanted is None or mime in wanted) and mime not in unwanted

    bundle: dict[str, str] = {}
    for name in SHOWN:
        fmt = get(name)
        if shown(fmt.mime):
            try:
                bundle[fmt.mime] = fmt.write(graph, fmt.options()).decode("utf-8")
            except (DotNotFoundError, DotFailedError, DiagramTooLargeError):
                pass
    if shown("text/plain"):
        bundle["text/plain"] = repr(graph)
    return bundle
