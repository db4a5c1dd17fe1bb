"""Writing files: ``render`` finds the format of the path and of what is written in the registry
(``render/_formats.py``) and writes it; ``write_diff`` and ``write_ranks`` are ``render`` of a diff and of ranks."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._formats import format_of, subject_of

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ..graph import Graph
    from ..views import Diff
    from ._options import RenderOptions


def render(subject: Graph | Diff | Mapping[int, Graph], path: str | os.PathLike[str], *, format: str | None = None,  # noqa: A002
           **options: Unpack[RenderOptions]) -> Path:
    """Write ``subject`` (a ``Graph``, a ``Diff``, ``{rank: Graph}``) to ``path`` in the format of its suffix
    (or the one named by ``format``); returns the path.

    For a graph: ``.svg`` ``.pdf`` ``.png``: a diagram drawn by ``dot``; ``.dot`` ``.gv``: its DOT source (no
    ``dot`` needed); both take ``to_dot``'s options (``depth``, ``predicate``, ``fold``, ``params``,
    ``noise``, ``rankdir``, ``edge_labels``, ``max_nodes``, ``title``, ``source``, ``layout``).
    ``.txt``: the tree, with ``tree``'s options (``depth``, ``ops``, ``noise``, ``at``,
    ``statements``). ``.json``: the capture itself, the very files ``Graph.save`` writes (the kept values'
    ``.values.safetensors`` beside it); ``.html`` and
    ``.mx.json``: their own (``HtmlOptions``, ``ModelExplorerOptions``). ``depth`` defaults to
    ``"auto"`` for pictures (they must fit) and to ``"all"`` for the tree, as ``g.tree()``. Each
    format's options class is the one declaration of what it takes: an option it does not take is a
    ``ValueError`` naming the formats that do. The registry (``render/_formats.py``) lists every format; ``format="svg"`` writes a path without (or with another) suffix. Nothing
    is written when drawing fails. ``phase`` (every format but ``.json``, which holds the whole
    capture) shows a training step's forward, backward or both (``views/_phases.py``). A ``.svg`` ``.pdf`` ``.png`` that ``dot`` would take more than a
    minute to lay out raises ``DiagramTooLargeError`` before ``dot`` starts, unless ``force=True``.
    A diff and several ranks render to ``.html`` only (``write_diff``, ``write_ranks``).

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
    ValueError: the tree format (.txt) takes no rankdir (svg, pdf, png, dot take it); it takes depth, ops, noise, at, statements, phase, metrics
    """
    fmt = format_of(path, format, subject_of(subject))
    chosen = fmt.options_from(options)
    path = Path(path)
    if fmt.write_files is not None:
        fmt.write_files(subject, chosen, path)
        return path
    assert fmt.write is not None  # (register checks that a format has one of the two)
    data = fmt.write(subject, chosen)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def write_diff(d: Diff, path: str | os.PathLike[str], *, title: str | None = None) -> Path:
    """Write the page of ``d`` (``dt.diff(a, b)``) to ``path`` (``.html``): ``render(d, path, title=title)``."""
    return render(d, path, title=title)


def write_ranks(ranks: Mapping[int, Graph], path: str | os.PathLike[str], *, title: str | None = None,
                estimate: Any = None) -> Path:
    """Write the page for ``ranks`` (``{rank: Graph}``, as ``dt.load_ranks`` returns) to ``path`` (``.html``):
    ``render(ranks, path, title=title, estimate=estimate)``; ``estimate`` (a spec, or what ``dt.estimate_ranks``
    returned) adds each rank's estimated step and exposed communication."""
    return render(ranks, path, title=title, estimate=estimate)
