"""Longest-path layering of a diagram: each node's rank, the widest rank, and how far edges reach.

>>> layering(["a", "b", "c", "d"], [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d"), ("a", "d")])
Layering(ranks=3, width=2, crossing=3, span=6)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Layering:
    """``ranks``: how many ranks a top-down drawing needs; ``width``: nodes on the widest rank;
    ``crossing``: the same counting the edges that pass through a rank (``dot`` draws those as
    thin virtual nodes); ``span``: the edges' lengths in ranks added up."""

    ranks: int
    width: int
    crossing: int
    span: int


def layering(nodes: Sequence[str], edges: Iterable[tuple[str, str]]) -> Layering:
    """Rank each node one below its lowest predecessor (the longest path from a source), and a node
    with no predecessor just above its first successor, close to the ranks ``dot`` assigns; edges
    that go back in ``nodes`` order are ignored (there are none in a capture)."""
    order = {n: i for i, n in enumerate(nodes)}
    preds: dict[str, list[str]] = {n: [] for n in nodes}
    pairs = [(s, d) for s, d in edges if s in order and d in order and order[s] < order[d]]
    for s, d in pairs:
        preds[d].append(s)
    rank: dict[str, int] = {}
    for n in nodes:  # nodes come in execution order: every predecessor is ranked first
        rank[n] = 1 + max((rank[p] for p in preds[n]), default=-1)
    succs: dict[str, list[str]] = {}
    for s, d in pairs:
        succs.setdefault(s, []).append(d)
    for n in nodes:  # a source read later (a weight's ``aten::t``) sits just above its first reader, as dot puts it
        if not preds[n] and n in succs:
            rank[n] = max(0, min(rank[d] for d in succs[n]) - 1)
    if not rank:
        return Layering(0, 0, 0, 0)
    ranks = 1 + max(rank.values())
    load = [0] * (ranks + 1)
    for r in rank.values():
        load[r] += 1
    delta = [0] * (ranks + 1)  # edges passing through ranks strictly between their ends
    span = 0
    for s, d in pairs:
        a, b = rank[s], rank[d]
        span += b - a
        if b - a > 1:
            delta[a + 1] += 1
            delta[b] -= 1
    crossing, passing = 0, 0
    for r in range(ranks):
        passing += delta[r]
        crossing = max(crossing, load[r] + passing)
    return Layering(ranks, max(load), crossing, span)
