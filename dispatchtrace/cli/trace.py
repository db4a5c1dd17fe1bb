"""``dispatchtrace MODEL``: capture one forward pass, print its tree or write diagrams."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import torch

from ..capture import capture
from ..depth import Depth
from ..graph import Graph
from ..render.formats import for_path
from ..views.tree import Tree
from .errors import ArgumentParser, CliError
from .models import load_model, parse_inputs
from .options import add_model_arguments, add_output_arguments, check_outputs, forward_error, parse_depth, write_output


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
    p.add_argument("--depth", type=parse_depth, default=None, metavar="N|auto|ops|all",
                   help="open module calls down to depth N (the model's call is 0); auto: a readable depth; ops: every op; "
                   "all: every call (see docs/cli.md); default: all for the tree, auto for diagrams")
    p.add_argument("--ops", action="store_true", help="also list the ATen ops inside the calls shown")
    p.add_argument("--noise", action="store_true",
                   help="show the bookkeeping ops nothing reads (autograd's detach, batch-norm counters), hidden by default")
    p.add_argument("--at", metavar="CALL", default=None,
                   help="start the tree at this module call, named by its label as the tree prints it (layer1.0, "
                   "layer1.0.relu#2); --depth counts from it")
    p.add_argument("--statements", action="store_true",
                   help="group the items of each call under the source line that issued them (main_path = self.pool(...))")
    add_output_arguments(p)
    return p


def run(argv: Sequence[str]) -> int:
    args = parser().parse_args(list(argv))
    check_outputs(args.output)
    model = load_model(args.model, device=args.device)
    inputs = parse_inputs(args.input, dtype=args.dtype, device=args.device, model=model)
    graph = trace(model, inputs, name=args.model)
    if graph.notes:  # what the capture could not see (a scripted module's calls): one line
        print("dispatchtrace: note: " + " ".join(graph.notes), file=sys.stderr)
    if not args.output or args.tree:
        print(tree_of(graph, args.depth, ops=args.ops, noise=args.noise, at=args.at, statements=args.statements))
    for out in args.output:
        write(graph, out, depth=args.depth, ops=args.ops, noise=args.noise, at=args.at, statements=args.statements)
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


def tree_of(graph: Graph, depth: Depth | None, *, ops: bool = False, noise: bool = False, at: str | None = None,
            statements: bool = False) -> Tree:
    """``graph.tree(...)`` (``depth`` not given: ``"all"``) with an unknown or ambiguous ``at`` label as a ``CliError``."""
    try:
        return graph.tree("all" if depth is None else depth, ops=ops, noise=noise, at=at, statements=statements)
    except (ValueError, KeyError) as e:
        raise CliError(str(e.args[0]) if e.args else str(e)) from e


def write(graph: Graph, path: str | Path, *, depth: Depth | None = None, ops: bool = False, noise: bool = False,
          at: str | None = None, statements: bool = False) -> Path:
    """Write one ``-o`` file through the format registry (``cli.options.write_output``).

    Without ``--depth``, a ``.txt`` tree is ``"all"`` (the tree as printed), diagrams are ``"ops"``
    with ``--ops``, else ``"auto"``; ``at`` and ``statements`` apply to the tree only.
    """
    if depth is None:
        fmt = for_path(path)
        depth = "all" if fmt is not None and fmt.name == "tree" else ("ops" if ops else "auto")
    return write_output(graph, path, depth=depth, ops=ops, noise=noise, at=at, statements=statements)
