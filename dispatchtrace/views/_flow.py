"""Data flow among the children of one call: which child reads which, by op producers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..graph import Call, Child, Op, TensorRef


@dataclass(frozen=True, slots=True)
class Flow:
    """Data flow among the children of one call: edges by child position, who reads the call's input, who is read outside.

    ``entry``: children on a path from the call's input (see ``dataflow``); ``outside``: every
    child that reads a tensor from outside the call, an extra input included.
    """

    edges: frozenset[tuple[int, int]]
    entry: frozenset[int]
    exit: frozenset[int]
    outside: frozenset[int] = frozenset()


def dataflow(call: Call, kids: list[Child], *, keep: Callable[[Op], Any] = bool) -> Flow:
    """Edges between ``kids`` (children of ``call`` in the order they ran) from op producers.

    Each op is mapped to the child that contains it; a sub-call with no ops at all (an
    ``Identity``, a ``Dropout`` in eval mode) passes its input tensors on, so readers of
    those tensors read from it, and it, not the child before it, is read outside when
    what it passes on leaves the call. Readers for which ``keep`` is false do not count.

    Each tensor from outside the call (its input, a tensor of the caller, a second model
    input) is a source of its own. A child reading one is an ``entry`` (on a path from the
    input) when it reads nothing inside the call (for the call's first input, children fed
    only by weights and constants, such as a Linear's ``t``, do not count), or when it reads the call's first input
    again after an earlier child did: the input splits, a residual or a skip. Any other
    outside tensor (an attention mask, position embeddings, an encoder's memory) read by a
    child that reads inside the call too is an extra input of that child, not a path.
    """
    owner: dict[Op, int] = {}
    for i, kid in enumerate(kids):
        if isinstance(kid, Op):
            owner[kid] = i
        else:
            for o in kid.all_ops():
                owner[o] = i
    edges: set[tuple[int, int]] = set()
    exit: set[int] = set()
    reads: list[list[object]] = [[] for _ in kids]  # outside tensors each child reads, in order
    passed: dict[int, int] = {}  # id(ref) -> child with no ops that last handed it on
    read_out: list[tuple[int, Op]] = []  # ops read outside the call, with their child

    def feeder(ref: TensorRef, before: int) -> int | None:
        """The child a read of ``ref`` comes from; -1 for outside the call, None for weights and constants."""
        k = passed.get(id(ref))
        if k is not None and k < before:
            return k
        if ref.producer is not None:
            return owner.get(ref.producer, -1)
        return -1 if ref.kind == "input" else None

    def link(src: int | None, i: int, outside: object) -> None:
        if src == -1:
            reads[i].append(outside)
        elif src is not None and src < i:  # later children never feed earlier ones (a phase view's
            edges.add((src, i))              # backward, ordered by first op, can have such reads)

    for i, kid in enumerate(kids):
        ops_ = [kid] if isinstance(kid, Op) else list(kid.all_ops())
        if not ops_ and isinstance(kid, Call):
            for ref in kid.inputs:
                link(feeder(ref, i), i, _key(ref))
            for ref in kid.outputs:
                passed[id(ref)] = i
            continue
        for o in ops_:
            direct = set()
            for ref in o.inputs:
                link(feeder(ref, i), i, _key(ref))
                direct.add(ref.producer)
            for p in o.producers:  # last writers of storage read through an older view
                if p not in direct:
                    link(owner.get(p, -1), i, ("write", p.index))
            if any(u not in owner and keep(u) for u in o.users):
                read_out.append((i, o))
    for i, o in read_out:
        handed = [passed.get(id(ref), -1) for ref in o.outputs]
        exit.add(handed[0] if handed and min(handed) > i and len(set(handed)) == 1 else i)
    for ref in call.outputs:
        src = feeder(ref, len(kids))
        if src is not None and src >= 0:
            exit.add(src)
    first = _key(call.inputs[0]) if call.inputs else next((t for r in reads for t in r), None)
    preds: dict[int, list[int]] = {}
    for a, b in edges:
        preds.setdefault(b, []).append(a)
    # a child fed only by weights and constants (``t`` of a Linear's weight) carries no value
    # from the input: reading it does not make the reader "read inside the call"
    free = [False] * len(kids)
    entry: set[int] = set()
    seen: set[object] = set()
    for i, tensors in enumerate(reads):
        fed = any(not free[p] for p in preds.get(i, ()))
        free[i] = not tensors and not fed
        starts = not fed if first in tensors else i not in preds  # weights-only preds count for extra inputs
        if tensors and (starts or first in seen and first in tensors):
            entry.add(i)
        seen.update(tensors)
    return Flow(frozenset(edges), frozenset(entry), frozenset(exit), frozenset(i for i, r in enumerate(reads) if r))


def _key(ref: TensorRef) -> object:
    """One outside tensor: views of one storage at one version are the same value."""
    return (ref.storage, ref.version)
