"""Series-parallel decomposition of a small DAG: sequences, parallel branches and their joins."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Par:
    """Parallel paths between two nodes; ``skip`` marks a direct edge (a path with no nodes)."""

    branches: tuple[Series, ...]
    skip: bool = False

    @property
    def width(self) -> int:
        """How many paths join after this block (the skip path counts)."""
        return len(self.branches) + int(self.skip)


@dataclass(frozen=True, slots=True)
class Tangle:
    """Nodes whose flow is not series-parallel (a bridge, dense connections), in execution order.

    When the block sits between two nodes of a series, the last node is the one that joins it.
    """

    nodes: tuple[int, ...]


Item = int | Par | Tangle

#: parallel blocks nest at most this deep; deeper stretches are listed as a ``Tangle``
MAX_NESTING = 48
Series = tuple[Item, ...]


def decompose(n: int, edges: Iterable[tuple[int, int]], *, entry: Iterable[int] = (), exit: Iterable[int] = ()) -> Series:
    """Nodes ``0..n-1`` (a topological order) as a series of nodes and parallel blocks.

    ``edges`` go from a lower to a higher node; ``entry`` nodes also read the enclosing input,
    ``exit`` nodes are also read outside. Nodes fed only by nothing (weights, constants: no
    entry, no predecessor) are placed just before the node that first consumes them, or, when
    nothing consumes them, before the next node in execution order. The smallest stretch of
    the series that is not series-parallel becomes a ``Tangle`` listing its nodes in order.
