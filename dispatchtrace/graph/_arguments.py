"""Input construction: the ops at the root that only build the arguments of the top-level call."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._structure import iter_leaves
from ._records import Call, Op
from ._tensors import TensorRef

if TYPE_CHECKING:
    from ._graph import Graph


@dataclass(frozen=True, slots=True)
class Construction:
    """What ``input_construction`` found: ``ops``, the root ops before the only top-level call that
    only build its arguments (``x = torch.randn(1, 3, 64, 64)`` inside the block), and ``made``,
    the tensors among those arguments that such ops made (or literal constants: ``torch.tensor(ids)``)."""

    call: Call | None = None
    ops: tuple[Op, ...] = ()
    made: tuple[TensorRef, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.made)

    def note(self) -> str:
        """The sentence ``graph.notes`` holds about them."""
        assert self.call is not None
        targets = ", ".join(dict.fromkeys(op.target for op in self.ops))
        n = len(self.ops)
        return (f"{n} op{'s' * (n != 1)} at the top level of the block ({targets}) only {'build' if n != 1 else 'builds'} the arguments of "
                f"{self.call.label}: they are recorded, and replay (g.to_fx) takes those arguments as its inputs "
                f"instead of running them, so gm(new_x) reads new_x")


def input_construction(graph: Graph) -> Construction:
    """The root ops that build the arguments of the only top-level call and nothing else.

    An op counts when it ran in the forward phase at the root before that call, and what it made
    reaches the call's arguments (by its results, or by writing in place into an argument's storage);
    an op some other op after the call reads (apart from reading the argument itself) is no input
    construction, nor are the ops it reads.

    >>> import torch, dispatchtrace as dt
    >>> lin = torch.nn.Linear(4, 2)
    >>> with dt.capture(lin) as g:
    ...     y = lin(torch.ones(1, 4) * 2)
    >>> found = input_construction(g)
    >>> [op.target for op in found.ops], [ref.text for ref in found.made]
    (['aten.ones.default', 'aten.mul.Tensor'], ['%mul'])
    """
    root = graph.root
    tops = [c for c in root.children if isinstance(c, Call)]
    if len(tops) != 1 or tops[0].arguments is None:
        return Construction()
    top = tops[0]
    before: dict[int, Op] = {}
    for child in root.children:
        if child is top:
            break
        if isinstance(child, Op) and child.phase == "forward":
            before[child.index] = child
    positional, keywords = top.arguments
    refs = [r for value in [*(v for _, v in positional), *keywords.values()] for r in iter_leaves(value)
            if isinstance(r, TensorRef)]
    made = [r for r in dict.fromkeys(refs) if (r.producer is not None and r.producer.index in before)
            or (r.producer is None and r.kind == "constant")]
    if not made:
        return Construction()
    storages = {r.storage for r in made}
    want: set[int] = set()
    stack = [r.producer for r in made if r.producer is not None]
    stack += [op for op in before.values() if any(m.storage in storages for m in op.mutated)]
    while stack:
        op = stack.pop()
        if op.index in want or op.index not in before:
            continue
        want.add(op.index)
        stack.extend(op.producers)
        stack.extend(r.producer for r in op.inputs if r.producer is not None)
    passed = {r.id for r in made}
    changed = True
    while changed:  # what another op reads (not as the argument) is no construction, nor what it reads
        changed = False
        for op in graph.ops:
            if op.index in want:
                continue
            for r in op.inputs:
                p = r.producer
                if p is not None and p.index in want and r.id not in passed:
                    _keep(p, want, before)
                    changed = True
    ops = tuple(before[i] for i in sorted(want))
    kept = [r for r in made if r.producer is None or r.producer.index in want]
    return Construction(top, ops, tuple(kept)) if kept else Construction()


def _keep(op: Op, want: set[int], before: dict[int, Any]) -> None:
    """``op`` is replayed: so are the construction ops it reads."""
    stack = [op]
    while stack:
        o = stack.pop()
        if o.index not in want:
            continue
        want.discard(o.index)
        stack.extend(o.producers)
        stack.extend(r.producer for r in o.inputs if r.producer is not None)
