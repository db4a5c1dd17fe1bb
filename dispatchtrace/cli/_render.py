"""``dispatchtrace render trace.json -o out.svg --depth 2``: views and diagrams of a saved capture."""

from __future__ import annotations

import argparse
import glob
from collections.abc import Sequence
from pathlib import Path

from ..errors import SpecError
from ..graph import Graph
from ..hardware import DeviceSpec
from ..render import TIMELINES, for_path, groups_json, per_rank, write_ranks
from ..serialize import FormatError, load, load_ranks
from ..views import Estimate, estimate_ranks, has_backward
from ._errors import ArgumentParser, CliError
from ._options import (
    add_estimate_arguments,
    add_output_arguments,
    add_view_arguments,
    check_options,
    check_outputs,
    spec_from,
    tree_of,
    write_outputs,
)


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
                   "with -o ranks.html: one page with a tab per rank and their collectives aligned; with --estimate, "
                   "each rank estimated (the slowest rank, the skew) and -o step.trace.json / step.et per rank")
    add_view_arguments(p, summary=True)
    add_output_arguments(p)
    add_estimate_arguments(p)
    p.add_argument("--summary", action="store_true",
                   help="print the table of calls with parameters, FLOPs and bytes, from the model's call down to --depth")
    return p


def run(argv: Sequence[str]) -> int:
    """Entry point of ``dispatchtrace render``; returns the exit status."""
    args = parser().parse_args(list(argv))
    check_outputs(args.output)
    spec = spec_from(args)
    if len(args.trace) > 1 or glob.has_magic(args.trace[0]):
        return _ranks(args, spec)
    show_tree = (not args.output and not args.summary) or args.tree
    check_options(args, tree=show_tree, summary=args.summary)
    graph = read(args.trace[0])
    estimate = _estimate(graph, spec, args)  # before the views: they show it
    if args.phase == "backward" and not has_backward(graph):
        raise CliError("--phase backward: there is no backward phase in this capture; render a capture of a training step (`dispatchtrace MODEL --train -o trace.json`, or one with loss.backward() inside the block)")
    if args.summary:
        print(graph.summary("all" if args.depth is None else args.depth, phase=args.phase))
    if show_tree:
        print(tree_of(graph, args.depth, ops=args.ops, noise=args.noise, at=args.at, statements=args.statements,
                      phase=args.phase, metrics=args.metrics))
    write_outputs(graph, args, stdout=not (args.tree or args.summary))
    if estimate is not None:
        print(estimate)
    return 0


def _ranks(args: argparse.Namespace, spec: DeviceSpec | None) -> int:
    """Several rank files: one HTML page with a tab per rank and their collectives aligned; with ``--estimate``
    each rank estimated (printed: the slowest rank, the skew), on the page too, and a timeline file per rank."""
    timelines = [o for o in args.output if for_path(o) is not None and for_path(o).name in TIMELINES]
    pages = [o for o in args.output if o.lower().endswith((".html", ".htm"))]
    if len(pages) + len(timelines) != len(args.output) or not args.output and spec is None:
        raise CliError("several rank files render to one HTML page: add -o ranks.html (with --estimate, also a "
                       "timeline per rank: -o step.trace.json, -o step.et)")
    if timelines and spec is None:
        raise CliError(f"-o {timelines[0]}: a rank's timeline needs times: add --estimate SPEC")
    try:
        ranks = load_ranks(args.trace[0] if len(args.trace) == 1 else args.trace)
        job = None if spec is None else estimate_ranks(ranks, spec, ranks_per_node=args.ranks_per_node)
    except (FormatError, SpecError, ValueError, FileNotFoundError) as e:
        raise CliError(str(e)) from e
    if job is not None:
        print(job)
    for out in pages:
        write_ranks(ranks, out, estimate=job)
        print(f"wrote {out} ({len(ranks)} rank{'s' * (len(ranks) != 1)})")
    for out in timelines:
        for rank, graph in ranks.items():
            path = per_rank(out, rank)
            graph.render(path, estimate=job[rank] if job is not None else None)
        print(f"wrote {per_rank(out, '*')} ({len(ranks)} files)")
        if for_path(out).name == "chakra":
            groups = Path(out).with_name(Path(out).name.removesuffix(".et") + ".groups.json")
            groups.write_text(groups_json(ranks))
            print(f"wrote {groups} (the process groups, for ASTRA-sim's --comm-group-configuration)")
    return 0


def _estimate(graph: Graph, spec: DeviceSpec | None, args: argparse.Namespace) -> Estimate | None:
    if spec is None:
        return None
    try:
        return graph.estimate(spec, ranks_per_node=args.ranks_per_node)
    except SpecError as e:
        raise CliError(str(e)) from e


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
