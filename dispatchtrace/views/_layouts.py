"""One side of a diff that is a parallel job: each value's full stats combined from the ranks' shards.

``dt.diff(single, dt.load_ranks("tp.rank*.json"))`` aligns one device's capture with a tensor-parallel
(DTensor) or FSDP2 job's. Rank 0's capture gives the structure (calls, ops); the value of a tensor is
read on every rank, at the same place (the same op, the same result or argument), and made whole:

- a DTensor op's result, by its placements (``op.dtensor``): shards combined (min of mins, max of maxes,
  sums of squares for the norm, of sums for the mean where taken, NaN / Inf / zero counts summed), a replicated mesh
  dimension taken once (its rank at coordinate 0), a partial one (``P(sum)``) not combined: its full value
  is the sum of the ranks' values, which no statistic of theirs gives;
- any other tensor, by its shape against the other side's: the ranks' shapes equal to it, each rank ran it
  whole and each is compared; shapes that concatenate to it along one dimension, shards combined.

>>> from ..graph import Stats
>>> combine([Stats(2, 0, 0, 0, 0, 1.0, 2.0, 1.5, 5 ** 0.5), Stats(2, 1, 0, 0, 1, 0.0, 0.0, 0.0, 0.0)])
Stats(numel=4, nan=1, posinf=0, neginf=0, zeros=1, min=0.0, max=2.0, mean=1.0, norm=2.23606797749979, fingerprint=None)
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from ..graph import Graph, Stats, TensorRef
from ._compare import Via, compare, compare_stats

How = Literal["whole", "shards", "partial", "shape"]
"""How a layout's value was made: each rank's whole, shards combined, a partial sum (not comparable), or no
way to make the other side's shape of it."""

_SHAPE = re.compile(r"\[([^\]]*)\]")


@dataclass(frozen=True, slots=True)
class Full:
    """A value as a diff compares it: ``stats`` (one per rank for ``"whole"``, one combined for ``"shards"``),
    its full ``shape``, and ``how`` it was made."""

    how: How
    stats: tuple[Stats | None, ...]
    shape: tuple[int | str, ...]


def combine(parts: list[Stats]) -> Stats:
    """The stats of a tensor from those of its disjoint shards (their elements together, each counted once;
    zeros and the mean where every shard has them; no fingerprint: a hash of the whole is no combination of the
    parts')."""
    finite = [(s, s.numel - s.nonfinite) for s in parts if s.min is not None]
    n = sum(k for _, k in finite)
    return Stats(
        numel=sum(s.numel for s in parts), nan=sum(s.nan for s in parts), posinf=sum(s.posinf for s in parts),
        neginf=sum(s.neginf for s in parts),
        zeros=None if any(s.zeros is None for s in parts) else sum(s.zeros for s in parts),  # type: ignore[misc]
        min=min((s.min for s, _ in finite), default=None),  # type: ignore[type-var]
        max=max((s.max for s, _ in finite), default=None),  # type: ignore[type-var]
        mean=sum((s.mean or 0.0) * k for s, k in finite) / n if n and all(s.mean is not None for s, _ in finite) else None,
        norm=math.sqrt(sum((s.norm or 0.0) ** 2 for s, _ in finite)) if finite else None)


