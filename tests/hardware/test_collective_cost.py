"""The collective cost model: ring and tree over two link levels, placed by ranks per node; errors for what cannot be placed."""

from __future__ import annotations

import math

import pytest

import dispatchtrace as dt
from dispatchtrace.hardware import PROTOCOLS, Link, collective_cost, link_of, nodes_of

SIMPLE = PROTOCOLS[0]

NV, IB = link_of("nvlink4"), link_of("ib-ndr")
GIB = float(1 << 30)


def cost(kind, size, ranks, **kw):
    return collective_cost(kind, size, ranks, ranks_per_node=kw.pop("rpn", 8), intra=kw.pop("intra", NV),
                           inter=kw.pop("inter", IB), **kw)


def test_large_all_reduce_in_a_node_is_the_ring_bandwidth_term():
    c = cost("all_reduce", GIB, range(8))
    assert (c.algorithm, c.protocol, c.nodes, c.bound_by) == ("ring", "simple", 1, "intra")
    bandwidth = 2 * 7 / 8 * GIB / NV.bandwidth
    assert bandwidth < c.seconds < bandwidth * 1.02  # and 14 steps of 3.4 us


def test_across_nodes_the_nic_bounds_it_and_more_nodes_cost_more_latency():
    one = cost("all_reduce", GIB, range(8))
    two = cost("all_reduce", GIB, range(16))
    assert two.bound_by == "inter" and two.nodes == 2
    assert two.seconds > 5 * one.seconds  # 50 GB/s NIC against 450 GB/s NVLink
    small8, small64 = cost("all_reduce", 1024, range(16)), cost("all_reduce", 1024, range(64))
    assert small64.seconds > small8.seconds


def test_tree_wins_small_all_reduces_on_many_nodes_and_ring_wins_large_ones():
    small, large = cost("all_reduce", 4096, range(256)), cost("all_reduce", GIB, range(256))
    assert (small.algorithm, small.protocol) == ("tree", "ll")
    assert (large.algorithm, large.protocol) == ("ring", "simple")
    assert cost("all_reduce", 16 << 20, range(8)).protocol == "ll128"  # mid-sized, inside a node
    assert cost("all_reduce", 16 << 20, range(16)).protocol != "ll128"  # never across nodes
    # the chosen algorithm is the faster of the two everywhere: the cost never rises when the buffer shrinks
    sizes = [2.0**k for k in range(6, 33)]
    times = [cost("all_reduce", s, range(256)).seconds for s in sizes]
    assert times == sorted(times)


def test_all_gather_and_reduce_scatter_move_n_minus_1_over_n_of_the_whole_buffer():
    for kind in ("all_gather", "reduce_scatter"):
        c = cost(kind, GIB, range(8))
        assert math.isclose(c.seconds - SIMPLE.base - 7 * NV.latency, 7 / 8 * GIB / NV.bandwidth, rel_tol=1e-9)


def test_tensor_parallel_group_inside_a_node_and_data_parallel_group_across_nodes():
    tp = cost("all_reduce", 64 << 20, range(8, 16))  # node 1, all NVLink
    dp = cost("all_reduce", 64 << 20, range(0, 64, 8))  # one rank on each of 8 nodes
    assert (tp.nodes, tp.bound_by) == (1, "intra") and (dp.nodes, dp.bound_by) == (8, "inter")
    assert dp.seconds > tp.seconds
    assert nodes_of(range(0, 64, 8), 8) == {n: 1 for n in range(8)}


def test_send_and_recv_take_the_link_between_the_two_ranks():
    near = cost("send", 1 << 20, range(16), rank=0, peer=1)
    far = cost("send", 1 << 20, range(16), rank=0, peer=9)
    assert (near.bound_by, far.bound_by) == ("intra", "inter")
    assert far.seconds > near.seconds


def test_all_to_all_splits_its_buffer_between_the_node_and_the_network():
    inside = cost("all_to_all", GIB, range(8))
    across = cost("all_to_all", GIB, range(16))
    assert across.seconds > inside.seconds
    steps = 7 * NV.latency + 8 * IB.latency  # on-node and off-node steps
    assert math.isclose(across.seconds - SIMPLE.base - steps, 8 / 16 * GIB / IB.bandwidth, rel_tol=1e-9)


def test_a_group_of_one_costs_nothing_and_a_barrier_only_latency():
    assert cost("all_reduce", GIB, [5]).seconds == 0.0
    b = cost("barrier", 0, range(8))
    assert 0 < b.seconds < 1e-4


def test_what_the_spec_cannot_place_is_said():
    with pytest.raises(dt.SpecError, match="spans 2 nodes, but the spec has no inter-node link"):
        cost("all_reduce", GIB, range(16), inter=None)
    with pytest.raises(dt.SpecError, match="no intra-node link"):
        cost("all_reduce", GIB, range(8), intra=None)
    with pytest.raises(dt.SpecError, match="no cost model for collective 'allreduce'"):
        cost("allreduce", GIB, range(8))
    with pytest.raises(dt.SpecError, match="did you mean 'nvlink4'"):
        link_of("nvlink-4")
    with pytest.raises(ValueError, match="bandwidth must be a positive"):
        Link(bandwidth=-1, latency=0)
