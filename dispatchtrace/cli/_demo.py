"""``dispatchtrace demo [DIR]``: answer both seed questions with files: CoolCNN's branches, ResNet-50's calls."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from ..graph import Graph
from ..models import build
from ._errors import ArgumentParser, CliError
from ._options import write_output as write
from ._trace import trace

DEFAULT_DIR = "demo-out"


def run(argv: Sequence[str]) -> int:
    p = ArgumentParser(prog="dispatchtrace demo",
                       description="Capture CoolCNN (its two parallel branches) and ResNet-50 (its calls, each ReLU's "
                       "among them) and write their diagrams (SVG, PDF) and trees (.txt) into DIR.")
    p.add_argument("dir", nargs="?", default=DEFAULT_DIR, metavar="DIR", help=f"output folder (default {DEFAULT_DIR})")
    args = p.parse_args(list(argv))
    start = time.perf_counter()
    written = demo(Path(args.dir), log=lambda line: print(line, flush=True))
    print(f"demo: wrote {len(written)} files to {args.dir}/ in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    return 0


def demo(out: Path, *, log: Callable[[str], None] = lambda _: None) -> list[Path]:
    """Write the demo files into ``out`` and return their paths, in the order written."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise CliError(f"cannot create {out}: {e.strerror or e}") from e
    written: list[Path] = []

    def save(path: Path, what: str, make: Callable[[Path], object]) -> None:
        make(path)
        written.append(path)
        log(f"{path}  ({_size(path)}): {what}")

    torch.manual_seed(0)
    cool, args, _ = build("coolcnn")  # the one way models are built by name (dispatchtrace.models.build)
    g = trace(cool, args, name="CoolCNN")
    save(out / "coolcnn.txt", "CoolCNN call tree: two parallel branches joined by add, div", lambda p: write(g, p, depth=1))
    save(out / "coolcnn_ops.txt", "the same tree with the ATen ops inside each call", lambda p: write(g, p, depth=1, ops=True))
    for fmt in ("svg", "pdf"):
        save(out / f"coolcnn.{fmt}", "CoolCNN data-flow diagram", lambda p: write(g, p, depth=1))

    resnet, args, _ = build("resnet50")  # 1x3x224x224
    g = trace(resnet, args, name="resnet50")
    save(out / "resnet50.txt", "ResNet-50 call tree down to each Bottleneck's residual branches", lambda p: write(g, p, depth=3))
    save(out / "resnet50_relu_calls.txt", "all 49 ReLU calls of ResNet-50, in order", lambda p: _text(p, relu_calls(g)))
    for fmt in ("svg", "pdf"):
        save(out / f"resnet50.{fmt}", "ResNet-50 diagram at depth 2, identical consecutive Bottlenecks folded (×N)", lambda p: write(g, p, depth=2))
    for fmt in ("svg", "pdf"):
        save(out / f"resnet50_bottlenecks.{fmt}", "ResNet-50 with every Bottleneck opened", lambda p: write(g, p, depth=3))
    return written


def relu_calls(graph: Graph) -> str:
    """One line per ReLU call, in the order they ran: ``12  layer1.0.relu#2  f32[1, 256, 56, 56]``."""
    calls = [c for c in graph.calls if c.type == "ReLU"]
    lines = [f"{i:>2}  {c.label}  {', '.join(o.shape_text for o in c.outputs)}" for i, c in enumerate(calls)]
    return "\n".join([f"{len(calls)} ReLU calls", *lines])


def _text(path: Path, content: object) -> None:
    path.write_text(f"{content}\n", encoding="utf-8")


def _size(path: Path) -> str:
    n = path.stat().st_size
    return f"{n / 1024:.0f} KiB" if n >= 1024 else f"{n} B"
