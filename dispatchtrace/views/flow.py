"""Data flow among the children of one call: which child reads which, by op producers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..graph import Call, Child, Op
from ..tensors import TensorRef


@dataclass(frozen=True, slots=True)
class Flow:
    """Data flow among the children of one call: edges by child position, who reads the call's input, who is read outside."""

    edges: frozenset[tuple[int, int]]
    entry: frozenset[int]
    exit: frozenset[int]


def dataflow(call: Call, kids: list[Child], *, keep: Callable[[Op], Any] = bool) -> Flow:
    """Edges between ``kids`` (children of ``call`` in the order they ran) from op producers.

    Each op is mapped to the child that contains it; a sub-call with no ops at all (an
    ``Identity``, a ``Dropout`` in eval mode) passes its input tensors on, so readers of
    those tensors read from it. Readers for which ``keep`` is false do not count.
    """
    owner: dict[Op, int] = {}
    for i, kid in enumerate(kids):
        if isinstance(kid, Op):
            owner[kid] = i
        else:
            for o in kid.all_ops():
                owner[o] = i
    edges: set[tuple[int, int]] = set()
    entry: set[int] = set()
    exit: set[int] = set()
    passed: dict[int, int] = {}  # id(ref) -> child with no ops that last handed it on

    def source(ref: TensorRef, before: int) -> int | None:
        """The child a read of ``ref`` comes from; -1 for the call's input, None for weights and constants."""
        k = passed.get(id(ref))
        if k is not None and k < before:
            return k
        if ref.producer is not None:
            return owner.get(ref.producer, -1)
        return -1 if ref.kind == "input" else None

    def link(src: int | None, i: int) -> None:
        if src == -1:
            entry.add(i)
        elif src is not None and src != i:
            edges.add((src, i))

    for i, kid in enumerate(kids):
        ops_ = [kid] if isinstance(kid, Op) else list(kid.all_ops())
        if not ops_ and isinstance(kid, Call):
            for ref in kid.inputs:
                link(source(ref, i), i)
            for ref in kid.outputs:
                passed[id(ref)] = i
            continue
        for o in ops_:
            direct = set()
            for ref in o.inputs:
                link(source(ref, i), i)
                direct.add(ref.producer)
            for p in o.producers:  # last writers of storage read through an older view
                if p not in direct:
                    link(owner.get(p, -1), i)
            if any(u not in owner and keep(u) for u in o.users):
                exit.add(i)
    for ref in call.outputs:
        src = source(ref, len(kids))
        if src is not None and src >= 0:
            exit.add(src)
    return Flow(frozenset(edges), frozenset(entry), frozenset(exit))
