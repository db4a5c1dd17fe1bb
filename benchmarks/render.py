"""Diagram cost: collapsing, building DOT source, and graphviz's ``dot`` laying it out as SVG.

Run: .venv/bin/python benchmarks/render.py [--repeat 3] [--models resnet50,densenet121]
One process, torch.set_num_threads(1), medians of ``--repeat`` runs; prints a markdown table.
``dot`` time is the wall time of ``dot -Tsvg`` (graphviz's program, run through the graphviz
package). Models run in eval mode with gradients on, as a user's first capture usually is.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn as nn
import torchvision

import dispatchtrace as dt
from dispatchtrace.render._diagram import run_dot


def _models() -> dict[str, tuple[Callable[[], nn.Module], tuple[int, ...]]]:
    def encoder() -> nn.Module:
        layer = nn.TransformerEncoderLayer(64, 4, batch_first=True)
        return nn.TransformerEncoder(layer, 12, enable_nested_tensor=False)

    return {
        "resnet50": (lambda: torchvision.models.resnet50(weights=None), (1, 3, 224, 224)),
        "resnet50-train": (lambda: torchvision.models.resnet50(weights=None).train(), (2, 3, 224, 224)),
        "densenet121": (lambda: torchvision.models.densenet121(weights=None), (1, 3, 64, 64)),
        "transformer_encoder_12x64": (encoder, (2, 10, 64)),
    }


# (label, to_dot options): the default diagram and the full op-level graph, folded and not
VIEWS: list[tuple[str, dict[str, Any]]] = [
    ("default (auto depth, folded)", {}),
    ("auto depth, unfolded", {"fold": False}),
    ("full op level", {"depth": "ops", "fold": False}),
    ("full op level, folded", {"depth": "ops", "fold": True}),
]


def _median(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure(name: str, repeat: int, skip: set[str]) -> list[dict[str, object]]:
    build, shape = _models()[name]
    torch.manual_seed(0)
    model = build()
    if not name.endswith("-train"):
        model.eval()
    x = torch.randn(shape)
    with dt.capture(model) as g:
        model(x)
    rows = []
    for label, options in VIEWS:
        if (name, label) in {tuple(s.split(":", 1)) for s in skip}:  # type: ignore[misc]
            continue
        source_s = _median(lambda: g.to_dot(**options).source, repeat)  # noqa: B023
        dot = g.to_dot(**options)
        cg = g.collapse(options.get("depth", "auto"), fold=options.get("fold", True))
        dot_s = _median(lambda: run_dot(dot, "svg"), repeat)  # noqa: B023
        rows.append({
            "model": name, "view": label, "depth": "ops" if cg.depth is None else cg.depth,
            "ops": len(g.ops), "nodes": len(cg.nodes), "edges": len(cg.edges), "clusters": len(cg.clusters),
            "layout": "fast" if "nslimit" in dot.source else "quality", "source_s": source_s, "dot_s": dot_s,
        })
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--models", default="resnet50,resnet50-train,transformer_encoder_12x64,densenet121")
    parser.add_argument("--skip", action="append", default=["densenet121:full op level"],
                        help="MODEL:VIEW pairs to leave out (DenseNet's op level takes dot ~30 s)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    version = subprocess.run(["dot", "-V"], capture_output=True, text=True).stderr.strip()
    print(f"torch {torch.__version__}, {version}, median of {args.repeat}, 1 thread\n")
    print("| model | view | depth | ops | nodes | edges | clusters | layout | DOT source (s) | `dot -Tsvg` (s) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in args.models.split(","):
        for r in measure(name, args.repeat, set(args.skip)):
            print(f"| {r['model']} | {r['view']} | {r['depth']} | {r['ops']} | {r['nodes']} | {r['edges']} | "
                  f"{r['clusters']} | {r['layout']} | {r['source_s']:.3f} | {r['dot_s']:.2f} |")


if __name__ == "__main__":
    main()
