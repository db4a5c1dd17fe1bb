"""Writing files: diagrams through graphviz's ``dot``, DOT source, the text tree, JSON."""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import graphviz

from .estimate import check_layout_cost

if TYPE_CHECKING:
    from ..graph import Graph

IMAGE_FORMATS = ("svg", "pdf", "png")
SOURCE_SUFFIXES = (".dot", ".gv")
SUFFIXES = tuple(f".{f}" for f in IMAGE_FORMATS) + SOURCE_SUFFIXES + (".txt", ".json")

INSTALL_HINT = (
    "install it with `apt-get install graphviz` (Debian/Ubuntu), `brew install graphviz` (macOS) "
    "or `conda install graphviz`; .dot, .txt and .json outputs work without it"
)


class DotNotFoundError(RuntimeError):
    """graphviz's ``dot`` program is not installed (or not on ``PATH``)."""


class DotFailedError(RuntimeError):
    """``dot`` ran but could not lay out or write the diagram."""


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


def render(graph: Graph, path: str | os.PathLike[str], depth: Any = None, *, force: bool = False, **options: Any) -> Path:
    """Write ``graph`` to ``path``, the format taken from the suffix; returns the path written.

    ``.svg`` ``.pdf`` ``.png``: a diagram drawn by ``dot`` (options as ``to_dot``: ``depth``
    ``"auto"``/``None``, an int or ``"ops"``, ``fold``, ``params``, ...). ``.dot`` ``.gv``: its
    DOT source (no ``dot`` needed). ``.txt``: the nested tree (``graph.tree(depth, ...)`` with the
    tree's options ``ops``, ``at``, ``statements``, ``noise``; a depth that is not an int gives the
    whole tree). ``.json``: the capture itself (``graph.save``).

    Each format takes its own options and ignores the other's, so one set of options can write
    several formats; an option neither the tree nor the diagram knows is a ``TypeError``.
    ``.svg`` ``.pdf`` ``.png`` that ``dot`` would take more than a minute to lay out raise
    ``DiagramTooLargeError`` before ``dot`` starts, unless ``force=True``.

    >>> import tempfile, torch, dispatchtrace as dt
    >>> lin, x = torch.nn.Linear(4, 2), torch.ones(1, 4)
    >>> with dt.capture(lin) as g:
    ...     _ = lin(x)
    >>> with tempfile.TemporaryDirectory() as d:
    ...     written = render(g, Path(d) / "lin.dot", "ops")
    ...     written.name, written.read_text().startswith("digraph")
    ('lin.dot', True)
    """
    from ..views.tree import tree
    from .dot import to_dot

    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise ValueError(f"cannot tell the format of {str(path)!r} from its suffix; use one of: {', '.join(SUFFIXES)}")
    tree_options, dot_options = _keywords(tree), _keywords(to_dot)
    unknown = sorted(set(options) - tree_options - dot_options)
    if unknown:
        raise TypeError(f"render() got an unexpected keyword argument {unknown[0]!r}; .txt takes "
                        f"{', '.join(sorted(tree_options))}; diagrams take {', '.join(sorted(dot_options))}")
    path.parent.mkdir(parents=True, exist_ok=True)
    if suffix == ".txt":
        chosen = {k: v for k, v in options.items() if k in tree_options}
        path.write_text(str(tree(graph, depth if isinstance(depth, int) else None, **chosen)) + "\n", encoding="utf-8")
        return path
    if suffix == ".json":
        graph.save(path)
        return path
    dot = to_dot(graph, depth, **{k: v for k, v in options.items() if k in dot_options})
    if suffix in SOURCE_SUFFIXES:
        path.write_text(dot.source, encoding="utf-8")
        return path
    path.write_bytes(run_dot(dot, suffix[1:], what=str(path), force=force))
    return path


def _keywords(function: Callable[..., Any]) -> frozenset[str]:
    """The keyword-only options of ``function``: what ``render`` passes on to it."""
    return frozenset(n for n, p in inspect.signature(function).parameters.items() if p.kind is p.KEYWORD_ONLY)
