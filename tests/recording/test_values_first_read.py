"""``values="stats"``: every value an op reads has stats, also those the capture did not make and those an
op writes in place on its first read (taken before it runs), and views read after a sibling was written."""

from __future__ import annotations

import math

import torch
import torch.nn as nn

import dispatchtrace as dt
from dispatchtrace.graph import Graph


def _without_stats(g: Graph) -> list[str]:
    """``op: input`` for each tensor an op read that has no stats (memory not yet written aside)."""
    empty = {r.storage for op in g.ops if op.target.startswith(("aten.empty", "aten.new_empty")) for r in op.outputs}
    return [f"{op.name}: {r.text}" for op in g.ops for r in op.inputs
            if r.id not in g.stats and r.storage not in empty]


def test_a_buffer_first_read_by_an_op_that_writes_it_has_its_stats_from_before_the_write() -> None:
    bn = nn.BatchNorm1d(3).train()
    with torch.no_grad():
        bn.running_var[1] = math.nan  # non-finite before the capture: carried, never made by the step
    x = torch.randn(8, 3)
    with dt.capture(bn, values="stats") as g:
        bn(x)
    add = g.find_ops("aten.add_*")[0]  # num_batches_tracked += 1: its first read writes it
    count = add.inputs[0]
    assert count.kind == "buffer" and count.name == "num_batches_tracked"
    assert (g.stats[count.id].min, g.stats[count.id].max) == (0.0, 0.0)  # before the write
    assert g.stats[add.mutated[0].id].max == 1.0  # after it
    norm = next(op for op in g.ops if "batch_norm" in op.target)
    var = next(r for r in norm.inputs if r.name == "running_var")
    assert g.stats[var.id].nan == 1  # read and written by the op: its stats from before it ran
    assert _without_stats(g) == []
    found = g.first_nonfinite()
    assert found is not None and found.carried and found.tensor.name == "running_var"


def test_adam_state_on_the_step_after_a_nan_has_stats() -> None:
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    opt = torch.optim.Adam(model.parameters(), lr=0.1, foreach=False)
    x = torch.randn(3, 4)
    model(x).sum().backward()
    opt.step()
    with torch.no_grad():
        opt.state[model.weight]["exp_avg"][0, 0] = math.nan  # the step before left NaN in the state
    opt.zero_grad()
    with dt.capture(model, values="stats") as g:
        model(x).sum().backward()
        opt.step()
    step = [op for op in g.ops if op.phase == "optimizer"]
    read = {r.name: r for op in step for r in op.inputs if r.producer is None and r.name}
    assert {"weight.exp_avg", "weight.exp_avg_sq", "weight.step"} <= set(read)
    assert g.stats[read["weight.exp_avg"].id].nan == 1  # first read by lerp_, which writes it: stats from before
    assert g.stats[read["weight.exp_avg_sq"].id].finite and g.stats[read["weight.step"].id].max == 1.0
    assert _without_stats(g) == []
    found = g.first_nonfinite()
    assert found is not None and found.carried and found.tensor.name == "weight.exp_avg"


def test_views_of_one_storage_read_after_a_sibling_was_written_have_stats() -> None:
    """Every CPU ``nn.GRU`` splits its gates (``unsafe_split``) and writes the chunks in place."""
    torch.manual_seed(0)
    gru = nn.GRU(4, 6)
    x = torch.randn(5, 1, 4)
    with torch.no_grad(), dt.capture(gru, values="stats") as g:
        gru(x)
    assert g.find_ops("aten.unsafe_split*") and g.find_ops("aten.sigmoid_*")
    assert _without_stats(g) == []
    with torch.no_grad(), dt.capture(values="stats") as h:
        base = torch.arange(6.0)
        a, b = base[:3], base[3:]
        a.mul_(-1)
        b.add(1)  # b's storage was written (through a): b is read as a new version
        base.sum()  # the base too, with the value a's write made
    add, total = h.find_ops("aten.add.Tensor")[0], h.find_ops("aten.sum*")[0]
    assert h.stats[add.inputs[0].id].min == 3.0 and h.stats[total.inputs[0].id].min == -2.0


def test_a_collective_result_gets_its_stats_where_it_is_next_read_after_its_wait() -> None:
    """What a collective returns or writes is complete after its wait (an async all-reduce's buffer): its stats
    are taken where an op next reads it, never at the collective itself."""
    import warnings

    import torch.distributed as dist
    import torch.distributed._functional_collectives as fc
    from torch.testing._internal.distributed.fake_pg import FakeStore  # registers the "fake" backend

    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=4)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            with dt.capture(values="stats") as g:
                x = torch.ones(4, 8)
                work = dist.all_reduce(x, async_op=True)
                at_the_op = [r.id in g.stats for r in (*g.ops[-1].outputs, *g.ops[-1].mutated)]
                work.wait()
                y = x * 2
                z = fc.all_reduce(y, "sum", dist.group.WORLD)
                at_the_op += [r.id in g.stats for r in g.ops[-1].outputs]
                (z + 1).sum()
    finally:
        dist.destroy_process_group()
    collectives = [op for op in g.ops if op.target.startswith(("c10d.allreduce", "_c10d_functional.all_reduce"))]
    assert len(collectives) == 2 and at_the_op and not any(at_the_op)
    assert all(r.id in g.stats for op in collectives for r in op.outputs)  # taken where next read
    mul = g.find_ops("aten.mul*")[0]
    assert mul.inputs[0].producer is collectives[0] and g.stats[mul.inputs[0].id].max == 1.0  # read after the wait
    assert _without_stats(g) == []
