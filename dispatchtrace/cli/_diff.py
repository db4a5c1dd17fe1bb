"""``dispatchtrace diff A.json B.json [-o diff.html]``: where two saved captures part (exit 0 agree, 1 differ, 2 error, like diff)."""

from __future__ import annotations

import argparse
import glob
from collections.abc import Sequence
from pathlib import Path

from ..graph import Graph
from ..render import write_diff
from ..serialize import load, load_ranks
from ..views import diff, diff_report
from ._errors import ArgumentParser, CliError


def parser() -> argparse.ArgumentParser:
    p = ArgumentParser(
        prog="dispatchtrace diff",
        description="Align two saved captures (module calls by path and call index, then the ops inside each call) "
        "and report the structural differences, the first op whose results depart beyond tolerance while its "
        "inputs did not, and the largest relative difference of each call's outputs. Values are compared "
        "through kept tensors, else statistics (capture with --values stats). Exit status 0 when they agree, "
        "1 when they differ (in structure or in values: a structural difference alone, values agreeing, is 1), 2 on an error. -o diff.html also writes the page of the diff (render/_diff_page.py).",
        examples=["dispatchtrace diff fp32.json bf16.json", "dispatchtrace diff trace.rank0.json trace.rank1.json",
                  "dispatchtrace diff a.json b.json --rtol 1e-3 --depth 1", "dispatchtrace diff fp32.json bf16.json -o diff.html",
                  "dispatchtrace diff single.json 'tp.rank*.json'"],
    )
    p.add_argument("a", metavar="A.json", help="the reference capture, or a parallel job's rank files as a quoted glob "
                   "('tp.rank*.json': their values made whole from the ranks' shards)")
    p.add_argument("b", metavar="B.json", help="the capture compared with it (or a quoted glob of rank files)")
    p.add_argument("--rtol", type=float, default=1e-5, help="relative tolerance (default 1e-5)")
    p.add_argument("--atol", type=float, default=1e-8, help="absolute tolerance (default 1e-8)")
    p.add_argument("--depth", type=int, default=2, metavar="N", help="show calls down to this depth (default 2)")
    p.add_argument("-o", "--output", metavar="diff.html", help="also write the diff as one self-contained HTML page: the "
                   "aligned call tree coloured by divergence, both sides' details, the first departure")
    p.add_argument("--title", help="the page's title (default: the model's type)")
    return p


def _side(path: str) -> object:
    """One capture, or a parallel job's ``{rank: Graph}`` when ``path`` is a glob (``'tp.rank*.json'``); a missing,
    foreign or damaged file is one line naming it (exit 2)."""
    if not glob.has_magic(path):
        return _read(path)
    try:
        return load_ranks(path)
    except (OSError, ValueError) as e:
        raise CliError(str(e)) from e


def run(argv: Sequence[str]) -> int:
    args = parser().parse_args(list(argv))
    if args.output is not None:
        _check_page(args.output)
    a, b = _side(args.a), _side(args.b)
    try:
        d = diff(a, b, rtol=args.rtol, atol=args.atol)
    except (OSError, ValueError) as e:
        raise CliError(str(e)) from e
    print(diff_report(d, depth=args.depth))
    if args.output:
        try:
            Path(args.output).parent.mkdir(parents=True, exist_ok=True)
            write_diff(d, args.output, title=args.title)
        except (OSError, ValueError) as e:
            raise CliError(str(e)) from e
        print(f"wrote {args.output}")
    return 0 if d.agree else 1


def _check_page(path: str) -> None:
    """``-o`` names an HTML page: refused before any file is read, as the main command refuses a bad suffix."""
    if not path.lower().endswith((".html", ".htm")):
        raise CliError(f"-o {path}: a diff renders to one HTML page; name it like diff.html")


def _read(path: str) -> Graph:
    """A saved capture; a missing, foreign or damaged file is one line naming it (exit 2)."""
    p = Path(path)
    if p.is_dir():
        raise CliError(f"{path} is a folder; name a capture file in it (written by g.save('trace.json'))")
    if not p.is_file():
        raise CliError(f"no such file: {path} (save a capture with g.save('{p.name}'))")
    try:
        return load(path)
    except (OSError, ValueError) as e:
        raise CliError(str(e)) from e
