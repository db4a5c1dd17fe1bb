"""``Graph.lint``'s checks of refs and versions (invariants 5-7 of ``lint``): each returns the first
broken invariant as ``(name, message)``, or ``None``, and ``lint`` raises it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._records import Op
from .._tensors import TensorRef

if TYPE_CHECKING:
    from .._graph import Graph

Problem = tuple[str, str]
"""``(invariant, message)``: what ``lint`` raises as ``LintError("invariant: message")``."""

_KINDS = frozenset({"input", "parameter", "buffer", "activation", "constant"})


def describe(op: Op) -> str:
    """``%relu (op 3)``: an op as lint's messages name it."""
    return f"%{op.name} (op {op.index})"


def refs_in(values: Any, out: list[TensorRef]) -> list[TensorRef]:
    """``out`` with the tensor refs among the leaves of ``values`` (as ``iter_leaves`` walks them), in order."""
    for v in values:
        t = type(v)
        if t is TensorRef:
            out.append(v)
        elif t is list or t is tuple:
            refs_in(v, out)
        elif t is dict:
            refs_in(v.values(), out)
        elif t is not int and isinstance(v, TensorRef):
            out.append(v)
    return out


def mentions(graph: Graph, *, ops: bool = True) -> list[tuple[Any, Any]]:
    """Every ref the graph mentions, in groups ``(where, refs)``: ``where`` an op, a call or a name (``_at``);
    ``ops=False``: all but the ops' (``check_tensors`` walks those itself)."""
    out: list[tuple[Any, Any]] = []
    for op in graph.ops if ops else ():
        out += ((op, op.inputs), (op, op.outputs), (op, op.mutated))
    for call in graph.calls:
        out += ((call, call.inputs), (call, call.outputs), (call, refs_in((call.returned,), [])))
    out += (("graph.inputs", graph.inputs), ("graph.outputs", graph.outputs))
    return out


def _at(where: Any) -> str:
    return describe(where) if isinstance(where, Op) else where if isinstance(where, str) else repr(where)


def check_tensors(graph: Graph) -> Problem | None:
    """Invariant 7 (``tensors``): every ref names its producer's output at its slot, or a later version of it."""
    ops = graph.ops
    for op in ops:
        for slot, ref in enumerate(op.outputs):
            if ref.producer is not op or ref.slot != slot:
                return "tensors", (f"{describe(op)}'s output {slot} is {ref!r}, which does not name this op as "
                                   f"producer at slot {slot}; an op's outputs are its own, by position")
    checked: set[TensorRef] = set()  # a ref passes or fails wherever it is mentioned: each is checked at its first
    seen, n = checked.add, len(ops)  # (refs hash by identity), in the order mentions lists them
    for op in ops:
        for refs in (op.inputs, op.outputs, op.mutated):
            for ref in refs:
                if ref in checked:
                    continue
                seen(ref)
                p = ref.producer
                if p is not None and ref.kind in _KINDS and 0 <= p.index < n and ops[p.index] is p:
                    try:  # the common case: the ref is its producer's output at its slot
                        if p.outputs[ref.slot] is ref:
                            continue
                    except (IndexError, TypeError):
                        pass
                problem = _check_ref(ref, op, ops)
                if problem is not None:
                    return problem
    for w, refs in mentions(graph, ops=False):
        for ref in refs:
            if ref not in checked:
                seen(ref)
                problem = _check_ref(ref, w, ops)
                if problem is not None:
                    return problem
    return None


def _check_ref(ref: TensorRef, w: Any, ops: list[Op]) -> Problem | None:
    """Invariant 7 for one ref, first mentioned in ``w``."""
    if ref.kind not in _KINDS:
        return "tensors", (f"{ref!r} in {_at(w)} has kind {ref.kind!r}; kinds are {sorted(_KINDS)}")
    p = ref.producer
    if p is None:
        if ref.kind == "activation":
            return "tensors", (f"{ref!r} in {_at(w)} is an activation without producer; activations come from ops")
        return None
    if not (0 <= p.index < len(ops) and ops[p.index] is p):
        return "tensors", (f"{ref!r} in {_at(w)} names %{p.name} as producer, which is not an op of this graph")
    outs = p.outputs
    if ref.slot >= len(outs):
        return "tensors", (f"{ref!r} in {_at(w)} is output {ref.slot} of {describe(p)}, which has {len(outs)} "
                           f"outputs")
    out = outs[ref.slot]
    if out is not ref and (out.storage != ref.storage or ref.version < out.version):
        return "tensors", (f"{ref!r} in {_at(w)} is not output {ref.slot} of {describe(p)} ({out!r}) nor a later "
                           f"version of it; a tensor ref is its producer's output at its slot, or that tensor "
                           f"after a write")
    return None


def check_versions(graph: Graph) -> Problem | None:
    """Invariants 5 and 6 (``versions``, ``mutated``): versions never decrease; writes make new versions;
    ``is_view`` exactly when an op writes nothing and returns an input's storage."""
    latest: dict[int, int] = {}  # (``in`` and ``[]``, not ``get``: no call per ref)
    for op in graph.ops:
        read: dict[int, int] = {}  # storage -> the latest version the op reads
        for ref in op.inputs:
            s, v = ref.storage, ref.version
            if v < (latest[s] if s in latest else -1):
                return _older(op, ref, "input", latest)
            latest[s] = v
            r = read[s] if s in read else -1
            read[s] = v if v > r else r
        mutated = op.mutated
        for ref in mutated:
            s = ref.storage
            if ref.version < (latest[s] if s in latest else -1):
                return _older(op, ref, "written tensor", latest)
            latest[s] = ref.version
            if s in read and ref.version <= read[s]:
                return "mutated", (f"{describe(op)} writes {ref!r} but its version is not later than the version "
                                   f"it read ({read[s]}); a write makes a new version")
        shares = False  # an output shares an input's storage
        for ref in op.outputs:
            s, v = ref.storage, ref.version
            if v < (latest[s] if s in latest else -1):
                return _older(op, ref, "output", latest)
            latest[s] = v
            shares = shares or s in read
        if op.is_view != (shares and not mutated):
            return "mutated", (f"{describe(op)} has is_view={op.is_view}; is_view is true exactly when the op "
                               f"writes nothing and an output shares an input's storage")
    return None


def _older(op: Op, ref: TensorRef, role: str, latest: dict[int, int]) -> Problem:
    v = latest.get(ref.storage, -1)
    return "versions", (f"{describe(op)}'s {role} {ref!r} has version {ref.version} of storage {ref.storage}, "
                        f"which an earlier op already saw at version {v}; versions of a storage never decrease")