class Layout:
    """The captures of one job's ranks (``{rank: Graph}``, as ``dt.load_ranks`` returns them), as one side of
    ``dt.diff``. Every rank must have run the same ops (a ``ValueError`` names the first that differs)."""

    def __init__(self, ranks: Mapping[int, Graph]) -> None:
        if not ranks:
            raise ValueError("no rank to diff: pass {rank: Graph}, as dt.load_ranks('trace.rank*.json') returns")
        self.ranks = dict(sorted(ranks.items()))
        self.graph = next(iter(self.ranks.values()))
        """Rank 0's capture (the lowest rank's): the structure the diff aligns."""
        ops = self.graph.ops
        for rank, g in self.ranks.items():
            if len(g.ops) != len(ops) or any(x.target != y.target for x, y in zip(g.ops, ops, strict=False)):
                k = next((i for i, (x, y) in enumerate(zip(g.ops, ops, strict=False)) if x.target != y.target),
                         min(len(g.ops), len(ops)))
                what = f"%{ops[k].name} ({ops[k].target})" if k < len(ops) else "its end"
                raise ValueError(f"rank {rank} ran other ops than rank {next(iter(self.ranks))} from op {k}, {what}: "
                                 "a layout diff needs every rank to run one program (dt.mismatch finds where they part)")
        self._keys: dict[int, tuple[str, int, int]] = {}  # ref id (rank 0) -> where it is read or made
        self._at: list[dict[tuple[str, int, int], TensorRef]] = []  # per rank: that place -> the rank's ref
        for g in self.ranks.values():
            at: dict[tuple[str, int, int], TensorRef] = {}
            for op in g.ops:
                for k, r in enumerate((*op.outputs, *op.mutated)):
                    at[("out", op.index, k)] = r
                for k, r in enumerate(op.inputs):
                    at[("in", op.index, k)] = r
            self._at.append(at)
        for op in reversed(ops):  # the first place each ref is seen wins
            for k, r in enumerate(op.inputs):
                self._keys[r.id] = ("in", op.index, k)
            for k, r in enumerate((*op.outputs, *op.mutated)):
                self._keys[r.id] = ("out", op.index, k)

    def __repr__(self) -> str:
        return f"Layout(ranks {list(self.ranks)}, {len(self.graph.ops)} ops each)"

    def peers(self, ref: TensorRef) -> list[TensorRef | None]:
        """``ref`` of rank 0 on each rank (``None`` where it cannot be placed: a tensor no op reads or makes)."""
        key = self._keys.get(ref.id)
        return [ref if i == 0 else None for i in range(len(self._at))] if key is None else [at.get(key) for at in self._at]

    def placements(self, ref: TensorRef) -> tuple[tuple[int | str, ...], tuple[str, ...]] | None:
        """The global shape and placements of ``ref`` when it is a DTensor op's result (``"S(1)"``, ``"R"``,
        ``"P(sum)"``, one per mesh dimension), else ``None``."""
        op = ref.producer
        d = None if op is None else op.dtensor
        if d is None or op is None or op.target != d.target or ref.slot >= len(d.outputs):
            return None
        if all(o.id != ref.id for o in op.outputs):
            return None
        text = d.outputs[ref.slot]
        label, _, places = text.rpartition(" ")
        found = _SHAPE.search(label)
        if found is None:
            return None
        shape = tuple(int(x) for x in found.group(1).split(",") if x.strip())
        return shape, tuple(places.split(","))

    def full(self, ref: TensorRef, other: tuple[int | str, ...] | None) -> Full:
        """The value of ``ref`` (rank 0's) on the whole job; ``other`` is the other side's shape of it."""
        peers = self.peers(ref)
        stats = [None if r is None else g.stats.get(r.id) for r, g in zip(peers, self.ranks.values(), strict=True)]
        placed = self.placements(ref)
        if placed is not None:
            shape, places = placed
            if any(p.startswith("P(") for p in places):
                return Full("partial", (), shape)
            d = ref.producer.dtensor  # type: ignore[union-attr]
            chosen = self._chosen(d.mesh, d.ranks, places)  # type: ignore[union-attr]
            parts = [stats[i] for i in chosen]
            if not parts or any(s is None for s in parts):
                return Full("shards", (None,), shape)
            if all(p == "R" for p in places):
                return Full("whole", tuple(stats), shape)
            return Full("shards", (combine(parts),), shape)  # type: ignore[arg-type]
        shapes = [r.shape if r is not None else None for r in peers]
        if other is None or all(s == other for s in shapes):
            return Full("whole", tuple(stats), ref.shape)
        dim = _concat_dim(shapes, other)
        if dim is None:
            return Full("shape", (), ref.shape)
        if any(s is None for s in stats):
            return Full("shards", (None,), other)
        return Full("shards", (combine(stats),), other)  # type: ignore[arg-type]

    def _chosen(self, mesh: tuple[int, ...], ranks: tuple[int, ...], places: tuple[str, ...]) -> list[int]:
        """Positions (in ``self.ranks``) of the ranks that hold distinct shards: coordinate 0 on each replicated
        mesh dimension, every coordinate on a sharded one."""
        order = list(self.ranks)
        out = []
        for flat, rank in enumerate(ranks):
            coords, rest = [], flat
            for size in reversed(mesh):
                coords.append(rest % size)
                rest //= size
            coords.reverse()
            if all(c == 0 for c, p in zip(coords, places, strict=False) if p == "R"):
                if rank not in self.ranks:
                    return []
                out.append(order.index(rank))
        return out


