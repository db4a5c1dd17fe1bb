"""Estimates of real multi-process steps (gloo on 127.0.0.1) and of a 64-rank job on the fake group: what overlaps, what is exposed."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as fc
import torch.nn as nn
from recording.test_distributed import run_ranks

import dispatchtrace as dt


def _waits(est):
    """Collective op -> the seconds the compute stream waited for it."""
    out = {}
    for s in est.timeline.spans:
        if s.waited_for is not None:
            out[s.waited_for] = out.get(s.waited_for, 0.0) + s.waited
    return out


@pytest.mark.slow
@pytest.mark.distributed
def test_ddp_buckets_all_reduce_under_the_rest_of_backward(tmp_path):
    ranks = run_ranks("ddp_step", 2, tmp_path)
    job = dt.estimate_ranks(ranks, "h100")
    assert job.skew == pytest.approx(0.0, abs=1e-12)  # the same program on both ranks
    for est in job.estimates.values():
        reduces = [c for c, _ in est.collectives.values() if c.kind == "all_reduce"]
        assert [c.op.phase for c in reduces] == ["backward", "backward"]
        waits = _waits(est)
        first = reduces[0]  # the first bucket goes while backward goes on: nothing waits for it
        assert waits.get(first.op, 0.0) == 0.0
        assert est.timeline.span(first.op).end <= est.timeline.span(reduces[1].op).start + 1e-12
        assert 0.0 < est.overlap < 1.0 and est.exposed < est.communication


@pytest.mark.slow
@pytest.mark.distributed
def test_fsdp2_all_gathers_and_reduce_scatters_on_their_stream(tmp_path):
    ranks = run_ranks("fsdp_step", 2, tmp_path)
    job = dt.estimate_ranks(ranks, "h100", ranks_per_node=1)  # one GPU per node: FSDP2 over the network
    for est in job.estimates.values():
        kinds = [(c.kind, c.op.phase) for c, _ in est.collectives.values()]
        assert kinds.count(("all_gather", "forward")) == 2 and kinds.count(("reduce_scatter", "backward")) == 2
        assert all(cost.bound_by == "inter" for _, cost in est.collectives.values())
        spans = [est.timeline.span(c.op) for c, _ in est.collectives.values()]
        assert len({s.stream for s in spans}) == 1 and all(a.end <= b.start + 1e-12 for a, b in zip(spans, spans[1:], strict=False))
        # the reduce-scatter of b runs while a's backward computes: hidden, so less is exposed than sent
        assert est.exposed < est.communication
        assert est.phases["backward"] > 0


class _MegatronMLP(nn.Module):
    """This rank's shard of a Megatron MLP: a column-parallel layer, then a row-parallel one whose partial sums
    are all-reduced over the tensor-parallel group (blocking: read at once)."""

    def __init__(self, tp_group, width: int = 256, hidden: int = 1024, tp: int = 8) -> None:
        super().__init__()
        self.up = nn.Linear(width, hidden // tp, bias=False)
        self.down = nn.Linear(hidden // tp, width, bias=False)
        self.tp_group = tp_group

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        partial = self.down(torch.relu(self.up(x)))
        return fc.wait_tensor(fc.all_reduce(partial, "sum", self.tp_group))


def _tp_dp_rank(rank: int, world: int = 64, tp: int = 8, tokens: int = 64):
    """One rank of a (world / tp) x tp job on the fake group: tensor parallelism inside each group of ``tp``
    consecutive ranks, data parallelism across them (the gradients all-reduced asynchronously, as DDP does)."""
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=world)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tp_groups = [dist.new_group(list(range(s, s + tp))) for s in range(0, world, tp)]  # every rank makes every group
            dp_groups = [dist.new_group(list(range(i, world, tp))) for i in range(tp)]
            torch.manual_seed(0)
            model = _MegatronMLP(tp_groups[rank // tp], tp=tp)
            x = torch.ones(tokens, 256)
            with dt.capture(model) as g:
                model(x).sum().backward()
                works = [dist.all_reduce(p.grad, group=dp_groups[rank % tp], async_op=True) for p in model.parameters()]
                for w in works:
                    w.wait()
    finally:
        dist.destroy_process_group()
    return g


@pytest.mark.slow
def test_a_64_rank_job_rank_by_rank_and_its_skew():
    ranks = {r: _tp_dp_rank(r) for r in range(64)}
    job = dt.estimate_ranks(ranks, "h100")  # 8 ranks to a node: tensor parallelism on NVLink, data parallelism on the NIC
    assert (len(job), job.world) == (64, 64)
    assert job.skew == pytest.approx(0.0, abs=1e-12)
    est = job[9]
    levels = {(c.group.size, cost.bound_by) for c, cost in est.collectives.values()}
    assert levels == {(8, "intra"), (8, "inter")}  # the tensor-parallel all-reduce, the gradients' all-reduces
    dp = [c for c, cost in est.collectives.values() if cost.bound_by == "inter"]
    assert all(c.group.ranks == tuple(range(1, 64, 8)) for c in dp)  # rank 9's data-parallel peers: one per node
    text = str(job)
    assert "64 of 64 ranks" in text and text.count("\n") == 65


def test_uneven_ranks_have_a_skew_and_the_slowest_is_named():
    ranks = {r: _tp_dp_rank(r, world=16, tokens=64 if r != 5 else 512) for r in range(16)}  # rank 5 got a longer batch
    job = dt.estimate_ranks(ranks, "h100")
    assert job.slowest == 5 and job.skew > 0
    assert job.step == pytest.approx(job[5].total)
    assert "(rank 5)" in str(job) and "<- slowest" in str(job).splitlines()[7]


def test_a_rank_set_with_ranks_missing_is_an_error_that_says_which():
    ranks = {r: _tp_dp_rank(r, world=16) for r in (0, 1, 3)}  # their groups reach rank 11 (3's data-parallel peer)
    with pytest.raises(ValueError, match=r"name 12 ranks \(0 to 11\) but there is no capture of rank 2, 4, 5, .* and 1 more"):
        dt.estimate_ranks(ranks, "h100")
    assert len(dt.estimate_ranks(ranks, "h100", partial=True)) == 3


def test_the_ranks_page_shows_each_ranks_step_and_exposed_communication(tmp_path):
    ranks = {r: _tp_dp_rank(r, world=16, tokens=64 if r != 3 else 256) for r in range(16)}
    job = dt.estimate_ranks(ranks, "h100")
    page = tmp_path / "ranks.html"
    dt.write_ranks(ranks, str(page), estimate=job)
    text = page.read_text()
    assert "Estimated step on NVIDIA H100" in text and "(rank 3)" in text
    for row in job.rows():
        assert f"{row['step'] * 1e3:.3f} ms" in text and f"{row['exposed'] * 1e3:.3f} ms" in text
    assert text.count('class="slowest"') == 1
