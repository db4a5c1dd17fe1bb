"""``diff``: two captures aligned call by call, then op by op inside each call, and where their values part."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from typing import Literal

from ..graph import Call, Graph, Op, Stats, TensorRef, itemsize
from ._compare import Via
from ._layouts import Layout, compare_sides, same_type
from ._layouts import shown as shown_values

Status = Literal["same", "changed", "added", "removed", "layout"]


@dataclass(frozen=True, slots=True)
class OpPair:
    """One op of ``a`` and one of ``b`` aligned (``same`` target and phase, or ``changed``), or an op of one
    side only (``removed``: ``b is None``; ``added``: ``a is None``; ``layout``: an op only a parallel job's
    side runs, its collectives, redistributions and views, no structural difference). ``error`` is the largest relative
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
    and ``error``, the largest relative difference of the call's outputs (``via`` what was compared,
    ``departs`` whether one of them is beyond tolerance)."""

    a: Call
    b: Call
    ops: tuple[OpPair, ...]
    error: float
    via: Via
    departs: bool = False

    @property
    def changed(self) -> tuple[OpPair, ...]:
        """The ops added, removed or changed in this call (not the ops a parallel layout adds)."""
        return tuple(p for p in self.ops if p.status not in ("same", "layout"))

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
    layout_a: Layout | None = None
    layout_b: Layout | None = None

    def side(self, which: str) -> Graph | Layout:
        """``"a"`` or ``"b"`` as the diff read it: a ``Graph``, or the ``Layout`` of a parallel job's ranks."""
        layout = self.layout_a if which == "a" else self.layout_b
        return (self.a if which == "a" else self.b) if layout is None else layout

    def shown(self, ra: TensorRef, rb: TensorRef) -> tuple[Stats | None, Stats | None]:
        """The stats each side shows of an aligned pair of tensors (a parallel job's: its full value's)."""
        if self.layout_a is None and self.layout_b is None:
            return self.a.stats.get(ra.id), self.b.stats.get(rb.id)
        return shown_values(self.side("a"), ra, self.side("b"), rb)

    @property
    def layout_ops(self) -> Counter[str]:
        """The ops only a parallel job's side runs (``status == "layout"``), by target."""
        return Counter((p.a or p.b).target.removeprefix("aten.") for cd in self.calls for p in cd.ops  # type: ignore[union-attr]
                       if p.status == "layout")

    @property
    def structural(self) -> tuple[str, ...]:
        """Each structural difference as one line: a call of one side only, a call whose module type changed,
        the ops added, removed or changed in a call."""
        lines = [f"call only in a: {c.label} ({c.type})" for c in self.only_a]
        lines += [f"call only in b: {c.label} ({c.type})" for c in self.only_b]
        for cd in self.calls:
            if not same_type(cd.a.type, cd.b.type):
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
    def counts(self) -> dict[str, int]:
        """What ``structural`` counts: ``calls`` (each line: a call of one side only, or a call whose ops differ)
        and the ops ``added``, ``removed`` and ``changed`` inside aligned calls."""
        out = {"calls": len(self.only_a) + len(self.only_b), "added": 0, "removed": 0, "changed": 0}
        for cd in self.calls:
            changed = cd.changed
            out["calls"] += bool(changed)
            for p in changed:
                out[p.status] += 1
        return out

    @property
    def cause(self) -> tuple[str, ...]:
        """Why ``first`` starts where it does, one line per reason (``departure``); empty when nothing departs."""
        return departure(self)

    @property
    def stats_only(self) -> bool:
        """Whether the values were compared through statistics only (no pair through kept tensors): a change
        that leaves min, max and norm (and the mean, where taken) within tolerance is not seen (``report`` says so)."""
        return self.via.get("stats", 0) > 0 and not self.via.get("values", 0)

    @property
    def agree(self) -> bool:
        """No structural difference (``structural`` is empty) and no value beyond tolerance."""
        return (self.first is None and not self.only_a and not self.only_b
                and not any(cd.changed or not same_type(cd.a.type, cd.b.type) for cd in self.calls))

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


_RANK = {"none": 0, "partial": 1, "stats": 2, "values": 3}


def _results(ga: Graph | Layout, a: Op, gb: Graph | Layout, b: Op, rtol: float, atol: float) -> tuple[float, bool, Via]:
    error, departs, via = 0.0, False, "none"
    outs_a, outs_b = (*a.outputs, *a.mutated), (*b.outputs, *b.mutated)
    if len(outs_a) != len(outs_b):
        return math.inf, True, "none"
    for ra, rb in zip(outs_a, outs_b, strict=True):
        e, d, v = compare_sides(ga, ra, gb, rb, rtol, atol)
        error, departs = max(error, e), departs or d
        if _RANK[v] > _RANK[via]:
            via = v
    return error, departs, via


