"""One rank of a 64-rank tensor-parallel 405B-shaped Llama, captured on meta with the fake process group.

Run: .venv/bin/python benchmarks/distributed.py [--seq 2048] [--layers 126]
Prints the markdown of the "One rank of a 405B-shaped job" section of docs/benchmarks.md. One
process: the model is built on ``meta`` and sharded with DTensor over rank 0's tensor-parallel
group; ``fake`` collectives dispatch without moving data. Peak RSS is the whole process's.
"""

from __future__ import annotations

import argparse
import platform
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from llama_tp import add_arguments, config_of, measure  # noqa: E402

from dispatchtrace.views._summary import human  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(p)
    args = p.parse_args()
    m = measure(config_of(args), world=args.world, tp=args.tp, seq=args.seq)
    g = m.graph
    print(f"`python benchmarks/distributed.py --seq {args.seq} --layers {args.layers}` (torch {torch.__version__}, "
          f"Python {platform.python_version()}, {platform.machine()}): rank 0 of {args.world}, tensor parallel "
          f"{args.tp}, 1 x {args.seq} tokens.\n")
    print("| measure | value |\n|---|---:|")
    print(f"| ops captured (local ops, collectives) | {len(g.ops):,} in {len(g.calls):,} module calls |")
    print(f"| DTensor-level ops | {len({op.dtensor for op in g.ops if op.dtensor}):,} |")
    print(f"| FLOPs rank 0 ran | {m.flops:,} ({human(m.flops, 'FLOPs')}) |")
    print(f"| FlopCounterMode (DTensor ops at global shapes) | {m.flop_counter:,} ({human(m.flop_counter, 'FLOPs')}) |")
    print(f"| FLOPs per decoder layer | {human(m.layer_flops[0], 'FLOPs')} (all {len(m.layer_flops)} equal: "
          f"{len(set(m.layer_flops)) == 1}) |")
    for (kind, group, shapes), sent in m.collectives.items():
        print(f"| {kind} `{shapes}` over {group} | {len(sent)} x {human(sent[0], 'B')} = {human(sum(sent), 'B')} |")
    print(f"| build and shard on meta | {m.build_s:.1f} s |")
    print(f"| capture | {m.capture_s:.1f} s |")
    print(f"| collectives + summary | {m.views_s:.1f} s |")
    print(f"| peak RSS (whole process) | {m.peak_rss_mb:.0f} MB |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