def _concat_dim(shapes: list[tuple[int | str, ...] | None], full: tuple[int | str, ...]) -> int | None:
    """The dimension along which ``shapes`` concatenate to ``full`` (the others equal), else ``None``."""
    if not shapes or any(s is None or len(s) != len(full) for s in shapes):
        return None
    for d in range(len(full)):
        if all(all(s[k] == full[k] for k in range(len(full)) if k != d) for s in shapes):  # type: ignore[index]
            sizes = [s[d] for s in shapes]  # type: ignore[index]
            if all(isinstance(x, int) for x in sizes) and sum(sizes) == full[d]:  # type: ignore[arg-type]
                return d
    return None


def _value(side: Graph | Layout, ref: TensorRef, other: tuple[int | str, ...] | None) -> Full:
    if isinstance(side, Layout):
        return side.full(ref, other)
    return Full("whole", (side.stats.get(ref.id),), ref.shape)


def _own(side: Graph | Layout, ref: TensorRef) -> tuple[int | str, ...] | None:
    """The full shape of ``ref`` as its own side tells it (``None``: a layout's tensor that is no DTensor result)."""
    if isinstance(side, Layout):
        placed = side.placements(ref)
        return None if placed is None else placed[0]
    return ref.shape


def values(a: Graph | Layout, ra: TensorRef, b: Graph | Layout, rb: TensorRef) -> tuple[Full, Full]:
    """Both sides' values of an aligned pair of tensors, each made whole against the other's shape."""
    oa, ob = _own(a, ra), _own(b, rb)
    fa = _value(a, ra, ob)
    return fa, _value(b, rb, oa if oa is not None else (fa.shape if fa.how != "whole" else None))


def compare_sides(a: Graph | Layout, ra: TensorRef, b: Graph | Layout, rb: TensorRef, rtol: float,
                  atol: float) -> tuple[float, bool, Via]:
    """``compare`` where either side may be a ``Layout``: through the full values' statistics (a partial sum:
    ``"partial"``, not compared; each rank that ran a value whole is compared, the worst kept)."""
    if not isinstance(a, Layout) and not isinstance(b, Layout):
        return compare(a, ra, b, rb, rtol, atol)
    fa, fb = values(a, ra, b, rb)
    if "partial" in (fa.how, fb.how):
        return 0.0, False, "partial"
    if "shape" in (fa.how, fb.how) or fa.shape != fb.shape:
        return math.inf, True, "none"
    sa, sb = fa.stats, fb.stats
    n = max(len(sa), len(sb))
    sa, sb = (sa * n if len(sa) == 1 else sa), (sb * n if len(sb) == 1 else sb)
    if any(s is None for s in (*sa, *sb)):
        return 0.0, False, "none"
    error, departs = 0.0, False
    for x, y in zip(sa, sb, strict=False):
        e, d = compare_stats(x, y, rtol, atol)  # type: ignore[arg-type]
        error, departs = max(error, e), departs or d
    return error, departs, "stats"


def shown(a: Graph | Layout, ra: TensorRef, b: Graph | Layout, rb: TensorRef) -> tuple[Stats | None, Stats | None]:
    """What a report shows of an aligned pair: each side's full value's stats (a layout's first rank's where
    each ran it whole; ``None`` for a partial sum)."""
    fa, fb = values(a, ra, b, rb)
    return (fa.stats[0] if fa.stats else None), (fb.stats[0] if fb.stats else None)



def same_type(a: str, b: str) -> bool:
    """Whether two calls' module types are the same module's: equal, or one the class FSDP2's ``fully_shard`` made of
    the other (``FSDPBlock`` for ``Block``: the layout's, not the model's).

    >>> same_type("Block", "FSDPBlock"), same_type("Linear", "Conv2d")
    (True, False)
    """
    return a == b or a == f"FSDP{b}" or b == f"FSDP{a}"