def _inputs_depart(ga: Graph | Layout, a: Op, gb: Graph | Layout, b: Op, rtol: float, atol: float) -> bool:
    """Whether a tensor both ops read and an op of the capture made differs (a parameter or an input that
    differs is where a departure begins, not a carried one)."""
    if len(a.inputs) != len(b.inputs):
        return False
    for ra, rb in zip(a.inputs, b.inputs, strict=True):
        if ra.producer is not None and compare_sides(ga, ra, gb, rb, rtol, atol)[1]:
            return True
    return False


Side = Graph | Layout | Mapping[int, Graph]
"""One side of a diff: a capture, or a parallel job's captures, one per rank (``dt.load_ranks``)."""


def diff(a: Side, b: Side, *, rtol: float = 1e-5, atol: float = 1e-8) -> Diff:
    """Align ``b`` to ``a``: module calls by path and call index through the call tree, then the ops inside
    each aligned call by a sequence alignment of their targets (so a change in one call never misaligns
    another), and compare the results of each aligned op pair (kept tensors where both kept them, else
    statistics; captures without values give the structure only). Works on live and loaded captures.

    Either side may be a parallel job's ranks (``{rank: Graph}``, ``dt.load_ranks("tp.rank*.json")``): rank 0
    gives the structure, each value is made whole from the ranks' shards (``views/_layouts.py``), and the ops
    only the job runs (collectives, redistributions, views) are its ``layout`` ops, not structural differences.
    """
    la = (a if isinstance(a, Layout) else Layout(a)) if not isinstance(a, Graph) else None
    lb = (b if isinstance(b, Layout) else Layout(b)) if not isinstance(b, Graph) else None
    sa: Graph | Layout = a if la is None else la  # type: ignore[assignment]
    sb: Graph | Layout = b if lb is None else lb  # type: ignore[assignment]
    a = a if la is None else la.graph
    b = b if lb is None else lb.graph
    assert isinstance(a, Graph) and isinstance(b, Graph)
    extra = "added" if lb is not None and la is None else "removed" if la is not None and lb is None else None
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
                ops.append(OpPair(x, y, "layout" if status == extra else status))
                continue
            assert x is not None and y is not None
            error, departs, v = _results(sa, x, sb, y, rtol, atol)
            pair = OpPair(x, y, status, error, departs, v)
            via[v] += 1
            ops.append(pair)
            if departs and (first is None or x.index < first.a.index) and not _inputs_depart(sa, x, sb, y, rtol, atol):  # type: ignore[union-attr]
                first = pair
        error, cvia, cdeparts = 0.0, "none", False
        if len(ca.outputs) == len(cb.outputs):
            for ra, rb in zip(ca.outputs, cb.outputs, strict=True):
                e, dep, v = compare_sides(sa, ra, sb, rb, rtol, atol)
                error, cdeparts = max(error, e), cdeparts or dep
                cvia = v if v != "none" else cvia
        calls.append(CallDiff(ca, cb, tuple(ops), error, cvia, cdeparts))  # type: ignore[arg-type]
    return Diff(a, b, tuple(calls), tuple(only_a), tuple(only_b), first, rtol, atol, dict(via), la, lb)


STATS_ONLY = ("compared through statistics only (min, max, norm, the mean where taken): a change that leaves them "
              "within tolerance (one element scaled by 1.001) is not seen; capture with keep= to compare the values themselves")


def departure(d: Diff) -> tuple[str, ...]:
    """Why the first departure starts where it does, one line per reason: the inputs the capture did not make
    that differ already (a parameter, an input), the casts to a lower precision only ``b`` (or ``a``) runs
    (autocast's), or that its inputs agree. Empty when nothing departs.

    >>> diff(Graph(), Graph()).cause
    ()
    """
    f = d.first
    if f is None or f.a is None or f.b is None:
        return ()
    if len(f.a.inputs) != len(f.b.inputs):
        return (f"its inputs differ in number ({len(f.a.inputs)} in a, {len(f.b.inputs)} in b)",)
    lines: list[str] = []
    for ra, rb in zip(f.a.inputs, f.b.inputs, strict=True):
        cast = _cast("b", rb, ra) or _cast("a", ra, rb)
        if cast is not None:
            lines.append(cast)
        elif (ra.producer is None or rb.producer is None) and compare_sides(d.side("a"), ra, d.side("b"), rb, d.rtol, d.atol)[1]:
            other = f" in a, {rb.text} in b" if rb.text != ra.text else ""
            kind = ra.kind if ra.producer is None else rb.kind
            lines.append(f"it reads {ra.text} ({kind}){other}, which {'differ' if other else 'differs'} already")
    if not lines:
        lines.append("its inputs agree" if f.a.inputs else "it reads no tensor")
    return tuple(lines)


