"""``dispatchtrace render trace.json -o out.svg --depth 2``: views and diagrams of a saved capture."""

from __future__ import annotations

import argparse
import glob
from collections.abc import Sequence
from pathlib import Path

from ..graph import Graph
from ..render import write_ranks
from ..serialize import FormatError, load, load_ranks
from ..views import has_backward
from ._errors import ArgumentParser, CliError
from ._options import add_output_arguments, add_view_arguments, check_options, check_outputs, tree_of, write_outputs


def parser() -> argparse.ArgumentParser:
    p = ArgumentParser(
        prog="dispatchtrace render",
        description="Show or draw a capture saved with g.save('trace.json') (or `dispatchtrace MODEL -o trace.json`); "
        "no model and no torch tensors needed.",
        examples=["dispatchtrace render trace.json -o out.svg --depth 2", "dispatchtrace render trace.json --summary",
                  "dispatchtrace render trace.json --at max_pool#2 --ops"],
    )
    p.add_argument("trace", metavar="TRACE.json", nargs="+",
                   help="a capture written by g.save(path); several rank files, or a glob ('trace.rank*.json'), "
                   "with -o ranks.html: one page with a tab per rank and their collectives aligned")
    add_view_arguments(p, summary=True)
    add_output_arguments(p)
    p.add_argument("--summary", action="store_true",
                   help="print the table of calls with parameters, FLOPs and bytes, from the model's call down to --depth")
    return p


def run(argv: Sequence[str]) -> int:
    """Entry point of ``dispatchtrace render``; returns the exit status."""
    args = parser().parse_args(list(argv))
    check_outputs(args.output)
    if len(args.trace) > 1 or glob.has_magic(args.trace[0]):
        return _ranks(args)
    show_tree = (not args.output and not args.summary) or args.tree
    check_options(args, tree=show_tree, summary=args.summary)
    graph = read(args.trace[0])
    if args.phase == "backward" and not has_backward(graph):
        raise CliError("--phase backward: there is no backward phase in this capture; render a capture of a training step (`dispatchtrace MODEL --train -o trace.json`, or one with loss.backward() inside the block)")
    if args.summary:
        print(graph.summary("all" if args.depth is None else args.depth, phase=args.phase))
    if show_tree:
        print(tree_of(graph, args.depth, ops=args.ops, noise=args.noise, at=args.at, statements=args.statements,
                      phase=args.phase))
    write_outputs(graph, args, stdout=not (args.tree or args.summary))
    return 0


def _ranks(args: argparse.Namespace) -> int:
    """Several rank files: one HTML page with a tab per rank and their collectives aligned."""

    pages = [o for o in args.output or [] if o.lower().endswith((".html", ".htm"))]
    if not pages or len(pages) != len(args.output):
        raise CliError("several rank files render to one HTML page only: add -o ranks.html")
    try:
        ranks = load_ranks(args.trace[0] if len(args.trace) == 1 else args.trace)
    except (FormatError, ValueError, FileNotFoundError) as e:
        raise CliError(str(e)) from e
    for out in pages:
        write_ranks(ranks, out)
        print(f"wrote {out} ({len(ranks)} rank{'s' * (len(ranks) != 1)})")
    return 0


def read(path: str) -> Graph:
    """A saved capture; a missing, foreign, damaged or newer file becomes a one-line ``CliError``."""
    if Path(path).is_dir():
        raise CliError(f"{path} is a folder; name a capture file in it (written by g.save('trace.json'))")
    if not Path(path).is_file():
        raise CliError(f"no such file: {path} (save a capture with g.save('{Path(path).name}'))")
    try:
        return load(path)
    except FormatError as e:
        raise CliError(str(e)) from e
