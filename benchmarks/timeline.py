"""What the timeline costs: the 405B-shaped tensor-parallel rank captured and estimated, a 64-rank fake job estimated
rank by rank, and a 12k-op capture's trace written and read back.

Run: .venv/bin/python benchmarks/timeline.py [--layers 126] [--ranks 64] [--blocks 16]

1. ``examples/llama_tp.py``'s rank 0 of 64 (8 x 8 mesh, tensor parallel 8) on meta and the fake group: build,
   capture, then ``g.estimate("h100")`` with its collectives priced and scheduled.
2. A job of ``--ranks`` ranks on the fake group (tensor parallel 8 inside a node, data parallel across nodes,
   ``--blocks`` Megatron MLP blocks of hidden 4096 on meta, forward and backward, gradients all-reduced
   asynchronously): every rank captured and estimated, one after another in this process.
3. The 12k-op decoder of ``benchmarks/overhead.py`` (the 405B shape, 126 layers, on meta): ``g.estimate``,
   then ``.trace.json`` written and read back with ``json.load``, then ``.et`` written.
Times are wall clock on this machine, one run each (``time.perf_counter``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as fc
import torch.nn as nn

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "examples"), str(ROOT / "benchmarks")]

import dispatchtrace as dt  # noqa: E402


def tp_rank(layers: int) -> dict[str, float]:
    import llama_tp

    config = llama_tp.Config(vocab=128256, dim=16384, layers=layers, heads=128, kv_heads=8, hidden=53248,
                             max_seq=8192, theta=500000.0)
    t0 = time.perf_counter()
    m = llama_tp.measure(config, world=64, tp=8, seq=2048)
    t1 = time.perf_counter()
    est = m.graph.estimate("h100")
    t2 = time.perf_counter()
    dist.destroy_process_group()
    return {"ops": len(m.graph.ops), "collectives": len(est.collectives), "build+capture s": t1 - t0,
            "estimate s": t2 - t1, "step ms": est.total * 1e3, "exposed ms": est.exposed * 1e3}


class Block(nn.Module):
    def __init__(self, group, width: int, hidden: int, tp: int) -> None:
        super().__init__()
        self.up = nn.Linear(width, hidden // tp, bias=False)
        self.down = nn.Linear(hidden // tp, width, bias=False)
        self.group = group

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + fc.wait_tensor(fc.all_reduce(self.down(torch.relu(self.up(x))), "sum", self.group))


def job_rank(rank: int, world: int, blocks: int, tp: int = 8) -> dt.Graph:
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=world)
    try:
        tp_groups = [dist.new_group(list(range(s, s + tp))) for s in range(0, world, tp)]
        dp_groups = [dist.new_group(list(range(i, world, tp))) for i in range(tp)]
        with torch.device("meta"):
            model = nn.Sequential(*(Block(tp_groups[rank // tp], 4096, 16384, tp) for _ in range(blocks)))
            x = torch.ones(2048, 4096, device="meta")
        with dt.capture(model) as g:
            model(x).sum().backward()
            works = [dist.all_reduce(p.grad, group=dp_groups[rank % tp], async_op=True) for p in model.parameters()]
            for w in works:
                w.wait()
    finally:
        dist.destroy_process_group()
    return g


def job(ranks: int, blocks: int) -> dict[str, float]:
    t0 = time.perf_counter()
    graphs = {r: job_rank(r, ranks, blocks) for r in range(ranks)}
    t1 = time.perf_counter()
    est = dt.estimate_ranks(graphs, "h100")
    t2 = time.perf_counter()
    return {"ranks": ranks, "ops per rank": len(graphs[0].ops), "capture s": t1 - t0, "estimate s": t2 - t1,
            "step ms": est.step * 1e3, "exposed ms (rank 0)": est[0].exposed * 1e3, "overlap (rank 0)": est[0].overlap}


def trace_io(layers: int) -> dict[str, float]:
    import overhead

    model, x = overhead.decoder(layers)
    with torch.no_grad(), dt.capture(model) as g:
        model(x)
    t0 = time.perf_counter()
    est = g.estimate("h100")
    t1 = time.perf_counter()
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "step.trace.json"
        g.render(path, estimate=est)
        t2 = time.perf_counter()
        with open(path) as f:
            data = json.load(f)
        t3 = time.perf_counter()
        g.render(Path(d) / "step.et", estimate=est)
        t4 = time.perf_counter()
        size = path.stat().st_size
    return {"ops": len(g.ops), "events": len(data["traceEvents"]), "estimate s": t1 - t0, "write trace s": t2 - t1,
            "read trace s": t3 - t2, "write+read s": t3 - t1, "write .et s": t4 - t3, "trace MB": size / 1e6}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", type=int, default=126)
    p.add_argument("--ranks", type=int, default=64)
    p.add_argument("--blocks", type=int, default=16)
    p.add_argument("--only", choices=["tp", "job", "trace"])
    args = p.parse_args()
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}")
    if args.only in (None, "tp"):
        print("405B-shaped tensor-parallel rank:", {k: round(v, 3) for k, v in tp_rank(args.layers).items()})
    if args.only in (None, "job"):
        print(f"{args.ranks}-rank job:", {k: round(v, 3) for k, v in job(args.ranks, args.blocks).items()})
    if args.only in (None, "trace"):
        print("12k-op decoder trace:", {k: round(v, 3) for k, v in trace_io(args.layers).items()})


if __name__ == "__main__":
    main()
