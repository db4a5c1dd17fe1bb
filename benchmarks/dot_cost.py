"""How long graphviz's ``dot`` takes to lay out diagrams of growing size: the data behind render/estimate.py.

Run: .venv/bin/python benchmarks/dot_cost.py [--timeout 180] [--only densenet] [--json rows.json]
(``--from rows.json`` prints the table again from saved measurements, with the current estimate).
One ``dot -Tsvg`` run per diagram (wall time; a run past ``--timeout`` is recorded as ``>timeout``),
on the DOT source ``to_dot`` writes (so the fast layout above 300 edges is what is measured).
Prints a markdown table of nodes, edges, clusters, span (the edges' lengths in ranks added up,
``views/_layers.py``), measured seconds and the estimate of ``dispatchtrace.render._estimate.layout_seconds``;
the constants of that estimate are a least-squares fit of log seconds on log edges and log span over
the rows that took 0.2 s or more.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn as nn
import torchvision

import dispatchtrace as dt
from dispatchtrace.render._estimate import estimate_seconds, layout_seconds
from dispatchtrace.views import layering


def _encoder(layers: int) -> Callable[[], nn.Module]:
    def build() -> nn.Module:
        layer = nn.TransformerEncoderLayer(64, 4, batch_first=True)
        return nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
    return build


def _densenet(blocks: tuple[int, ...]) -> Callable[[], nn.Module]:
    return lambda: torchvision.models.DenseNet(block_config=blocks)


# (name, build, input shape, to_dot options)
CASES: list[tuple[str, Callable[[], nn.Module], tuple[int, ...], dict[str, Any]]] = [
    ("resnet18 ops", lambda: torchvision.models.resnet18(weights=None), (1, 3, 64, 64), {"depth": "ops", "fold": False}),
    ("resnet50 depth 3", lambda: torchvision.models.resnet50(weights=None), (1, 3, 64, 64), {"depth": 3, "fold": False}),
    ("resnet50 ops", lambda: torchvision.models.resnet50(weights=None), (1, 3, 64, 64), {"depth": "ops", "fold": False}),
    ("resnet101 ops", lambda: torchvision.models.resnet101(weights=None), (1, 3, 64, 64), {"depth": "ops", "fold": False}),
    ("mobilenet_v3_large ops", lambda: torchvision.models.mobilenet_v3_large(weights=None), (1, 3, 64, 64), {"depth": "ops", "fold": False}),
    ("encoder 2×64 ops", _encoder(2), (2, 10, 64), {"depth": "ops", "fold": False}),
    ("encoder 8×64 ops", _encoder(8), (2, 10, 64), {"depth": "ops", "fold": False}),
    ("encoder 24×64 ops", _encoder(24), (2, 10, 64), {"depth": "ops", "fold": False}),
    ("encoder 48×64 ops", _encoder(48), (2, 10, 64), {"depth": "ops", "fold": False}),
    ("encoder 96×64 ops", _encoder(96), (2, 10, 64), {"depth": "ops", "fold": False}),
    ("densenet (2,2,2,2) ops", _densenet((2, 2, 2, 2)), (1, 3, 64, 64), {"depth": "ops", "fold": False}),
    ("densenet (3,6,12,8) ops", _densenet((3, 6, 12, 8)), (1, 3, 64, 64), {"depth": "ops", "fold": False}),
    ("densenet121 depth 3", _densenet((6, 12, 24, 16)), (1, 3, 64, 64), {"depth": 3, "fold": False}),
    ("densenet121 depth 4", _densenet((6, 12, 24, 16)), (1, 3, 64, 64), {"depth": 4, "fold": False}),
    ("densenet121 ops", _densenet((6, 12, 24, 16)), (1, 3, 64, 64), {"depth": "ops", "fold": False}),
    ("densenet201 ops", _densenet((6, 12, 48, 32)), (1, 3, 64, 64), {"depth": "ops", "fold": False}),
    ("densenet (6,12,64,48) ops", _densenet((6, 12, 64, 48)), (1, 3, 64, 64), {"depth": "ops", "fold": False}),
    ("densenet (12,24,96,64) ops", _densenet((12, 24, 96, 64)), (1, 3, 64, 64), {"depth": "ops", "fold": False}),
    ("encoder 192×64 ops", _encoder(192), (2, 10, 64), {"depth": "ops", "fold": False}),
    ("encoder 384×64 ops", _encoder(384), (2, 10, 64), {"depth": "ops", "fold": False}),
]


def measure(name: str, build: Callable[[], nn.Module], shape: tuple[int, ...], options: dict[str, Any],
            timeout: float) -> dict[str, Any]:
    torch.manual_seed(0)
    model = build().eval()
    x = torch.randn(shape)
    with dt.capture(model) as g:
        model(x)
    depth = options.get("depth", "auto")
    cg = g.collapse(depth, fold=options.get("fold", True))
    source = g.to_dot(**options).source
    t0 = time.perf_counter()
    try:
        subprocess.run(["dot", "-Tsvg"], input=source.encode(), stdout=subprocess.DEVNULL, check=True, timeout=timeout)
        seconds: float | None = time.perf_counter() - t0
    except subprocess.TimeoutExpired:
        seconds = None
    shape_ = layering([n.id for n in cg.nodes], [(e.src.id, e.dst.id) for e in cg.edges])
    return {"case": name, "nodes": len(cg.nodes), "edges": len(cg.edges), "clusters": len(cg.clusters),
            "span": shape_.span, "width": shape_.width, "crossing": shape_.crossing, "ranks": shape_.ranks,
            "layout": "fast" if "nslimit" in source else "quality", "dot_s": seconds,
            "estimate_s": layout_seconds(cg), "ops": len(g.ops)}


def table(rows: list[dict[str, Any]], timeout: float) -> str:
    lines = ["| diagram | nodes | edges | clusters | span | layout | `dot -Tsvg` (s) | estimate (s) |",
             "|---|---:|---:|---:|---:|---|---:|---:|"]
    for r in rows:
        measured = f">{timeout:.0f}" if r["dot_s"] is None else f"{r['dot_s']:.2f}"
        lines.append(f"| {r['case']} | {r['nodes']} | {r['edges']} | {r['clusters']} | {r['span']} | {r['layout']} "
                     f"| {measured} | {r['estimate_s']:.2f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds before a dot run is given up")
    parser.add_argument("--only", default="", help="run only cases whose name contains this")
    parser.add_argument("--json", default="", help="also write the measurements to this file")
    parser.add_argument("--from", dest="source", default="", help="print the table of measurements saved with --json")
    args = parser.parse_args()
    if args.source:
        rows = json.loads(Path(args.source).read_text())
        for r in rows:
            r["estimate_s"] = estimate_seconds(edges=r["edges"], span=r["span"])
        print(table(rows, args.timeout))
        return
    torch.set_num_threads(1)
    rows = []
    for name, build, shape, options in CASES:
        if args.only in name:
            rows.append(measure(name, build, shape, options, args.timeout))
            print(rows[-1], flush=True)
            if args.json:
                Path(args.json).write_text(json.dumps(rows, indent=1))
    print(table(rows, args.timeout))


if __name__ == "__main__":
    main()
