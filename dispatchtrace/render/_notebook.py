"""Jupyter display: ``g`` shows the HTML viewer inline (an ``<iframe>``) and the default-depth diagram (``svg``), or text."""

from __future__ import annotations

import html
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..errors import DotFailedError, DotNotFoundError
from ._estimate import DiagramTooLargeError
from ._formats import get

if TYPE_CHECKING:
    from ..graph import Graph

#: the formats a notebook shows, richest first, by registry name; the text repr is always there
SHOWN = ("html", "svg")

#: a capture with more ops than this shows no inline viewer (the notebook would carry the whole page,
#: about 210 bytes an op); ``g.render("model.html")`` writes it to a file instead
INLINE_MAX_OPS = 20_000

#: the inline viewer's height in the notebook, in CSS pixels
INLINE_HEIGHT = 640


def inline(page: str) -> str:
    """The viewer's page as one ``<iframe srcdoc=...>``: its styles and scripts stay inside the frame.

    The frame is sandboxed to scripts (the viewer and its layout worker) and downloads (its SVG and
    PNG export); it loads nothing, like the page itself.

    >>> inline("<p>a & b</p>")[:56]
    '<iframe srcdoc="&lt;p&gt;a &amp; b&lt;/p&gt;" sandbox="a'
    """
    return (f'<iframe srcdoc="{html.escape(page, quote=True)}" sandbox="allow-scripts allow-downloads" '
            f'style="width:100%;height:{INLINE_HEIGHT}px;border:1px solid #ccc"></iframe>')


def mimebundle(graph: Graph, include: Iterable[str] | None = None, exclude: Iterable[str] | None = None) -> dict[str, str]:
    """``{"text/html": ..., "image/svg+xml": ..., "text/plain": ...}`` for ``_repr_mimebundle_``.

    Each format in ``SHOWN`` is written with its default options: ``html`` as the viewer inline (not
    for captures over ``INLINE_MAX_OPS`` ops), ``svg`` the static diagram (front-ends that show no
    HTML, such as nbconvert to PDF, use it). One that cannot be drawn (``dot`` missing or failing,
    or a diagram too large to lay out in reasonable time) is left out; the text is always there.

    >>> import torch, dispatchtrace as dt
    >>> lin, x = torch.nn.Linear(4, 2), torch.ones(1, 4)
    >>> with dt.capture(lin) as g:
    ...     _ = lin(x)
    >>> sorted(mimebundle(g, include=["text/plain"]))
    ['text/plain']
    >>> mimebundle(g, include=["text/html"])["text/html"].startswith("<iframe srcdoc=")
    True
    """
    wanted = set(include) if include is not None else None
    unwanted = set(exclude or ())

    def shown(mime: str) -> bool:
        return (wanted is None or mime in wanted) and mime not in unwanted

    bundle: dict[str, str] = {}
    for name in SHOWN:
        fmt = get(name)
        if (fmt.write is None or not shown(fmt.mime) or fmt.mime in bundle
                or (name == "html" and len(graph.ops) > INLINE_MAX_OPS)):
            continue
        try:
            text = fmt.write(graph, fmt.options()).decode("utf-8")
        except (DotNotFoundError, DotFailedError, DiagramTooLargeError):
            continue
        bundle[fmt.mime] = inline(text) if name == "html" else text
    if shown("text/plain"):
        bundle["text/plain"] = repr(graph)
    return bundle
