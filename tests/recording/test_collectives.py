"""Collectives as ops, on PyTorch's fake process group (world size 64, one process): what each records."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as fc

import dispatchtrace as dt
from dispatchtrace._torch import reduce_op_readable
from dispatchtrace.graph import Group
from dispatchtrace.serialize import dumps, loads


@pytest.fixture
def world():
    """Rank 3 of 64 on the fake backend (collectives dispatch, no data moves); torn down after."""
    from torch.testing._internal.distributed.fake_pg import FakeStore  # registers the "fake" backend

    dist.init_process_group("fake", store=FakeStore(), rank=3, world_size=64)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # all_gather_into_tensor's rename
            yield dist.group.WORLD
    finally:
        dist.destroy_process_group()


def _step(pg):
    x = torch.ones(4, 8)
    dist.all_reduce(x, op=dist.ReduceOp.MAX)
    y = x * 2
    z = fc.all_reduce(y, "sum", pg)
    w = z + 1
    dist.broadcast(w, 3)
    gathered = torch.empty(64 * 4, 8)
    dist.all_gather_into_tensor(gathered, w)
    r = fc.reduce_scatter_tensor(gathered, "sum", 0, pg)
    return fc.wait_tensor(r) * 3


def test_collectives_record_their_meaning_not_process_objects(world):
    with dt.capture() as g:
        _step(world)
    g.lint()
    found = g.collectives()
    assert [c.kind for c in found] == ["all_reduce", "all_reduce", "broadcast", "all_gather", "reduce_scatter"]
    assert [c.op.target.split(".")[0] for c in found] == ["c10d", "_c10d_functional", "c10d", "c10d", "_c10d_functional"]
    whole = Group("0", tuple(range(64)), 3, "fake")
    assert all(c.group == whole for c in found)
    c10d_max = "max" if reduce_op_readable() else None  # torch 2.8's c10d ReduceOp cannot say which it is
    assert [c.reduce for c in found] == [c10d_max, "sum", None, None, "sum"]
    for op in g.ops:  # no ScriptObject, ProcessGroup or Work kept anywhere
        assert not any(isinstance(a, (torch.ScriptObject, dist.ProcessGroup)) for a in op.args)
    n = 4 * 8 * 4
    assert [(c.sent, c.received) for c in found] == [(n, n), (n, n), (n, 0), (n, 64 * n), (64 * n, n)]
    assert found[3].shapes == "f32[4, 8] -> f32[256, 8]"
    assert found.sent == sum(c.sent for c in found)


def test_broadcast_from_another_root_is_received(world):
    x = torch.ones(2, 2)
    with dt.capture() as g:
        dist.broadcast(x, 0)
    (c,) = g.collectives()
    assert (c.peer, c.sent, c.received) == (0, 0, 16)


def test_data_edges_run_through_collectives(world):
    with dt.capture() as g:
        _step(world)
    allreduce, mul = g.op("allreduce_"), g.op("mul")
    assert allreduce.mutated and allreduce.mutated[0].version == 1  # c10d.allreduce_ writes its tensor
    assert list(allreduce.producers) == [g.op("ones")] and list(mul.producers) == [allreduce]
    gather = g.op("_allgather_base_")
    assert gather.mutated[0].shape == (256, 8)
    assert g.op("broadcast_") in gather.producers
    assert list(g.op("reduce_scatter_tensor").producers) == [gather]


def test_wait_is_linked_to_its_collective(world):
    with dt.capture() as g:
        _step(world)
    found = g.collectives()
    assert found[4].wait is g.op("wait_tensor")  # an explicit wait_tensor
    assert found[1].wait is g.op("add")  # the AsyncCollectiveTensor's first use
    assert found[0].wait is None  # c10d ops wait inside the call


def test_subgroups_are_lists_of_global_ranks(world):
    sub = dist.new_group([3, 11, 19, 27])  # a strided group, as TP x DP meshes make
    x = torch.ones(3)
    with dt.capture() as g:
        fc.all_reduce(x, "avg", sub).wait()
    (c,) = g.collectives()
    assert c.group.ranks == (3, 11, 19, 27) and c.group.rank == 3 and c.group.group_rank == 0
    assert c.reduce == "avg"


def test_collectives_save_and_load(world):
    with dt.capture() as g:
        _step(world)
    g2 = loads(dumps(g))
    assert str(g2) == str(g)
    assert str(g2.collectives()) == str(g.collectives())
    assert g2.collectives()[0].group == g.collectives()[0].group


def test_replay_refuses_collectives_by_name(world):
    with dt.capture() as g:
        _step(world)
    with pytest.raises(dt.ReplayError, match=r"%allreduce_ \(c10d.allreduce_.default, over group 0 \[0-63\]\) is a collective"):
        g.to_fx()


def test_meta_tensors_on_the_fake_group(world):
    x = torch.ones(1024, 1024, device="meta")
    with dt.capture() as g:
        y = fc.all_gather_tensor(x, 0, world)
        (y + 1).sum()
    (c,) = g.collectives()
    assert c.received == 64 * 1024 * 1024 * 4 and c.op.outputs[0].device == "meta"


def test_other_torchbind_objects_are_kept_for_replay():
    class M(torch.nn.Module):
        def forward(self, x):
            with torch.profiler.record_function("block"):
                return x * 2

    m, x = M(), torch.ones(3)
    with dt.capture(m) as g:
        m(x)
    assert isinstance(g.op("_record_function_exit").args[0], torch.ScriptObject)
    assert torch.equal(g.to_fx(m)(x), x * 2)


def _rank_capture(rank: int, world: int, skip_last: bool) -> dt.Graph:
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=world)
    try:
        x = torch.ones(4)
        with dt.capture() as g:
            dist.all_reduce(x)
            if not skip_last:
                dist.all_reduce(x * 2)
        return g
    finally:
        dist.destroy_process_group()


def test_rank_files_and_a_rank_that_issued_fewer_collectives(tmp_path, monkeypatch):
    from dispatchtrace.views import mismatch

    for rank in range(3):
        _rank_capture(rank, 3, skip_last=rank == 2).save(dt.rank_path(tmp_path / "trace.json", rank))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trace.rank0.json", "trace.rank1.json", "trace.rank2.json"]
    ranks = dt.load_ranks(str(tmp_path / "trace.rank*.json"))
    assert list(ranks) == [0, 1, 2]
    found = mismatch(ranks)
    assert found is not None and found.position == 1 and found.group.ranks == (0, 1, 2)
    assert found.what == "a rank issued fewer collectives (the others wait for it forever)"
    assert str(found.sides[2]) == "rank 2: nothing: it issued no more collectives on this group"
    assert mismatch({r: ranks[r] for r in (0, 1)}) is None
    (tmp_path / "other.json").write_text((tmp_path / "trace.rank1.json").read_text())
    assert list(dt.load_ranks([tmp_path / "trace.rank0.json", tmp_path / "other.json"])) == [0, 1]  # rank from its groups
    with pytest.raises(ValueError, match="a second capture of rank 1"):
        dt.load_ranks([tmp_path / "trace.rank1.json", tmp_path / "other.json"])
    monkeypatch.chdir(tmp_path)
    from dispatchtrace.cli import main

    assert main(["mismatch", "trace.rank*.json"]) == 1
    assert main(["mismatch", "trace.rank0.json", "trace.rank1.json"]) == 0
    assert main(["mismatch", "nothing.rank*.json"]) == 2
