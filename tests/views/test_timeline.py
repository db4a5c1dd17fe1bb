"""The simulated schedule of one rank on the fake process group: blocking collectives exposed, asynchronous ones hidden."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as fc

import dispatchtrace as dt
from dispatchtrace.views import timeline

MS = 1e-3


@pytest.fixture
def world():
    from torch.testing._internal.distributed.fake_pg import FakeStore  # registers the "fake" backend

    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=8)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            yield dist.group.WORLD
    finally:
        dist.destroy_process_group()


def _is_compute(op) -> bool:
    return not op.target.startswith(("c10d.", "_c10d_functional."))


def test_a_blocking_all_reduce_is_all_exposed_and_on_the_critical_path(world):
    a, b = torch.ones(16, 16), torch.ones(16, 16)
    with dt.capture() as g:
        y = a @ b
        z = fc.wait_tensor(fc.all_reduce(y, "sum", world))  # tensor parallelism's row-parallel output
        (z.relu() + 1).sum()
    t = timeline(g, lambda op: MS if _is_compute(op) else 0.0, lambda c: 5 * MS)
    compute_ops = [op for op in g.ops if _is_compute(op)]
    assert t.communication == pytest.approx(5 * MS)
    assert t.exposed == pytest.approx(5 * MS) and t.overlap == pytest.approx(0.0)
    assert t.total == pytest.approx(len(compute_ops) * MS + 5 * MS)
    assert any(op.target.startswith("_c10d_functional.all_reduce") for op in t.critical_path)


def test_an_async_all_reduce_hides_behind_the_compute_before_its_wait(world):
    grads, a = torch.ones(1024), torch.ones(32, 32)
    with dt.capture() as g:
        work = dist.all_reduce(grads, async_op=True)  # DDP's bucket, issued in backward
        h = a
        for _ in range(6):
            h = (h @ a).relu()  # compute that does not touch the bucket
        work.wait()
        grads.mul_(0.5)  # the first op that reads what the all-reduce wrote
    t = timeline(g, lambda op: MS if _is_compute(op) else 0.0, lambda c: 4 * MS)
    assert t.communication == pytest.approx(4 * MS)
    assert t.exposed == pytest.approx(0.0) and t.overlap == pytest.approx(1.0)
    assert not any(op.target.startswith("c10d.") for op in t.critical_path)
    # a slower network: only what the compute cannot cover is exposed, and charged where the wait is
    slow = timeline(g, lambda op: MS if _is_compute(op) else 0.0, lambda c: 30 * MS)
    busy = sum(MS for op in g.ops if _is_compute(op) and op.index < g.find_ops("aten.mul_*")[0].index)
    assert slow.exposed == pytest.approx(30 * MS - busy)
    assert 0.0 < slow.overlap < 1.0
    waited = slow.span(g.find_ops("aten.mul_*")[0])
    assert waited.waited == pytest.approx(slow.exposed)
    assert slow.exposed_in(g.root) == pytest.approx(slow.exposed)


def test_collectives_of_one_group_queue_on_its_stream(world):
    x, y = torch.ones(256), torch.ones(256)
    with dt.capture() as g:
        w1 = dist.all_reduce(x, async_op=True)
        w2 = dist.all_reduce(y, async_op=True)
        w1.wait()
        w2.wait()
        (x + y).sum()
    t = timeline(g, lambda op: MS if _is_compute(op) else 0.0, lambda c: 3 * MS)
    first, second = (s for s in t.spans if s.collective is not None)
    assert second.start == pytest.approx(first.end)  # one communicator: the second waits for the first
    assert t.total == pytest.approx(6 * MS + 2 * MS)  # add waits for both, then add and sum