A node read outside that also feeds the nodes after it (an encoder whose output is returned
and read by the decoder) makes no skip path to the end: nothing joins it.

    >>> decompose(4, [(0, 1), (2, 3), (1, 3)], entry=[0, 2])   # two paths joined at 3
    (Par(branches=((0, 1), (2,)), skip=False), 3)
    >>> decompose(3, [(0, 1), (1, 2)], entry=[0, 2])           # 0-1 with a skip, joined at 2
    (Par(branches=((0, 1),), skip=True), 2)
    >>> decompose(5, [(0, 1), (0, 2), (1, 2), (1, 3), (2, 3), (3, 4)], entry=[0])  # 0, a bridge joined at 3, 4
    (0, Tangle(nodes=(1, 2, 3)), 4)
    >>> decompose(2, [(0, 1)], entry=[0], exit=[0, 1])         # 0 is returned and read by 1
    (0, 1)
    """
    preds: list[set[int]] = [set() for _ in range(n)]
    succs: list[set[int]] = [set() for _ in range(n)]
    for a, b in edges:
        if a == b:
            continue
        if not 0 <= a < b < n:
            raise ValueError(f"edge {a}->{b} does not go forward in 0..{n - 1}; number nodes in execution order")
        preds[b].add(a)
        succs[a].add(b)
    ins, outs = set(entry), set(exit)
    free = [False] * n
    for v in range(n):
        free[v] = v not in ins and all(free[p] for p in preds[v])
    anchor = [n] * n  # n: the end of the top-level series
    following = n  # the first node after v that reads the input (directly or not)
    for v in range(n - 1, -1, -1):
        if free[v]:
            found = [s if not free[s] else anchor[s] for s in succs[v]]
            if found:
                anchor[v] = min(found)
            elif v in outs:  # read outside: a path of its own, as if fed by the entry
                free[v] = False
                ins.add(v)
            else:  # read by nobody (scratch buffers): stays where it ran
                anchor[v] = following
        if not free[v]:
            following = v
    keep = [v for v in range(n) if not free[v]]
    if not keep:
        return tuple(range(n))
    for v in keep:
        if not any(not free[p] for p in preds[v]):
            ins.add(v)
        if not any(not free[w] for w in succs[v]):
            outs.add(v)
    kpreds = {v: {p for p in preds[v] if not free[p]} for v in keep}
    ksuccs = {v: {s for s in succs[v] if not free[s]} for v in keep}
    body = _series(keep, kpreds, ksuccs, ins, outs)
    if body is None:
        body = (Tangle(tuple(keep)),)
    before: dict[int, list[int]] = {}
    for v in range(n):
        if free[v]:
            before.setdefault(anchor[v], []).append(v)
    return _place(body, before) + tuple(before.get(n, ()))


def _place(series: Series, before: dict[int, list[int]]) -> Series:
    out: list[Item] = []
    for item in series:
        if isinstance(item, Par):
            branches = sorted((_place(b, before) for b in item.branches), key=_first)
            out.append(Par(tuple(branches), item.skip))
        elif isinstance(item, Tangle):
            out.append(Tangle(tuple(w for v in item.nodes for w in (*before.get(v, ()), v))))
        else:
            out.extend(before.get(item, ()))
            out.append(item)
    return tuple(out)


def _first(series: Series) -> int:
    head = series[0]
    if isinstance(head, Tangle):
        return head.nodes[0]
    return head if isinstance(head, int) else min(_first(b) for b in head.branches)


def _series(nodes: list[int], preds: dict[int, set[int]], succs: dict[int, set[int]], ins: set[int], outs: set[int],
            level: int = 0) -> Series | None:
    if len(nodes) == 1:
        return (nodes[0],)
    inside = set(nodes)
    pos = {v: i for i, v in enumerate(nodes)}
    n = len(nodes)

    def from_src(v: int) -> bool:
        return v in ins or any(p not in inside for p in preds[v])

    def to_dst(v: int) -> bool:
        return v in outs or any(s not in inside for s in succs[v])

    # a node is on every source->sink path iff no edge jumps over it (diff array over positions)
    cover = [0] * (n + 2)
    for v in nodes:
        i = pos[v]
        spans = [(-1, i)] if from_src(v) else []
        spans += [(i, pos[s]) for s in succs[v] if s in inside]
        if to_dst(v):
            spans.append((i, n))
        for a, b in spans:
            if b - a > 1:
                cover[a + 2] += 1
                cover[b + 1] -= 1
    cuts, run = [], 0
    for i in range(n):
        run += cover[i + 1]
        if run == 0:
            cuts.append(nodes[i])
    if not cuts:
        return _parallel(nodes, preds, succs, ins, outs, skip=False, whole=True, level=level)
    out: list[Item] = []
    bounds: list[int | None] = [None, *cuts, None]
    for a, b in zip(bounds, bounds[1:], strict=False):
        lo = -1 if a is None else pos[a]
        hi = n if b is None else pos[b]
        seg = nodes[lo + 1 : hi]
        if seg:
            if a is not None and b is not None:
                skip = b in succs[a]
            elif b is not None:
                skip = from_src(b)
            else:  # after the last cut: a path on to the end only inside a branch (to its join);
                # at the top a node read outside and by the nodes after it is not a branch of its own
                skip = level > 0 and to_dst(a)  # type: ignore[arg-type]
            block = _parallel(seg, preds, succs, ins, outs, skip=skip, whole=False, level=level)
            if block is None:  # not series-parallel between a and b: list it, join included
                out.append(Tangle((*seg, *([] if b is None else [b]))))
                continue
            out.extend(block)
        if b is not None:
            out.append(b)
    return tuple(out)


def _parallel(seg: list[int], preds: dict[int, set[int]], succs: dict[int, set[int]], ins: set[int], outs: set[int], *,
              skip: bool, whole: bool, level: int) -> Series | None:
    comps = _components(seg, preds, succs)
    if len(comps) == 1 and not skip:
        return None if whole else _series(comps[0], preds, succs, ins, outs, level)
    if level >= MAX_NESTING:  # deeper nesting would not be readable (nor fit Python's stack)
        return None
    branches = []
    for comp in comps:
        sub = _series(comp, preds, succs, ins, outs, level + 1)
        if sub is None:
            if len(comps) == 1:  # one tangled path and a skip: list the stretch, join included
                return None
            sub = (Tangle(tuple(comp)),)
        branches.append(sub)
    return (Par(tuple(branches), skip),)


def _components(seg: list[int], preds: dict[int, set[int]], succs: dict[int, set[int]]) -> list[list[int]]:
    inside = set(seg)
    seen: set[int] = set()
    comps = []
    for start in seg:
        if start in seen:
            continue
        seen.add(start)
        stack, comp = [start], []
        while stack:
            v = stack.pop()
            comp.append(v)
            for w in preds[v] | succs[v]:
                if w in inside and w not in seen:
                    seen.add(w)
                    stack.append(w)
        comps.append(sorted(comp))
    return comps
