"""Writing files: ``render`` finds the path's format in the registry (``render/_formats.py``) and writes it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._formats import format_of

if TYPE_CHECKING:
    from ..graph import Graph


def render(graph: Graph, path: str | os.PathLike[str], *, format: str | None = None, **options: Any) -> Path:  # noqa: A002
    """Write ``graph`` to ``path`` in the format of its suffix (or the one named by ``format``); returns the path.

    ``.svg`` ``.pdf`` ``.png``: a diagram drawn by ``dot``; ``.dot`` ``.gv``: its DOT source (no
    ``dot`` needed); both take ``to_dot``'s options (``depth``, ``predicate``, ``fold``, ``params``,
    ``noise``, ``rankdir``, ``edge_labels``, ``max_nodes``, ``title``, ``source``, ``layout``).
    ``.txt``: the tree, with ``tree``'s options (``depth``, ``ops``, ``noise``, ``at``,
    ``statements``). ``.json``: the capture itself, as ``Graph.save`` writes it; ``.html`` and
    ``.mx.json``: their own (``HtmlOptions``, ``ModelExplorerOptions``). ``depth`` defaults to
    ``"auto"`` for pictures (they must fit) and to ``"all"`` for the tree, as ``g.tree()``. Each
    format's options class is the one declaration of what it takes: an option it does not take is a
    ``ValueError`` naming the formats that do. The registry (``render/_formats.py``) lists every format; ``format="svg"`` writes a path without (or with another) suffix. Nothing
    is written when drawing fails. ``phase`` (every format but ``.json``, which holds the whole
    capture) shows a training step's forward, backward or both (``views/_phases.py``). A ``.svg`` ``.pdf`` ``.png`` that ``dot`` would take more than a
    minute to lay out raises ``DiagramTooLargeError`` before ``dot`` starts, unless ``force=True``.

    >>> import tempfile, torch, dispatchtrace as dt
    >>> lin, x = torch.nn.Linear(4, 2), torch.ones(1, 4)
    >>> with dt.capture(lin) as g:
    ...     _ = lin(x)
    >>> with tempfile.TemporaryDirectory() as d:
    ...     written = render(g, Path(d) / "lin.dot", depth="ops")
    ...     written.name, written.read_text().startswith("digraph")
    ('lin.dot', True)
    >>> render(g, "lin.txt", rankdir="LR")
    Traceback (most recent call last):
    ...
    ValueError: the tree format (.txt) takes no rankdir (svg, pdf, png, dot take it); it takes depth, ops, noise, at, statements, phase
    """
    fmt = format_of(path, format)
    data = fmt.write(graph, fmt.options_from(options))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path
