"""The first collective where ranks disagree: the usual cause of a distributed hang, found from their captures.

Ranks must issue the same collectives on each process group, in the same order, with the same
kind, reduce op, root, dtype and shapes. For every group some capture used, the collectives each
member rank issued on it are compared position by position; the earliest disagreement (by the
op index of the first rank that diverged) is reported with each rank's collective, call and source
line. Point-to-point ``send`` / ``recv`` are not compared (they pair up across ranks, not in step).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..graph import Graph, Group
from ._collectives import Collective, collectives

_P2P = frozenset({"send", "recv"})


@dataclass(frozen=True, slots=True)
class Side:
    """What one rank issued at the position where the ranks disagree (``None``: nothing more)."""

    rank: int
    collective: Collective | None

    def __str__(self) -> str:
        c = self.collective
        if c is None:
            return f"rank {self.rank}: nothing: it issued no more collectives on this group"
        where = ""
        if c.op.source is not None:
            s = c.op.source
            where = f"  {s.file}:{s.line} {s.text.strip()}"
        call = c.op.call
        if call.parent is None:
            at = "outside any module call"
        else:
            at = call.label if call.label == call.type else f"{call.label} ({call.type})"
        reduce = f" {c.reduce}" if c.reduce else ""
        return f"rank {self.rank}: %{c.op.name} {c.kind}{reduce} {c.shapes} in {at}{where}"


@dataclass(frozen=True, slots=True)
class CollectiveMismatch:
    """Where the ranks' collectives first differ: the group, the position on it (0-based), what differs."""

    group: Group
    position: int
    what: str
    sides: tuple[Side, ...]

    def __str__(self) -> str:
        head = (f"ranks disagree at collective {self.position} on {self.group} "
                f"(the {_ordinal(self.position + 1)} one issued on it): {self.what}")
        return "\n".join([head, *(f"  {s}" for s in self.sides)])


def _ordinal(n: int) -> str:
    """``1st``, ``2nd``, ``11th``.

    >>> [_ordinal(n) for n in (1, 2, 3, 4, 11, 12, 22)]
    ['1st', '2nd', '3rd', '4th', '11th', '12th', '22nd']
    """
    if 10 <= n % 100 <= 20:
        return f"{n}th"
    return f"{n}{({1: 'st', 2: 'nd', 3: 'rd'}).get(n % 10, 'th')}"


def agreement_key(c: Collective) -> tuple[object, ...]:
    """What must be equal for ranks to agree on a collective: kind, reduce op, root, dtypes, shapes."""
    dtypes = tuple(r.dtype for r in c.op.inputs)
    shapes = "" if c.kind == "all_to_all" else c.shapes  # uneven splits are legal
    return (c.kind, c.reduce, c.peer if c.kind in ("broadcast", "reduce", "gather", "scatter") else None, dtypes, shapes)


def _difference(a: Collective | None, b: Collective | None) -> str:
    if a is None or b is None:
        return "a rank issued fewer collectives (the others wait for it forever)"
    for name, x, y in (("kind", a.kind, b.kind), ("reduce op", a.reduce, b.reduce), ("root", a.peer, b.peer),
                       ("dtype", agreement_key(a)[3], agreement_key(b)[3]), ("shapes", a.shapes, b.shapes)):
        if x != y:
            return f"{name} differs ({x} vs {y})"
    return "they differ"


def sequences(ranks: Mapping[int, Graph]) -> list[tuple[Group, dict[int, list[Collective]]]]:
    """Each process group the captures of ``ranks`` used (in the order first met), with the collectives
    each of its member ranks present issued in it, in order (send and recv left out: they pair, not align)."""
    per_rank: dict[int, list[Collective]] = {r: [c for c in collectives(g) if c.kind not in _P2P and c.group is not None]
                                             for r, g in ranks.items()}
    groups: dict[tuple[str, tuple[int, ...]], Group] = {}
    for found in per_rank.values():
        for c in found:
            assert c.group is not None
            groups.setdefault((c.group.name, c.group.ranks), c.group)
    return [(group, {r: [c for c in per_rank[r] if c.group is not None and (c.group.name, c.group.ranks) == key]
                     for r in group.ranks if r in per_rank})
            for key, group in groups.items()]


def mismatch(ranks: Mapping[int, Graph]) -> CollectiveMismatch | None:
    """The first collective where the captures of ``ranks`` (``{rank: graph}``) disagree, or
    ``None`` when every group's member ranks issued the same collectives in the same order."""
    best: tuple[int, CollectiveMismatch] | None = None
    for group, seqs in sequences(ranks):
        if len(seqs) < 2:
            continue
        for i in range(max(len(s) for s in seqs.values())):
            at = {r: s[i] if i < len(s) else None for r, s in seqs.items()}
            keys = {r: None if c is None else agreement_key(c) for r, c in at.items()}
            if len(set(keys.values())) == 1:
                continue
            ref_rank = next(iter(at))
            other = next(r for r in at if keys[r] != keys[ref_rank])
            order = min((c.op.index for c in at.values() if c is not None), default=0)
            found = CollectiveMismatch(group, i, _difference(at[ref_rank], at[other]),
                             tuple(Side(r, c) for r, c in sorted(at.items())))
            if best is None or order < best[0]:
                best = (order, found)
            break
    return None if best is None else best[1]
