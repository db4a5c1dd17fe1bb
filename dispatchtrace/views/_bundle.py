"""Bundles: the ops an expanded call issued between two of its sub-calls, drawn as one node.

A detection model's own ``forward`` runs thousands of ops outside any sub-module (Mask R-CNN's
``transform.postprocess`` is a method, not a module call); bundled, they are one ``5028 ops`` node
between ``roi_heads`` and the output, and the model's parts show. A bundle never holds a sub-call,
so data still flows one way: into the bundle from what ran before it, out to what ran after.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ..graph import Call, Graph, Op


@dataclass(frozen=True, slots=True, eq=False)
class Bundle:
    """Ops of ``call`` issued between two of its sub-calls (``k``: how many sub-calls ran before)."""

    call: Call
    k: int
    ops: tuple[Op, ...] = ()

    @property
    def name(self) -> str:
        """``<capture>.ops#0``, ``roi_heads.ops#3``."""
        return f"{self.call.label}.ops#{self.k}"

    @property
    def label(self) -> str:
        """``5028 ops: aten::select ×1512, aten::_local_scalar_dense ×1382, …``."""
        common = Counter(op.short for op in self.ops).most_common(3)
        kinds = ", ".join(f"{name} ×{n}" if n > 1 else name for name, n in common)
        more = ", …" if len({op.short for op in self.ops}) > len(common) else ""
        return f"{len(self.ops)} ops: {kinds}{more}"


def bundles(graph: Graph, expanded: Callable[[Call], bool], hidden: Iterable[Op] = ()) -> dict[Op, Bundle]:
    """Each shown op of an ``expanded`` call (or of the capture's root) mapped to its bundle.

    A bundle of one op is left out: that op is its own node already.
    """
    skip = set(hidden)
    out: dict[Op, Bundle] = {}
    for call in [graph.root, *graph.calls]:
        if call.parent is not None and not expanded(call):
            continue
        stretches: list[list[Op]] = [[]]  # the ops between one sub-call and the next
        for child in call.children:
            if isinstance(child, Call):
                stretches.append([])
            elif child not in skip:
                stretches[-1].append(child)
        for k, ops in enumerate(stretches):
            if len(ops) > 1:
                b = Bundle(call, k, tuple(ops))
                for op in ops:
                    out[op] = b
    return out
