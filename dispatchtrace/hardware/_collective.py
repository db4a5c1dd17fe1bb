"""What one collective costs on a set of ranks placed on nodes: ring and tree, three protocols, two link levels, as NCCL picks.

An alpha-beta model in NCCL's own terms (``src/graph/tuning.cc``): a collective of ``n`` ranks takes
a number of steps (all-reduce ``2(n-1)``, all-gather and reduce-scatter ``n-1``), each paying one
link's per-step latency, plus a fixed start, and moves its algorithm's share of the buffer over the
slowest link it crosses. Ranks sit on nodes by ``rank // ranks_per_node``; a group inside one node
runs over ``intra`` (NVLink), a group across nodes is bounded by ``inter`` (the NIC of each GPU).

Each (algorithm, protocol) pair is priced and the fastest taken, as NCCL's tuner does: the ring moves
``2(n-1)/n`` of an all-reduce's buffer over ``2(n-1)`` steps; the tree (chains inside nodes, a binary
tree across them) moves twice the buffer at 92% of the link but pays ``2((k-1) + log2(m))`` steps for
``k`` ranks per node and ``m`` nodes. The protocols trade latency for bandwidth: Simple (the link's
full bandwidth, its per-step latency), LL128 (15/16 of the bandwidth, about half the latency; inside a
node only) and LL (half the bandwidth, a fifth of the latency), so small buffers go LL and large ones
Simple. ``docs/timeline.md`` holds ours against Inductor's ``comm_analysis.py``.

>>> from dispatchtrace.hardware import link_of
>>> nvlink, ib = link_of("nvlink4"), link_of("ib-ndr")
>>> c = collective_cost("all_reduce", 1 << 30, range(8), ranks_per_node=8, intra=nvlink, inter=ib)
>>> c.algorithm, c.protocol, c.nodes, round(c.seconds * 1e3, 2)   # 1 GiB over NVLink: 2 * 7/8 * 1 GiB / 450 GB/s
('ring', 'simple', 1, 4.23)
>>> c = collective_cost("all_reduce", 1 << 30, range(64), ranks_per_node=8, intra=nvlink, inter=ib)
>>> c.algorithm, c.nodes, c.bound_by, round(c.seconds * 1e3, 1)  # across 8 nodes the NIC (50 GB/s) bounds it
('ring', 8, 'inter', 42.9)
>>> small = collective_cost("all_reduce", 4096, range(64), ranks_per_node=8, intra=nvlink, inter=ib)
>>> small.algorithm, small.protocol
('tree', 'll')
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from ..errors import SpecError
from ._link import Link


@dataclass(frozen=True, slots=True)
class Protocol:
    """One NCCL protocol: its fixed start (``base``, seconds), the share of a link's per-step latency it pays
    (``latency``) and of its bandwidth it reaches (``bandwidth``), and whether it runs across nodes."""

    name: str
    base: float
    latency: float
    bandwidth: float
    across_nodes: bool = True


#: NCCL's protocols (tuning.cc: baseLat LL 6.6 / LL128 14 / Simple 8.4 us; hwLat LL and LL128 as shares of
#: Simple's, NVLink ring 0.6 and 1.9 of 3.4 us, NET 2.7 and 4.0 of 14 us; LL moves 8 bytes of data in 16,
#: LL128 120 in 128; LL128 left out across nodes, as Inductor's model leaves it out on InfiniBand)
PROTOCOLS = (
    Protocol("simple", 8.4e-6, 1.0, 1.0),
    Protocol("ll128", 14.0e-6, 0.55, 120 / 128, across_nodes=False),
    Protocol("ll", 6.6e-6, 0.18, 0.5),
)

#: the share of a link's bandwidth NCCL's tree all-reduce reaches (tuning.cc: ``busBw * 0.92`` for Tree/Simple)
TREE_EFFICIENCY = 0.92

KINDS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce", "gather", "scatter",
         "send", "recv", "barrier")


@dataclass(frozen=True, slots=True)
class CollectiveCost:
    """What one collective costs: ``seconds``, the ``algorithm`` (``ring``, ``tree``, ``pairwise``, ``p2p``,
    ``none`` for a group of one) and ``protocol`` (``simple``, ``ll128``, ``ll``) priced fastest, how many
    ``nodes`` its ranks span, and the link level that bounds its bandwidth (``intra`` or ``inter``)."""

    seconds: float
    algorithm: str
    protocol: str
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
    if kind in ("send", "recv"):
        pair = [rank, peer] if rank is not None and peer is not None else members[:2]
        m = len(nodes_of(pair, ranks_per_node)) if pair else 1
        link, level = _bottleneck(m, intra, inter, pair)
        simple = PROTOCOLS[0]
        return CollectiveCost(simple.base + link.latency + size / link.bandwidth, "p2p", "simple", m, level)
    n = len(members)
    if n <= 1:
        return CollectiveCost(0.0, "none", "none", 1, "intra")
    placed = nodes_of(members, ranks_per_node)
    m, k = len(placed), max(placed.values())  # nodes, ranks on the fullest node
    link, level = _bottleneck(m, intra, inter, members)
    step_intra = (intra or link).latency
    step_inter = (inter or link).latency if m > 1 else 0.0
    options: list[tuple[float, str, str]] = []
    for p in PROTOCOLS:
        if m > 1 and not p.across_nodes:
            continue
        bandwidth = link.bandwidth * p.bandwidth

        def steps(total: int, crossing: int, p: Protocol = p) -> float:
            return p.base + p.latency * ((total - crossing) * step_intra + crossing * step_inter)

        if kind in ("all_reduce", "barrier"):  # a barrier is an all-reduce of nothing: latency only
            nbytes = 0.0 if kind == "barrier" else size
            options.append((steps(2 * (n - 1), 2 * (m - 1)) + 2 * (n - 1) / n * nbytes / bandwidth, "ring", p.name))
            tree = p.base + 2 * p.latency * ((k - 1) * step_intra + math.ceil(math.log2(m)) * step_inter)
            options.append((tree + 2 * nbytes / (TREE_EFFICIENCY * bandwidth), "tree", p.name))
        elif kind in ("all_gather", "reduce_scatter", "gather", "scatter"):
            options.append((steps(n - 1, m - 1) + (n - 1) / n * size / bandwidth, "ring", p.name))
        elif kind in ("broadcast", "reduce"):  # pipelined ring: the buffer crosses each link once, in chunks
            options.append((steps(n - 1, m - 1) + size / bandwidth, "ring", p.name))
        else:  # all_to_all: 1/n of the buffer to every other rank, on-node over intra, off-node over inter at once
            local, remote = (k - 1) / n * size, (n - k) / n * size
            wire = max(local / ((intra or link).bandwidth * p.bandwidth),
                       remote / (inter.bandwidth * p.bandwidth) if inter is not None and m > 1 else 0.0)
            options.append((steps(n - 1, n - k) + wire, "pairwise", p.name))
    seconds, algorithm, protocol = min(options)
    return CollectiveCost(seconds, algorithm, protocol, m, level)


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


def _short(ranks: list[int]) -> str:
    if len(ranks) > 6 and ranks == list(range(ranks[0], ranks[0] + len(ranks))):
        return f"{ranks[0]}..{ranks[-1]}"
    return "[" + ", ".join(map(str, ranks[:6])) + (", ..." if len(ranks) > 6 else "") + "]"
