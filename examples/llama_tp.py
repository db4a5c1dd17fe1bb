"""One rank of a tensor-parallel Llama job no machine here has: the fake process group, meta tensors, DTensor.

Builds the Llama-style decoder of ``llama_meta.py`` on ``meta`` (by default the 405B shape: 126
layers, hidden 16384, 128 query / 8 key-value heads, SwiGLU 53248, vocabulary 128256), joins a
world of 64 ranks on PyTorch's ``fake`` backend (collectives dispatch, no data moves, one
process), arranges it as an 8 x 8 mesh (data parallel x tensor parallel) and shards every
decoder layer with ``parallelize_module`` (q/k/v, gate/up column-wise, o/down row-wise) over its
tensor-parallel group of 8. Then it captures rank 0's forward and prints the FLOPs per layer and
the collectives with the bytes each moves.

    python examples/llama_tp.py                       # 405B shape, 1 x 2048 tokens
    python examples/llama_tp.py --layers 2 --dim 1024 --heads 16 --kv-heads 8 --hidden 2048 --vocab 1000

``fully_shard`` (FSDP2) refuses parameters on ``meta`` ("FSDP parameters should be materialized
from meta device"), so the data-parallel dimension only names the groups here.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn as nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from llama_meta import Config, Llama, peak_rss_mb  # noqa: E402

import dispatchtrace as dt  # noqa: E402
from dispatchtrace.views._summary import human  # noqa: E402

LLAMA_405B = Config(vocab=128256, dim=16384, layers=126, heads=128, kv_heads=8, hidden=53248, max_seq=8192,
                    theta=500000.0)


def tp_plan() -> dict[str, object]:
    """Megatron-style tensor parallelism of one decoder layer."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    return {"attn.q_proj": ColwiseParallel(), "attn.k_proj": ColwiseParallel(), "attn.v_proj": ColwiseParallel(),
            "attn.o_proj": RowwiseParallel(),
            "mlp.gate_proj": ColwiseParallel(), "mlp.up_proj": ColwiseParallel(), "mlp.down_proj": RowwiseParallel()}


def build(config: Config, *, world: int, tp: int, rank: int = 0) -> nn.Module:
    """The model on meta, its layers sharded over this rank's tensor-parallel group of a fake world."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import parallelize_module
    from torch.testing._internal.distributed.fake_pg import FakeStore  # registers the "fake" backend

    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=world)
    mesh = init_device_mesh("cpu", (world // tp, tp), mesh_dim_names=("dp", "tp"))
    with torch.device("meta"):
        model = Llama(config).eval()
    for layer in model.layers:
        parallelize_module(layer, mesh["tp"], tp_plan())
    return model


@dataclass(frozen=True)
class Measured:
    """What one capture of rank 0 gave, and what it cost."""

    graph: dt.Graph
    flops: int
    flop_counter: int
    layer_flops: list[int]
    collectives: dict[tuple[str, str, str], list[int]]  # (kind, group, shapes) -> bytes sent by each
    build_s: float
    capture_s: float
    views_s: float
    peak_rss_mb: float


def measure(config: Config, *, world: int, tp: int, seq: int) -> Measured:
    """Build, shard and capture rank 0's forward of ``1 x seq`` tokens (leaves the process group up)."""
    t0 = time.perf_counter()
    model = build(config, world=world, tp=tp)
    t_build = time.perf_counter() - t0
    tokens = torch.zeros(1, seq, dtype=torch.int64, device="meta")
    t0 = time.perf_counter()
    with torch.no_grad(), dt.capture(model) as g:
        model(tokens)
    t_capture = time.perf_counter() - t0
    t0 = time.perf_counter()
    found = g.collectives()
    rows = [r for r in g.summary().rows() if r["type"] == "DecoderLayer"]
    t_views = time.perf_counter() - t0
    rss = peak_rss_mb()
    from torch.utils.flop_counter import FlopCounterMode

    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(tokens)
    kinds: dict[tuple[str, str, str], list[int]] = {}
    for c in found:
        kinds.setdefault((c.kind, str(c.group), c.shapes), []).append(c.sent)
    return Measured(g, g.costs().total.flops, counter.get_total_flops(), [r["flops"] for r in rows], kinds,
                    t_build, t_capture, t_views, rss)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(p)
    p.add_argument("--save", type=Path, help="also save the capture (rank 0's file, e.g. trace.rank0.json)")
    args = p.parse_args(argv)
    m = measure(config_of(args), world=args.world, tp=args.tp, seq=args.seq)
    g = m.graph
    print(f"rank 0 of {args.world} (tensor parallel {args.tp}), {args.layers} layers, hidden {args.dim}, "
          f"1 x {args.seq} tokens, torch {torch.__version__}")
    print(f"ops {len(g.ops):,}, calls {len(g.calls):,}, collectives {len(g.collectives()):,}, "
          f"DTensor-level ops {len({op.dtensor for op in g.ops if op.dtensor}):,}")
    print(f"FLOPs this rank ran {m.flops:,} ({human(m.flops, 'FLOPs')}); FlopCounterMode (DTensor ops at "
          f"global shapes) {m.flop_counter:,}")
    print(f"FLOPs per layer: {human(m.layer_flops[0], 'FLOPs')} (layers.0), all {len(m.layer_flops)} equal: "
          f"{len(set(m.layer_flops)) == 1}")
    for (kind, group, shapes), sent in m.collectives.items():
        print(f"{len(sent)} x {kind} {shapes} over {group}: {human(sent[0], 'B')} each, {human(sum(sent), 'B')} in all")
    print(f"first layer's collectives: {', '.join(c.op.call.label for c in g.collectives()[:2])}")
    print(f"build {m.build_s:.1f} s, capture {m.capture_s:.1f} s, collectives + summary {m.views_s:.1f} s, "
          f"peak RSS {m.peak_rss_mb:.0f} MB")
    if args.save:
        g.save(args.save)
        print(f"wrote {args.save}")
    dist.destroy_process_group()
    return 0


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The job's shape as options (``--seq``, ``--world``, ``--tp``, the model's sizes), 405B by default."""
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--world", type=int, default=64)
    p.add_argument("--tp", type=int, default=8)
    for name in ("layers", "dim", "heads", "kv_heads", "hidden", "vocab"):
        p.add_argument(f"--{name.replace('_', '-')}", type=int, default=getattr(LLAMA_405B, name))


def config_of(args: argparse.Namespace) -> Config:
    return Config(vocab=args.vocab, dim=args.dim, layers=args.layers, heads=args.heads, kv_heads=args.kv_heads,
                  hidden=args.hidden, max_seq=max(args.seq, 16), theta=LLAMA_405B.theta)


if __name__ == "__main__":
    raise SystemExit(main())
