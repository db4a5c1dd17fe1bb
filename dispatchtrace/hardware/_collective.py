"""What one collective costs on a set of ranks placed on nodes: ring and tree models over two link levels, as NCCL picks by size.

An alpha-beta model in NCCL's own terms (``src/graph/tuning.cc``): a collective of ``n`` ranks takes
a number of steps (all-reduce ``2(n-1)``, all-gather and reduce-scatter ``n-1``), each paying one
link's latency, and moves its algorithm's share of the buffer over the slowest link it crosses. Ranks
sit on nodes by ``rank // ranks_per_node``; a group inside one node runs over ``intra`` (NVLink), a
group across nodes is limited by ``inter`` (the NIC of each GPU). For an all-reduce both NCCL
algorithms are priced and the faster taken: the ring moves ``2(n-1)/n`` of the buffer and pays ``2(n-1)``
steps; the tree (chains inside nodes, a binary tree across them) moves twice the buffer at 92% of the
link (NCCL's own factor) but pays
``2((k-1) + log2(m))`` steps for ``k`` ranks per node and ``m`` nodes, so it wins for small buffers on many
nodes. ``docs/time.md`` says where this agrees with Inductor's ``comm_analysis.py`` and where not.

>>> from dispatchtrace.hardware import link_of
>>> nvlink, ib = link_of("nvlink4"), link_of("ib-ndr")
>>> c = collective_cost("all_reduce", 1 << 30, range(8), ranks_per_node=8, intra=nvlink, inter=ib)
>>> c.algorithm, c.nodes, round(c.seconds * 1e3, 3)     # 1 GiB over NVLink: 2 * 7/8 * 1 GiB / 450 GB/s
('ring', 1, 4.212)
>>> c = collective_cost("all_reduce", 1 << 30, range(64), ranks_per_node=8, intra=nvlink, inter=ib)
>>> c.algorithm, c.nodes, round(c.seconds * 1e3, 1)     # across 8 nodes the NIC (50 GB/s) bounds it
('ring', 8, 42.6)
>>> collective_cost("all_reduce", 4096, range(64), ranks_per_node=8, intra=nvlink, inter=ib).algorithm
'tree'
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from ..errors import SpecError
from ._link import Link

#: NCCL's fixed cost of one collective before any step (tuning.cc's baseLat, Simple protocol: 8.4 us)
BASE_LATENCY = 8.4e-6

#: the share of a link's bandwidth NCCL's tree all-reduce reaches (tuning.cc: ``busBw * 0.92`` for Tree/Simple)
TREE_EFFICIENCY = 0.92

KINDS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce", "gather", "scatter",
         "send", "recv", "barrier")


@dataclass(frozen=True, slots=True)
class CollectiveCost:
    """What one collective costs: ``seconds``, the ``algorithm`` priced (``ring``, ``tree``, ``pairwise``,
    ``p2p``, ``none`` for a group of one), how many ``nodes`` its ranks span, and the link level that
    bounds its bandwidth (``intra`` or ``inter``)."""

    seconds: float
    algorithm: str
    nodes: int
    bound_by: str


def nodes_of(ranks: Iterable[int], ranks_per_node: int) -> dict[int, int]:
    """Node -> how many of ``ranks`` sit on it (global rank ``r`` is on node ``r // ranks_per_node``).

    >>> nodes_of([0, 1, 8, 9, 10], 8)
    {0: 2, 1: 3}
    """
    out: dict[int, int] = {}
    for r in ranks:
        node = int(r) // ranks_per_node
        out[node] = out.get(node, 0) + 1
    return out


def collective_cost(kind: str, size: float, ranks: Iterable[int], *, ranks_per_node: int, intra: Link | None,
                    inter: Link | None, peer: int | None = None, rank: int | None = None) -> CollectiveCost:
    """The cost of one collective of ``kind`` over the global ``ranks`` of its group.

    ``size`` is the collective's whole buffer in bytes: an all-reduce's tensor, an all-gather's output
    (every rank's part), a reduce-scatter's input, an all-to-all's or a gather's buffer on one rank,
    a broadcast's tensor, a send's message. ``peer`` and ``rank`` (global ranks) place a send or recv.
    A group that needs a link level the spec has none of is a ``SpecError`` naming the level.
    """
    if kind not in KINDS:
        raise SpecError(f"no cost model for collective {kind!r} (known: {', '.join(KINDS)})")
    if ranks_per_node < 1:
        raise SpecError(f"ranks_per_node must be 1 or more, not {ranks_per_node!r}")
    members = list(ranks)
    n = len(members)
    if kind in ("send", "recv"):
        if rank is None or peer is None:
            return _p2p(size, intra, inter, ranks_per_node, members[:2] if n >= 2 else members)
        return _p2p(size, intra, inter, ranks_per_node, [rank, peer])
    if n <= 1:
        return CollectiveCost(0.0, "none", 1, "intra")
    placed = nodes_of(members, ranks_per_node)
    m = len(placed)
    k = max(placed.values())  # ranks on the fullest node
    link, level = _bottleneck(m, intra, inter, members)
    lat_intra = (intra or link).latency
    lat_inter = (inter or link).latency if m > 1 else 0.0

    def ring(steps: int, inter_steps: int, nbytes: float) -> float:
        return BASE_LATENCY + (steps - inter_steps) * lat_intra + inter_steps * lat_inter + nbytes / link.bandwidth

    if kind == "all_reduce" or kind == "barrier":  # a barrier is an all-reduce of nothing: latency only
        nbytes = 0.0 if kind == "barrier" else size
        by_ring = ring(2 * (n - 1), 2 * (m - 1), 2 * (n - 1) / n * nbytes)
        by_tree = BASE_LATENCY + 2 * ((k - 1) * lat_intra + math.ceil(math.log2(m)) * lat_inter)
        by_tree += 2 * nbytes / (TREE_EFFICIENCY * link.bandwidth)
        if by_tree < by_ring:
            return CollectiveCost(by_tree, "tree", m, level)
        return CollectiveCost(by_ring, "ring", m, level)
    if kind in ("all_gather", "reduce_scatter", "gather", "scatter"):
        return CollectiveCost(ring(n - 1, m - 1, (n - 1) / n * size), "ring", m, level)
    if kind in ("broadcast", "reduce"):  # pipelined ring: the buffer crosses each link once, in chunks
        return CollectiveCost(ring(n - 1, m - 1, size), "ring", m, level)
    # all_to_all: each rank sends 1/n of its buffer to every other rank, the on-node part over intra and the
    # off-node part over inter at the same time
    local, remote = (k - 1) / n * size, (n - k) / n * size
    seconds = BASE_LATENCY + (n - 1) * max(lat_intra, lat_inter)
    seconds += max(local / (intra or link).bandwidth, remote / inter.bandwidth if inter is not None and m > 1 else 0.0)
    return CollectiveCost(seconds, "pairwise", m, level)


def _bottleneck(m: int, intra: Link | None, inter: Link | None, ranks: list[int]) -> tuple[Link, str]:
    if m > 1:
        if inter is None:
            raise SpecError(f"a collective over ranks {_short(ranks)} spans {m} nodes, but the spec has no inter-node "
                            "link: give inter_node (a Link or a name such as 'ib-ndr') or a larger ranks_per_node")
        return inter, "inter"
    if intra is None:
        raise SpecError(f"a collective over ranks {_short(ranks)} runs inside one node, but the spec has no intra-node "
                        "link: give intra_node (a Link or a name such as 'nvlink4')")
    return intra, "intra"


def _p2p(size: float, intra: Link | None, inter: Link | None, ranks_per_node: int, pair: list[int]) -> CollectiveCost:
    m = len(nodes_of(pair, ranks_per_node)) if pair else 1
    link, level = _bottleneck(m, intra, inter, pair)
    return CollectiveCost(BASE_LATENCY + link.latency + size / link.bandwidth, "p2p", m, level)


def _short(ranks: list[int]) -> str:
    if len(ranks) > 6 and ranks == list(range(ranks[0], ranks[0] + len(ranks))):
        return f"{ranks[0]}..{ranks[-1]}"
    return "[" + ", ".join(map(str, ranks[:6])) + (", ..." if len(ranks) > 6 else "") + "]"
