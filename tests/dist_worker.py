"""Runs one distributed case on N ranks (gloo on 127.0.0.1, or each rank alone on the fake backend), each
rank capturing its forward and saving ``<out>/trace.rank<N>.json`` and ``<out>/flops.rank<N>.txt``.

    python tests/dist_worker.py CASE WORLD PORT OUT

Started by tests/recording/test_distributed.py under a hard timeout (a hang fails the test, never blocks it).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import warnings
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as fc
import torch.multiprocessing as mp
import torch.nn as nn
from torch.utils.flop_counter import FlopCounterMode

import dispatchtrace as dt


def functional(rank: int, world: int) -> torch.Tensor:
    pg = dist.group.WORLD
    x = torch.arange(8, dtype=torch.float32) + rank
    y = fc.all_reduce(x, "sum", pg)
    g = fc.all_gather_tensor(y * 2, 0, pg)
    r = fc.reduce_scatter_tensor(g, "sum", 0, pg)
    a = fc.all_to_all_single(r.repeat(world), None, None, pg)
    return fc.wait_tensor(a).sum() + y.sum()


def c10d(rank: int, world: int) -> torch.Tensor:
    x = torch.ones(4) * (rank + 1)
    dist.all_reduce(x)
    out = torch.empty(4 * world)
    dist.all_gather_into_tensor(out, x)
    dist.broadcast(out, 0)
    if rank == 0:
        dist.send(x, 1)
    elif rank == 1:
        dist.recv(x, 0)
    return out.sum() + x.sum()


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Linear(8, 16)
        self.down = nn.Linear(16, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.relu(self.up(x)))


class Branchy(nn.Module):
    """A forward that branches on the rank: rank 1 reduces its second all-reduce with max, the others sum."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = Block(), Block()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.a(x)
        dist.all_reduce(x)
        x = self.b(x)
        dist.all_reduce(x, op=dist.ReduceOp.MAX if dist.get_rank() == 1 else dist.ReduceOp.SUM)
        return x


class Skips(Branchy):
    """Rank 1 skips the second collective: the hang the mismatch finder is for (run on the fake backend)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.a(x)
        dist.all_reduce(x)
        x = self.b(x)
        if dist.get_rank() != 1:
            dist.all_reduce(x)
        return fc.all_gather_tensor(x, 0, dist.group.WORLD)


class Pair(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = Block(), Block()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.relu(self.a(x)))


def tp(rank: int, world: int) -> nn.Module:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    torch.manual_seed(0)
    model = Block()
    mesh = init_device_mesh("cpu", (world,))
    return parallelize_module(model, mesh, {"up": ColwiseParallel(), "down": RowwiseParallel()})


def fsdp(rank: int, world: int) -> nn.Module:
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(0)
    model = Pair()
    for block in (model.a, model.b):
        fully_shard(block)
    return fully_shard(model)


class Normed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block, self.norm = Block(), nn.BatchNorm1d(8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.block(x))


def ddp(rank: int, world: int) -> nn.Module:
    from torch.nn.parallel import DistributedDataParallel

    torch.manual_seed(0)
    return DistributedDataParallel(Normed())  # broadcasts its buffers from rank 0 before each forward


def ddp_step(rank: int, world: int) -> nn.Module:
    from torch.nn.parallel import DistributedDataParallel

    torch.manual_seed(0)
    # buckets of at most 600 bytes: the block's 296 floats (1184 B) go in several buckets, in reverse order
    return DistributedDataParallel(Normed(), bucket_cap_mb=600 / 2**20)


def _training(model: nn.Module, rank: int, input_grad: bool = False) -> object:
    """One training step on this rank's own batch: forward, loss, backward, SGD step (``input_grad``:
    the batch requires grad, so that a tensor-parallel backward all-reduces its gradient)."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = (torch.arange(32, dtype=torch.float32).reshape(4, 8) / 32 + rank).requires_grad_(input_grad)

    def step() -> None:
        model(x).square().sum().backward()
        opt.step()
        opt.zero_grad()

    return step


def _forward(case: str, rank: int, world: int) -> tuple[nn.Module | None, object]:
    if case.endswith("_step"):
        torch.manual_seed(0)
        model = {"ddp_step": ddp_step, "fsdp_step": fsdp, "tp_step": tp}[case](rank, world)
        step = _training(model, rank, input_grad=case == "tp_step")
        if case == "ddp_step":
            step()  # after its first step DDP rebuilds its buckets in the order the gradients came
        return model, step
    if case in ("functional", "c10d"):
        fn = functional if case == "functional" else c10d
        return None, lambda: fn(rank, world)
    torch.manual_seed(0)
    perturbed = case.endswith("_perturbed")  # rank 1 adds 0.5 to one element of its shard of the first weight
    case = case.removesuffix("_perturbed")
    model = {"tp": lambda: tp(rank, world), "fsdp": lambda: fsdp(rank, world), "ddp": lambda: ddp(rank, world), "mismatch": Branchy,
             "skips": Skips}[case]()
    if perturbed and rank == 1:
        with torch.no_grad():
            (model.up if case == "tp" else model.a.up).weight.to_local()[0, 0] += 0.5
    x = torch.randn(2, 8, generator=torch.Generator().manual_seed(1)) if case in ("tp", "fsdp") else torch.ones(2, 8)
    return model, lambda: model(x)


def main(rank: int, case: str, world: int, port: int, out: str) -> None:
    warnings.simplefilter("ignore")
    values = "stats" if case.endswith(":stats") else "none"  # ddp_step:stats: the same case, with values="stats"
    case = case.removesuffix(":stats")
    if case in ("skips", "mismatch"):  # collectives that disagree across ranks: gloo may abort on them (SIGABRT)
        FakeStore = importlib.import_module("torch.testing._internal.distributed.fake_pg").FakeStore  # registers "fake"

        dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=world)
    else:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                                timeout=timedelta(seconds=60))
    try:
        model, forward = _forward(case, rank, world)
        grad = torch.enable_grad() if case.endswith("_step") else torch.no_grad()
        with grad, dt.capture(model, values=values) as g:
            forward()
        g.save(dt.rank_path(os.path.join(out, "trace.json")))
        if case == "ddp_step":  # the reducer's own buckets, to check the capture's attribution against
            names = {id(p): n for n, p in model.named_parameters()}
            buckets = [[names[id(p)] for p in b.parameters()] for b in model.reducer._get_zeros_like_grad_buckets()]
            with open(os.path.join(out, f"buckets.rank{rank}.json"), "w") as f:
                json.dump(buckets, f)
        with grad, FlopCounterMode(display=False) as counter:
            forward()
        with open(os.path.join(out, f"flops.rank{rank}.txt"), "w") as f:
            f.write(str(counter.get_total_flops()))
        dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    case, world, port, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    torch.set_num_threads(1)
    mp.spawn(main, args=(case, world, port, out), nprocs=world, join=True)
