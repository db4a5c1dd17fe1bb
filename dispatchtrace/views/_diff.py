"""``diff``: two captures aligned call by call, then op by op inside each call, and where their values part."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from typing import Literal

from ..graph import Call, Graph, Op
from ._compare import Via, compare

Status = Literal["same", "changed", "added", "removed"]


@dataclass(frozen=True, slots=True)
class OpPair:
    """One op of ``a`` and one of ``b`` aligned (``same`` target and phase, or ``changed``), or an op of one
    side only (``removed``: ``b is None``; ``added``: ``a is None``). ``error`` is the largest relative
    difference of their results, ``departs`` whether it is beyond tolerance, ``via`` what was compared."""

    a: Op | None
    b: Op | None
    status: Status
    error: float = 0.0
    departs: bool = False
    via: Via = "none"

    def __str__(self) -> str:
        a = "-" if self.a is None else f"%{self.a.name} ({self.a.target})"
        b = "-" if self.b is None else f"%{self.b.name} ({self.b.target})"
        return f"{a} / {b}: {self.status}" + (f", error {self.error:.3g} ({self.via})" if self.via != "none" else "")


@dataclass(frozen=True, slots=True)
class CallDiff:
    """Two aligned calls: their ops (``OpPair``, forward ops and then those that differentiate the call)
    and ``error``, the largest relative difference of the call's outputs (``via`` what was compared)."""

    a: Call
    b: Call
    ops: tuple[OpPair, ...]
    error: float
    via: Via

    @property
    def changed(self) -> tuple[OpPair, ...]:
        """The ops added, removed or changed in this call."""
        return tuple(p for p in self.ops if p.status != "same")

    @property
    def label(self) -> str:
        return self.a.label if self.a.label == self.b.label else f"{self.a.label} / {self.b.label}"


@dataclass(frozen=True, slots=True)
class Diff:
    """What ``diff(a, b)`` found: ``calls`` aligned (``CallDiff``, in ``a``'s order), ``only_a`` / ``only_b``
    the calls of one side only (the top of each such subtree), ``first`` the first aligned op pair
    (in ``a``'s order) whose results depart beyond tolerance while the inputs that ops made did not
    (``None`` when they agree), ``via`` how many pairs were compared through kept tensors, through stats
    or not at all."""

    a: Graph
    b: Graph
    calls: tuple[CallDiff, ...]
    only_a: tuple[Call, ...]
    only_b: tuple[Call, ...]
    first: OpPair | None
    rtol: float
    atol: float
    via: dict[str, int] = field(default_factory=dict)

    @property
    def structural(self) -> tuple[str, ...]:
        """Each structural difference as one line: a call of one side only, a call whose module type changed,
        the ops added, removed or changed in a call."""
        lines = [f"call only in a: {c.label} ({c.type})" for c in self.only_a]
        lines += [f"call only in b: {c.label} ({c.type})" for c in self.only_b]
        for cd in self.calls:
            if cd.a.type != cd.b.type:
                lines.append(f"type of {cd.label}: {cd.a.type} -> {cd.b.type}")
            changed = cd.changed
            if changed:
                counts = Counter((p.status, (p.b if p.a is None else p.a).target.removeprefix("aten.")
                                  + ("" if p.status != "changed" or p.b is None else f" -> {p.b.target.removeprefix('aten.')}"))
                                 for p in changed)  # type: ignore[union-attr]
                parts = [f"{status} {target}" + (f" x{n}" if n > 1 else "") for (status, target), n in counts.items()]
                lines.append(f"ops of {cd.label}: " + ", ".join(parts))
        return tuple(lines)

    @property
    def agree(self) -> bool:
        """No structural difference (``structural`` is empty) and no value beyond tolerance."""
        return (self.first is None and not self.only_a and not self.only_b
                and not any(cd.changed or cd.a.type != cd.b.type for cd in self.calls))

    def __str__(self) -> str:
        return report(self)


def _owner(op: Op) -> Call:
    """The call an op is aligned in: the forward call it differentiates or recomputes (``origin``), else its own."""
    origin = op.origin
    return op.call if origin is None else origin


