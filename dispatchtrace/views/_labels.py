"""How views name a module call: ``layer1.0.relu#2 (ReLU)``, and a folded run ``layers.0–11 (Layer) ×12``."""

from __future__ import annotations

from ..graph import Call
from ._fold import range_label


def call_label(call: Call) -> str:
    """``layer1.0.relu#2 (ReLU)``: ``Call.label`` and the type; the model's own call is its label alone.

    The same text in the tree, collapsed graphs, diagrams and the CLI; ``at=`` and ``--at`` take the
    label part (``layer1.0.relu#2``; see ``query.resolve``).
    """
    return f"{call.label} ({call.type})" if call.path else call.label


def run_label(calls: tuple[Call, ...]) -> str:
    """``layers.0–11 ×12``: a folded run as the viewer's box names it (its type on the line below)."""
    return f"{range_label(calls)} ×{len(calls)}"


def fold_label(calls: tuple[Call, ...]) -> str:
    """``layers.0–11 (TransformerEncoderLayer) ×12``; one call is its ``call_label``."""
    if len(calls) == 1:
        return call_label(calls[0])
    return f"{range_label(calls)} ({calls[0].type}) ×{len(calls)}"