def _cast(side: str, r: TensorRef, other: TensorRef) -> str | None:
    """A line when ``r`` (of ``side``) is a cast to a lower float precision and ``other`` (the other side's
    tensor in its place) is no such cast: the casts autocast adds before a matmul or a convolution."""
    op = r.producer
    if op is None or op.target != "aten._to_copy.default" or not op.inputs:
        return None
    if other.producer is not None and other.producer.target == op.target:
        return None
    src = op.inputs[0]
    narrow, wide = itemsize(r.dtype), itemsize(src.dtype)
    if not (r.dtype.startswith(("float", "bfloat")) and src.dtype.startswith("float")) or not narrow or not wide \
            or narrow >= wide:
        return None
    o = "a" if side == "b" else "b"
    cast = f"{src.shape_text.split('[')[0]} to {r.shape_text.split('[')[0]}"
    uncast = "it uncast" if other.text == src.text else f"{other.text}"
    return (f"it reads {r.text} in {side}, {src.text} cast from {cast}, where {o} reads {uncast}: the departure starts "
            "at a cast to a lower precision, as autocast adds")


_VIA = {"values": "kept tensors", "stats": "stats", "none": "nothing (no values)",
        "partial": "nothing (partial sums on the ranks)"}


def report(d: Diff, *, depth: int = 2, limit: int = 40) -> str:
    """The short report ``str(diff)`` prints: what was compared, the structure, the first departure, and
    the largest relative difference of each aligned call's outputs down to ``depth``."""
    via = ", ".join(f"{n} through {_VIA[v]}" for v, n in sorted(d.via.items()))

    def side(g: Graph, layout: Layout | None) -> str:
        each = "" if layout is None else f" on each of {len(layout.ranks)} ranks"
        return f"{len(g.ops)} ops, {len(g.calls)} calls{each}"

    lines = [f"diff: a {side(d.a, d.layout_a)}; b {side(d.b, d.layout_b)}; "
             f"{sum(d.via.values())} op pairs aligned ({via or 'none'}); rtol={d.rtol:g} atol={d.atol:g}"]
    if not any(v != "none" for v in d.via):
        lines.append("values: neither side has values to compare (capture with values=\"stats\" or keep=; meta "
                     "tensors have none): structure only")
    structural = d.structural
    if structural:
        n = d.counts
        ops = ", ".join(f"{n[k]} op{'s' if n[k] > 1 else ''} {k}" for k in ("added", "removed", "changed") if n[k])
        lines.append(f"structure: {n['calls']} call{'s differ' if n['calls'] > 1 else ' differs'}" + (f" ({ops})" if ops else ""))
        lines += [f"  {s}" for s in structural[:limit]]
        if len(structural) > limit:
            lines.append(f"  ... {len(structural) - limit} more (Diff.structural)")
    else:
        lines.append("structure: the same calls and ops")
    if d.layout_a is not None or d.layout_b is not None:
        ops = d.layout_ops
        parts = [f"{t}" + (f" x{n}" if n > 1 else "") for t, n in ops.most_common()]
        lines.append(f"layout: {sum(ops.values())} ops only the ranks run (collectives, redistributions, views), not "
                     f"compared: {', '.join(parts[:12]) + (', ...' if len(parts) > 12 else '') if parts else 'none'}")
        if d.via.get("partial"):
            n = d.via["partial"]
            lines.append(f"  {n} op pair{'s were' if n > 1 else ' was'} not compared: on the ranks the result is a partial "
                         "sum (P(sum)), whose full value no statistic of the ranks' gives; the op after the reduction is compared")
    f = d.first
    if f is None:
        lines.append("values: agree within tolerance" if any(v != "none" for v in d.via) else "")
    else:
        assert f.a is not None and f.b is not None
        where = f.a.call.label + (f" [{f.a.phase}]" if f.a.phase != "forward" else "")
        src = f" at {f.b.source}" if f.b.source is not None else ""
        lines.append(f"first departure: %{f.a.name} / %{f.b.name} = {f.a.target} in {where}{src}: "
                     f"relative error {f.error:.3g} ({f.via})")
        if f.a.outputs and f.b.outputs:
            sa, sb = d.shown(f.a.outputs[0], f.b.outputs[0])
            if sa is not None and sb is not None:
                lines.append(f"  a: {sa}")
                lines.append(f"  b: {sb}")
        lines += [f"  {line}" for line in d.cause]
    if d.via.get("stats"):
        n = d.via["stats"]
        lines.append(f"note: {'the values were' if d.stats_only else f'{n} op pairs were'} {STATS_ONLY}")
    shown = [cd for cd in d.calls if cd.a.parent is not None and cd.a.depth <= depth and cd.via != "none"]
    if shown:
        lines.append(f"largest relative difference of each call's outputs (depth <= {depth}):")
        width = max(len(cd.label) for cd in shown[:limit])
        for cd in shown[:limit]:
            lines.append(f"  {'  ' * cd.a.depth}{cd.label:<{width}}  {cd.error:.3g}")
        if len(shown) > limit:
            lines.append(f"  ... {len(shown) - limit} more calls (Diff.calls)")
    return "\n".join(line for line in lines if line)
