"""Estimates with collectives: each priced on the spec's links, the step a schedule (tensor parallelism on the fake group)."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn

import dispatchtrace as dt
from dispatchtrace.hardware import link_of


@pytest.fixture
def tp_mlp():
    """Rank 0 of 8 on the fake backend; a two-layer MLP sharded column-wise then row-wise (a blocking all-reduce)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=8)
    try:
        mesh = init_device_mesh("cpu", (8,), mesh_dim_names=("tp",))
        model = nn.Sequential(nn.Linear(1024, 4096, bias=False), nn.ReLU(), nn.Linear(4096, 1024, bias=False))
        parallelize_module(model, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
        x = torch.ones(64, 1024)
        with torch.no_grad(), dt.capture(model) as g:
            out = model(x) * 2  # the row-wise layer's output read at once: tensor parallelism's blocking all-reduce
        torch.ops._c10d_functional.wait_tensor(out)
        yield g
    finally:
        dist.destroy_process_group()


def test_a_tensor_parallel_all_reduce_is_priced_on_nvlink_and_blocks(tp_mlp):
    g = tp_mlp
    est = g.estimate("h100")
    (index, (c, cost)), = est.collectives.items()
    assert c.kind == "all_reduce" and c.group.ranks == tuple(range(8))
    assert (cost.nodes, cost.bound_by) == (1, "intra")
    op = g.ops[index]
    assert est.time(op) == pytest.approx(cost.seconds) and est.bound(op) == "communication"
    # blocking: nothing overlaps it, so the step is the sum and all of it is exposed, on the critical path
    assert est.communication == pytest.approx(cost.seconds)
    assert est.exposed == pytest.approx(cost.seconds) and est.overlap == pytest.approx(0.0)
    assert est.total == pytest.approx(sum(est.times))
    assert op in est.critical_path
    assert est.exposed_in(g.root) == pytest.approx(est.exposed)


def test_ranks_per_node_and_links_place_the_group(tp_mlp):
    g = tp_mlp
    inside = g.estimate("h100")
    across = g.estimate("h100", ranks_per_node=4)  # the 8 ranks now span 2 nodes: the NIC bounds the all-reduce
    (_, (_, cost)), = across.collectives.items()
    assert (cost.nodes, cost.bound_by) == (2, "inter")
    assert across.communication > inside.communication
    roce = g.estimate("h100", ranks_per_node=4, inter_node="eth-100")
    assert roce.communication > across.communication
    slow = g.estimate("h100", intra_node=dt.hardware.Link(name="slow", bandwidth=1e9, latency=1e-5))
    assert slow.communication > 10 * inside.communication


def test_what_cannot_be_placed_is_a_spec_error(tp_mlp):
    g = tp_mlp
    spec = dataclasses.replace(dt.DeviceSpec.named("h100"), inter_node=None)
    with pytest.raises(dt.SpecError, match=r"%all_reduce.*spans 2 nodes, but the spec has no inter-node link"):
        g.estimate(spec, ranks_per_node=4)
    with pytest.raises(dt.SpecError, match="did you mean 'ib-ndr'"):
        g.estimate("h100", inter_node="ib_ndr")
    with pytest.raises(dt.SpecError, match="ranks_per_node"):
        g.estimate("h100", ranks_per_node=0)
    assert link_of("nvlink4").bandwidth == 450e9


def test_a_capture_without_collectives_is_the_sum_of_its_ops():
    m = nn.Sequential(nn.Linear(64, 64), nn.ReLU())
    with dt.capture(m) as g:
        m(torch.ones(4, 64))
    est = g.estimate("a100-80gb")
    assert est.total == pytest.approx(sum(est.times))
    assert (est.communication, est.exposed, est.overlap) == (0.0, 0.0, 1.0)
    assert not est.collectives
