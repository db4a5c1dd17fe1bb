"""The text format: the nested tree of calls (``.txt``), as ``Graph.tree`` prints it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..views import tree

if TYPE_CHECKING:
    from ..graph import Call, Depth, Graph, PhaseView


@dataclass(frozen=True, slots=True, kw_only=True)
class TreeOptions:
    """What the tree takes: ``Graph.tree``'s options, with the same meanings and defaults."""

    depth: Depth = "all"
    ops: bool = False
    noise: bool = False
    at: str | Call | None = None
    statements: bool = False
    phase: PhaseView = "forward"
    metrics: str | Sequence[str] = ()


def tree_text(graph: Graph, o: TreeOptions) -> bytes:
    """The tree as printed, with a final newline."""
    shown = tree(graph, o.depth, ops=o.ops, noise=o.noise, at=o.at, statements=o.statements, phase=o.phase,
                 metrics=o.metrics)
    return f"{shown}\n".encode()
