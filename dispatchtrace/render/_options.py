"""What ``render`` and ``to_dot`` take, as ``TypedDict``s a type checker and an IDE read through ``Unpack``.

The formats' options classes stay the one declaration of what each format takes (``render/_formats.py``
checks every keyword against them at run time); these two spell the same names and types for the
signatures (``g.render(path, **options: Unpack[RenderOptions])``), and ``tests/render/test_options.py``
fails when they drift apart: a new option is one field in its options class and one line here.

>>> sorted(DotOptions.__annotations__) == sorted(set(RenderOptions.__annotations__) - {"depth", "force", "ops", "at", "statements", "metrics", "estimate"})
True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypedDict

from ..graph import Call, Depth, PhaseView
from ..views import Predicate
from ._dot import Layout, Rankdir

__all__ = ["Call", "Depth", "DotOptions", "Layout", "PhaseView", "Predicate", "Rankdir", "RenderOptions"]


class DotOptions(TypedDict, total=False):
    """``to_dot``'s options: ``DiagramOptions`` but ``depth`` (its own argument); ``render/_dot.py`` says what each does."""

    predicate: Predicate | None
    fold: bool
    params: bool
    noise: bool
    rankdir: Rankdir
    edge_labels: bool
    max_nodes: int
    title: str | None
    source: bool
    layout: Layout
    phase: PhaseView


class RenderOptions(DotOptions, total=False):
    """``render``'s options: every option of a capture's formats (each format takes its own: ``.txt`` the tree's,
    ``.svg`` the diagram's and ``force``; one it does not take is a ``ValueError`` naming the formats that do)."""

    depth: Depth
    force: bool
    ops: bool
    at: str | Call | None
    statements: bool
    metrics: str | Sequence[str]
    estimate: Any
