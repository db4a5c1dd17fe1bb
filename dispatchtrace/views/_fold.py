"""Folding: runs of consecutive, identical, chained sibling calls shown once with a ``×N`` count."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ..graph import Call, Child, Graph


@dataclass(frozen=True, slots=True, eq=False)
class Run:
    """Consecutive sibling calls of identical structure, each feeding the next.

    Identical means equal ``signature``: same types, same op targets in the same order, same
    tensor shapes and dtypes at every op. ``calls[0]`` stands for all of them; ``calls[k]``'s
    ops map one to one, in order, onto ``calls[0]``'s.
    """

    calls: tuple[Call, ...]


Step = tuple[object, ...]


def signature(call: Call) -> tuple[Step, ...]:
    """What two calls must share to fold: types, op targets in order, every tensor's shape and dtype.

    One step per call (its type and output tensors) and per op (its target, input tensors,
    parameters and buffers included, and output tensors), in the order they ran, each with
    its depth below ``call``. Calls that differ only in width (``Linear(4, 8)`` then
    ``Linear(8, 16)``, ResNet's ``layer2`` and ``layer3``) differ here.

    >>> import torch, dispatchtrace as dt
    >>> lin = torch.nn.Linear(2, 3)
    >>> with dt.capture(lin) as g:
    ...     _ = lin(torch.ones(1, 2))
    >>> for step in signature(g.calls[0]):
    ...     print(step)
    ('call', 0, 'Linear', (('float32', (1, 3)),))
    ('op', 1, 'aten.t.default', (('float32', (3, 2)),), (('float32', (2, 3)),))
    ('op', 1, 'aten.addmm.default', (('float32', (3,)), ('float32', (1, 2)), ('float32', (2, 3))), (('float32', (1, 3)),))
    """
    out: list[Step] = [("call", 0, call.type, _labels(call.outputs))]
    base = call.depth
    for child in call.walk():
        if isinstance(child, Call):
            out.append(("call", child.depth - base, child.type, _labels(child.outputs)))
        else:
            out.append(("op", child.call.depth - base + 1, child.target, _labels(child.inputs), _labels(child.outputs)))
    return tuple(out)


def _labels(refs: tuple) -> tuple[tuple[str, tuple[int | str, ...]], ...]:
    return tuple((r.dtype, r.shape) for r in refs)


def _keys(refs: tuple) -> set[tuple[int, int]]:
    return {(r.storage, r.version) for r in refs}


def _chained(a: Call, b: Call) -> bool:
    return bool(_keys(a.outputs) & _keys(b.inputs))


def foldable_runs(graph: Graph, expanded: Callable[[Call], bool]) -> list[Run]:
    """Every run of two or more foldable sibling calls under a call that ``expanded`` accepts.

    Runs nested inside the later repetitions of an outer run are found too (their ops
    map onto the first repetition's first).
    """
    found: list[Run] = []
    parents = [graph.root, *graph.calls]
    for parent in parents:
        if parent is not graph.root and not expanded(parent):
            continue
        found.extend(_runs_in(parent))
    return found


def _runs_in(parent: Call) -> Iterator[Run]:
    current: list[Call] = []
    sig: tuple | None = None
    for child in [*parent.children, None]:
        if isinstance(child, Call):
            s = signature(child)
            if current and s == sig and _chained(current[-1], child):
                current.append(child)
                continue
            if len(current) > 1:
                yield Run(tuple(current))
            current, sig = [child], s
        else:
            if len(current) > 1:
                yield Run(tuple(current))
            current, sig = [], None



@dataclass(frozen=True, slots=True)
class Folding:
    """Where each op and call sits in the runs: its stand-in and its repetition in every run."""

    canon: dict[Child, Child]
    reps: dict[Child, tuple[tuple[int, int], ...]]
    run_of: dict[Call, Run]

    def stand_in(self, item: Child) -> Child:
        """The counterpart of ``item`` in the first repetition (``item`` itself outside runs)."""
        return self.canon.get(item, item)

    def apart(self, a: object, b: object) -> bool:
        """True when ``a`` and ``b`` lie in different repetitions of one run (a chain link)."""
        ra = dict(self.reps.get(a, ()))  # type: ignore[call-overload]
        for run_id, rep in self.reps.get(b, ()):  # type: ignore[call-overload]
            other = ra.get(run_id)
            if other is not None and other != rep:
                return True
        return False


def _items(call: Call) -> list[Child]:
    return [call, *call.walk()]


def fold(found: list[Run]) -> Folding:
    """Map every op and call of a run's later repetitions onto its counterpart in the first."""
    direct: dict[Child, Child] = {}
    reps: dict[Child, list[tuple[int, int]]] = {}
    run_of: dict[Call, Run] = {}
    for run_id, run in enumerate(found):
        first = _items(run.calls[0])
        run_of[run.calls[0]] = run
        for rep, call in enumerate(run.calls):
            items = first if rep == 0 else _items(call)
            for i, item in enumerate(items):
                reps.setdefault(item, []).append((run_id, rep))
                if rep:
                    direct[item] = first[i]
    canon: dict[Child, Child] = {}
    for item in direct:
        target = direct[item]
        while target in direct:
            target = direct[target]
        canon[item] = target
    return Folding(canon, {k: tuple(v) for k, v in reps.items()}, run_of)


def range_label(calls: tuple[Call, ...]) -> str:
    """``layers.0–11`` for numbered siblings, ``block#0–3`` for one module called again.

    >>> from dispatchtrace.graph import new_call
    >>> calls = tuple(new_call(f"layers.{i}", "Layer", 0, None) for i in range(12))
    >>> range_label(calls)
    'layers.0–11'
    """
    first, last = calls[0], calls[-1]
    if first.path == last.path:
        return f"{first.path or first.type}#{first.index}–{last.index}"
    head, _, a = first.path.rpartition(".")
    head_b, _, b = last.path.rpartition(".")
    if head == head_b and a.isdigit() and b.isdigit():
        return f"{head + '.' if head else ''}{a}–{b}"
    return f"{first.path}…{last.path}"