def _groups(graph: Graph) -> dict[int, list[Op]]:
    groups: dict[int, list[Op]] = {}
    for op in graph.ops:
        groups.setdefault(id(_owner(op)), []).append(op)
    return groups


def _align_calls(a: Call, b: Call, pairs: list[tuple[Call, Call]], only_a: list[Call], only_b: list[Call]) -> None:
    """``a`` and ``b`` aligned, then their child calls by (path, index), recursively."""
    pairs.append((a, b))
    kids_b = {(c.path, c.index): c for c in b.children if isinstance(c, Call)}
    matched: set[int] = set()
    for c in a.children:
        if isinstance(c, Call):
            m = kids_b.get((c.path, c.index))
            if m is None:
                only_a.append(c)
            else:
                matched.add(id(m))
                _align_calls(c, m, pairs, only_a, only_b)
    only_b.extend(c for c in b.children if isinstance(c, Call) and id(c) not in matched)


def _align_ops(ops_a: list[Op], ops_b: list[Op]) -> list[tuple[Op | None, Op | None, Status]]:
    """The ops of one aligned call, by a sequence alignment of (phase, target)."""
    keys_a = [(op.phase, op.target) for op in ops_a]
    keys_b = [(op.phase, op.target) for op in ops_b]
    if keys_a == keys_b:  # the common case: the same ops
        return [(x, y, "same") for x, y in zip(ops_a, ops_b, strict=True)]
    out: list[tuple[Op | None, Op | None, Status]] = []
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, keys_a, keys_b, autojunk=False).get_opcodes():
        if tag == "equal":
            out += [(ops_a[i], ops_b[j], "same") for i, j in zip(range(i1, i2), range(j1, j2), strict=True)]
            continue
        n = min(i2 - i1, j2 - j1) if tag == "replace" else 0
        out += [(ops_a[i1 + k], ops_b[j1 + k], "changed") for k in range(n)]
        out += [(ops_a[i], None, "removed") for i in range(i1 + n, i2)]
        out += [(None, ops_b[j], "added") for j in range(j1 + n, j2)]
    return out


def _results(ga: Graph, a: Op, gb: Graph, b: Op, rtol: float, atol: float) -> tuple[float, bool, Via]:
    error, departs, via = 0.0, False, "none"
    outs_a, outs_b = (*a.outputs, *a.mutated), (*b.outputs, *b.mutated)
    if len(outs_a) != len(outs_b):
        return math.inf, True, "none"
    for ra, rb in zip(outs_a, outs_b, strict=True):
        e, d, v = compare(ga, ra, gb, rb, rtol, atol)
        error, departs = max(error, e), departs or d
        if v != "none" and via != "values":
            via = v
    return error, departs, via


def _inputs_depart(ga: Graph, a: Op, gb: Graph, b: Op, rtol: float, atol: float) -> bool:
    """Whether a tensor both ops read and an op of the capture made differs (a parameter or an input that
    differs is where a departure begins, not a carried one)."""
    if len(a.inputs) != len(b.inputs):
        return False
    for ra, rb in zip(a.inputs, b.inputs, strict=True):
        if ra.producer is not None and compare(ga, ra, gb, rb, rtol, atol)[1]:
            return True
    return False


