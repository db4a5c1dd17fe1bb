"""Writing files: ``render`` finds the path's format in the registry (``render/_formats.py``) and writes it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from ..graph import AUTO_BUDGET
from ._formats import choose

if TYPE_CHECKING:
    from ..graph import Call, Graph, PhaseView
    from ..views import Predicate
    from ._dot import Layout, Rankdir
    from ._formats import Depth


def render(
    graph: Graph,
    path: str | os.PathLike[str],
    *,
    format: str | None = None,  # noqa: A002 - the public keyword
    depth: Depth = "auto",
    ops: bool = False,
    noise: bool = False,
    at: str | Call | None = None,
    statements: bool = False,
    predicate: Predicate | None = None,
    fold: bool = True,
    params: bool = False,
    rankdir: Rankdir = "TB",
    edge_labels: bool = True,
    max_nodes: int = AUTO_BUDGET,
    title: str | None = None,
    source: bool = True,
    layout: Layout = "auto",
    force: bool = False,
    phase: PhaseView = "forward",
) -> Path:
    """Write ``graph`` to ``path`` in the format of its suffix (or the one named by ``format``); returns the path.

    ``.svg`` ``.pdf`` ``.png``: a diagram drawn by ``dot``; ``.dot`` ``.gv``: its DOT source (no
    ``dot`` needed); both take ``to_dot``'s options (``depth``, ``predicate``, ``fold``, ``params``,
    ``noise``, ``rankdir``, ``edge_labels``, ``max_nodes``, ``title``, ``source``, ``layout``).
    ``.txt``: the tree, with ``tree``'s options (``depth``, ``ops``, ``noise``, ``at``,
    ``statements``). ``.json``: the capture itself, as ``Graph.save`` writes it. ``depth``
    defaults to ``"auto"`` for every format. Each format takes its own options and ignores the
    others', so one set of options writes several formats. The registry (``render.formats``)
    lists every format; ``format="svg"`` writes a path without (or with another) suffix. Nothing
    is written when drawing fails. ``phase`` (every format but ``.json``, which holds the whole
    capture) shows a training step's forward, backward or both (``views.phases``). A ``.svg`` ``.pdf`` ``.png`` that ``dot`` would take more than a
    minute to lay out raises ``DiagramTooLargeError`` before ``dot`` starts, unless ``force=True``.

    >>> import tempfile, torch, dispatchtrace as dt
    >>> lin, x = torch.nn.Linear(4, 2), torch.ones(1, 4)
    >>> with dt.capture(lin) as g:
    ...     _ = lin(x)
    >>> with tempfile.TemporaryDirectory() as d:
    ...     written = render(g, Path(d) / "lin.dot", depth="ops")
    ...     written.name, written.read_text().startswith("digraph")
    ('lin.dot', True)
    """
    fmt = choose(path, format)
    values = dict(depth=depth, ops=ops, noise=noise, at=at, statements=statements, predicate=predicate, fold=fold,
                  params=params, rankdir=rankdir, edge_labels=edge_labels, max_nodes=max_nodes, title=title,
                  source=source, layout=layout, force=force, phase=phase)
    data = fmt.write(graph, fmt.options_from(values))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path
