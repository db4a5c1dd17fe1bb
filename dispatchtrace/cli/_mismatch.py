"""``dispatchtrace mismatch FILE...``: the first collective where ranks' captures disagree (why a job hangs)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from ..serialize import load_ranks
from ..views import mismatch
from ._errors import ArgumentParser, CliError


def parser() -> argparse.ArgumentParser:
    p = ArgumentParser(
        prog="dispatchtrace mismatch",
        description="Read the captures of several ranks (one JSON file per rank, named like trace.rank0.json: "
        "dt.rank_path) and report the first collective where they disagree (kind, process group, reduce op, "
        "shapes or order), with each rank's call and source line. Exit status 0 when every group's ranks "
        "issued the same collectives, 1 when they do not, 2 for a usage error (one file), 3 when no capture "
        "holds a collective.",
        examples=["dispatchtrace mismatch trace.rank*.json", "dispatchtrace mismatch a.rank0.json a.rank1.json --list"],
    )
    p.add_argument("files", nargs="+", help="rank files (a shell glob, or a quoted pattern such as 'trace.rank*.json')")
    p.add_argument("--list", action="store_true", help="also print every rank's collectives")
    return p


def run(argv: Sequence[str]) -> int:
    args = parser().parse_args(list(argv))
    files = args.files[0] if len(args.files) == 1 else args.files
    try:
        ranks = load_ranks(files)
    except (OSError, ValueError) as e:
        raise CliError(str(e)) from e
    if args.list:
        for rank, graph in ranks.items():
            print(f"rank {rank}:")
            print("\n".join(f"  {line}" for line in str(graph.collectives()).splitlines()))
    if len(ranks) < 2:
        raise CliError(f"{len(ranks)} rank file ({', '.join(f'rank {r}' for r in ranks)}): a mismatch needs the files of "
                       f"two ranks or more; pass every rank's file ('trace.rank*.json')")
    counts = {r: len(g.collectives()) for r, g in ranks.items()}
    if not any(counts.values()):
        print(f"nothing to compare: none of the {len(ranks)} ranks' captures holds a collective (capture the forward "
              f"that runs torch.distributed collectives on every rank)")
        return NOTHING
    found = mismatch(ranks)
    if found is None:
        print(f"{len(ranks)} ranks agree on every collective ({', '.join(f'rank {r}: {n}' for r, n in counts.items())})")
        return 0
    print(found)
    return 1


NOTHING = 3
"""The exit status when no rank's capture holds a collective: there is nothing to agree or disagree on."""