def diff(a: Graph, b: Graph, *, rtol: float = 1e-5, atol: float = 1e-8) -> Diff:
    """Align ``b`` to ``a``: module calls by path and call index through the call tree, then the ops inside
    each aligned call by a sequence alignment of their targets (so a change in one call never misaligns
    another), and compare the results of each aligned op pair (kept tensors where both kept them, else
    statistics; captures without values give the structure only). Works on live and loaded captures.
    """
    pairs: list[tuple[Call, Call]] = []
    only_a: list[Call] = []
    only_b: list[Call] = []
    _align_calls(a.root, b.root, pairs, only_a, only_b)
    groups_a, groups_b = _groups(a), _groups(b)
    via: Counter[str] = Counter()
    first: OpPair | None = None
    calls: list[CallDiff] = []
    for ca, cb in pairs:
        ops: list[OpPair] = []
        for x, y, status in _align_ops(groups_a.get(id(ca), []), groups_b.get(id(cb), [])):
            if status != "same":
                ops.append(OpPair(x, y, status))
                continue
            assert x is not None and y is not None
            error, departs, v = _results(a, x, b, y, rtol, atol)
            pair = OpPair(x, y, status, error, departs, v)
            via[v] += 1
            ops.append(pair)
            if departs and (first is None or x.index < first.a.index) and not _inputs_depart(a, x, b, y, rtol, atol):  # type: ignore[union-attr]
                first = pair
        error, cvia = 0.0, "none"
        if len(ca.outputs) == len(cb.outputs):
            for ra, rb in zip(ca.outputs, cb.outputs, strict=True):
                e, _, v = compare(a, ra, b, rb, rtol, atol)
                error = max(error, e)
                cvia = v if v != "none" else cvia
        calls.append(CallDiff(ca, cb, tuple(ops), error, cvia))  # type: ignore[arg-type]
    return Diff(a, b, tuple(calls), tuple(only_a), tuple(only_b), first, rtol, atol, dict(via))


def report(d: Diff, *, depth: int = 2, limit: int = 40) -> str:
    """The short report ``str(diff)`` prints: what was compared, the structure, the first departure, and
    the largest relative difference of each aligned call's outputs down to ``depth``."""
    via = ", ".join(f"{n} through {'kept tensors' if v == 'values' else 'stats' if v == 'stats' else 'nothing (no values)'}"
                    for v, n in sorted(d.via.items()))
    lines = [f"diff: a {len(d.a.ops)} ops, {len(d.a.calls)} calls; b {len(d.b.ops)} ops, {len(d.b.calls)} calls; "
             f"{sum(d.via.values())} op pairs aligned ({via or 'none'}); rtol={d.rtol:g} atol={d.atol:g}"]
    if not any(v != "none" for v in d.via):
        lines.append("values: neither side has values to compare (capture with values=\"stats\" or keep=; meta "
                     "tensors have none): structure only")
    structural = d.structural
    if structural:
        lines.append(f"structure: {len(structural)} differences")
        lines += [f"  {s}" for s in structural[:limit]]
        if len(structural) > limit:
            lines.append(f"  ... {len(structural) - limit} more (Diff.structural)")
    else:
        lines.append("structure: the same calls and ops")
    f = d.first
    if f is None:
        lines.append("values: agree within tolerance" if any(v != "none" for v in d.via) else "")
    else:
        assert f.a is not None and f.b is not None
        where = f.a.call.label + (f" [{f.a.phase}]" if f.a.phase != "forward" else "")
        src = f" at {f.b.source}" if f.b.source is not None else ""
        lines.append(f"first departure: %{f.a.name} / %{f.b.name} = {f.a.target} in {where}{src}: "
                     f"relative error {f.error:.3g} ({f.via})")
        sa = [d.a.stats.get(r.id) for r in f.a.outputs]
        sb = [d.b.stats.get(r.id) for r in f.b.outputs]
        if sa and sa[0] is not None and sb[0] is not None:
            lines.append(f"  a: {sa[0]}")
            lines.append(f"  b: {sb[0]}")
        if len(f.a.inputs) == len(f.b.inputs):
            for ra, rb in zip(f.a.inputs, f.b.inputs, strict=True):
                if ra.producer is None and compare(d.a, ra, d.b, rb, d.rtol, d.atol)[1]:
                    other = f" in a, {rb.text} in b" if rb.text != ra.text else ""
                    lines.append(f"  it reads {ra.text} ({ra.kind}){other}, which {'differ' if other else 'differs'} already")
    shown = [cd for cd in d.calls if cd.a.parent is not None and cd.a.depth <= depth and cd.via != "none"]
    if shown:
        lines.append(f"largest relative difference of each call's outputs (depth <= {depth}):")
        width = max(len(cd.label) for cd in shown[:limit])
        for cd in shown[:limit]:
            lines.append(f"  {'  ' * cd.a.depth}{cd.label:<{width}}  {cd.error:.3g}")
        if len(shown) > limit:
            lines.append(f"  ... {len(shown) - limit} more calls (Diff.calls)")
    return "\n".join(line for line in lines if line)
