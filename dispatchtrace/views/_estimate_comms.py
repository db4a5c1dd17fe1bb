"""The communication part of an estimate: each collective priced on the spec's links, and the step as a schedule.

``g.estimate(spec, ranks_per_node=8)`` prices each collective with ``hardware.collective_cost`` (its kind,
its group's global ranks and where they sit, the spec's ``intra_node`` and ``inter_node`` links, or the
ones given) and plays the step back on a compute stream and a stream per group (``views/_timeline.py``).
A collective whose group the capture could not read, or that needs a link the spec lacks, is a
``SpecError`` naming the op.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import SpecError
from ..hardware import CollectiveCost, Link, collective_cost, link_of
from ._collectives import Collective, collectives

if TYPE_CHECKING:
    from ..graph import Graph
    from ..hardware import DeviceSpec


@dataclass(frozen=True, slots=True, kw_only=True)
class Cluster:
    """Where ranks sit and what joins them: ``ranks_per_node`` and the two link levels an estimate prices
    collectives with (the spec's unless given)."""

    ranks_per_node: int
    intra_node: Link | None
    inter_node: Link | None


def cluster_of(spec: DeviceSpec, *, ranks_per_node: int | None = None, intra_node: Link | str | None = None,
               inter_node: Link | str | None = None) -> Cluster:
    """The cluster an estimate places collectives on: the spec's links and ranks per node, each overridable
    (a ``Link`` or a built-in interconnect's name such as ``"ib-ndr"``; an unknown name is a ``SpecError``)."""
    rpn = spec.ranks_per_node if ranks_per_node is None else ranks_per_node
    if isinstance(rpn, bool) or not isinstance(rpn, int) or rpn < 1:
        raise SpecError(f"ranks_per_node takes a whole number >= 1, not {rpn!r}")
    intra = spec.intra_node if intra_node is None else link_of(intra_node)
    inter = spec.inter_node if inter_node is None else link_of(inter_node)
    return Cluster(ranks_per_node=rpn, intra_node=intra, inter_node=inter)


def collective_size(c: Collective) -> int:
    """The whole buffer a collective's cost is of (``hardware.collective_cost``'s ``size``): an all-gather's output,
    a reduce-scatter's input, the larger side of anything else."""
    if c.kind == "all_gather":
        return c.received
    if c.kind == "reduce_scatter":
        return c.sent
    return max(c.sent, c.received)


def price_collectives(graph: Graph, cluster: Cluster,
                      found: Iterable[Collective] | None = None) -> dict[int, tuple[Collective, CollectiveCost]]:
    """Op index -> the collective there and its cost on ``cluster`` (``found``: the graph's collectives, when the
    caller has read them)."""
    out: dict[int, tuple[Collective, CollectiveCost]] = {}
    for c in collectives(graph) if found is None else found:
        if c.kind == "barrier" and c.group is None:
            continue
        if c.group is None:
            raise SpecError(f"%{c.op.name} ({c.kind}) has no process group the capture could read, so the estimate "
                            "cannot place its ranks; capture with torch.distributed initialised")
        peer = c.group.ranks[c.peer] if c.peer is not None and 0 <= c.peer < c.group.size else None
        try:
            cost = collective_cost(c.kind, collective_size(c), c.group.ranks, ranks_per_node=cluster.ranks_per_node,
                                   intra=cluster.intra_node, inter=cluster.inter_node, peer=peer, rank=c.group.rank)
        except SpecError as e:
            raise SpecError(f"%{c.op.name} ({c.kind} over {c.group}): {e}") from None
        out[c.op.index] = (c, cost)
    return out


def schedule_seconds(priced: dict[int, tuple[Collective, CollectiveCost]]) -> Callable[[Collective], float]:
    """The collective-time function a schedule takes, from the priced collectives."""
    return lambda c: priced[c.op.index][1].seconds if c.op.index in priced else 0.0
