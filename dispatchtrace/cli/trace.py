"""``dispatchtrace MODEL``: capture one forward pass, print its tree or write diagrams."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from ..capture import capture
from ..graph import Graph
from .errors import ArgumentParser, CliError
from .models import load_model, parse_inputs
from .options import add_model_arguments, add_output_arguments, check_outputs, forward_error, parse_depth


def parser() -> argparse.ArgumentParser:
    p = ArgumentParser(
        prog="dispatchtrace",
        description="Capture every ATen op of one forward pass and show it as a tree of module calls "
        "with parallel branches, or write diagrams. Other commands: `dispatchtrace demo [DIR]`, "
        "`dispatchtrace render`, `dispatchtrace verify`.",
        epilog="examples: dispatchtrace resnet50 --depth 2 | dispatchtrace coolcnn -o cool.svg -o cool.pdf | "
        "dispatchtrace mypkg.nets:make_net --input 8x128 --dtype int64",
    )
    add_model_arguments(p, device_help="where the model and inputs live; meta runs with no data and no weight memory")
    p.add_argument("--depth", type=parse_depth, default=None, metavar="N",
                   help="open module calls down to depth N (the model's call is 0); default: all for the tree, a readable depth for diagrams")
    p.add_argument("--ops", action="store_true", help="also list the ATen ops inside the calls shown")
    p.add_argument("--at", metavar="CALL", default=None,
                   help="start the tree at this module call (layer1.0, layer1.0.relu#2 or 'layer1.0.relu #2' as the tree "
                   "prints it); --depth counts from it")
    p.add_argument("--statements", action="store_true",
                   help="group the items of each call under the source line that issued them (main_path = self.pool(...))")
    add_output_arguments(p)
    p.add_argument("--debug", action="store_true", help="show Python tracebacks instead of one-line errors")
    return p


def run(argv: Sequence[str]) -> int:
    args = parser().parse_args(list(argv))
    check_outputs(args.output)
    model = load_model(args.model, device=args.device)
    inputs = parse_inputs(args.input, dtype=args.dtype, device=args.device, model=model)
    graph = trace(model, inputs, name=args.model)
    if not args.output or args.tree:
        print(tree_of(graph, args.depth, ops=args.ops, at=args.at, statements=args.statements))
    for out in args.output:
        write(graph, out, depth=args.depth, ops=args.ops, at=args.at, statements=args.statements)
        print(f"wrote {out}", file=sys.stderr if args.tree else sys.stdout)
    return 0


def trace(model: torch.nn.Module, inputs: Sequence[torch.Tensor], *, name: str = "the model") -> Graph:
    """One captured forward pass under ``torch.no_grad()``; a forward that raises becomes a ``CliError``."""
    try:
        with torch.no_grad(), capture(model) as graph:
            model(*inputs)
    except Exception as e:
        raise forward_error(name, inputs, e) from e
    return graph


def tree_of(graph: Graph, depth: int | None, *, ops: bool = False, at: str | None = None,
            statements: bool = False) -> Any:
    """``graph.tree(...)`` with an unknown or ambiguous ``at`` label as a ``CliError``."""
    try:
        return graph.tree(depth, ops=ops, at=at, statements=statements)
    except (ValueError, KeyError) as e:
        raise CliError(str(e.args[0]) if e.args else str(e)) from e


def write(graph: Graph, path: str | Path, *, depth: int | None = None, ops: bool = False, at: str | None = None,
          statements: bool = False) -> Path:
    """Write one output file; ``.txt`` is the tree as printed (``at`` and ``statements`` apply to it only),
    everything else goes to ``Graph.render``.

    Diagrams get ``depth`` when given, else the op-level graph with ``ops``, else the renderer's
    readable default.
    """
    path = Path(path)
    if path.suffix.lower() == ".txt":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{tree_of(graph, depth, ops=ops, at=at, statements=statements)}\n", encoding="utf-8")
        return path
    from ..render.estimate import DiagramTooLargeError
    from ..render.files import DotFailedError, DotNotFoundError

    try:
        return graph.render(path, depth if depth is not None else ("ops" if ops else None))
    except (DotNotFoundError, DotFailedError, DiagramTooLargeError) as e:  # their messages already say what to do
        raise CliError(str(e)) from e
