"""Captures of several ranks: one file per rank, named ``<stem>.rank<N>.json``, loaded back by rank.

Under ``torchrun`` each process captures its own forward and saves it with ``rank_path``:

    with dt.capture(model) as g:
        model(x)
    g.save(dt.rank_path("trace.json"))        # trace.rank3.json on rank 3

``dt.load_ranks("trace.rank*.json")`` (or a list of paths) reads them back as ``{rank: Graph}``.

>>> rank_path("out/trace.json", rank=3)
'out/trace.rank3.json'
>>> rank_of("out/trace.rank12.json"), rank_of("trace.json")
(12, None)
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Iterable

from ..graph import Graph, Group
from ._load import load

_RANK = re.compile(r"\.rank(\d+)(?=\.[^.]+$)")


def rank_path(path: str | os.PathLike[str], rank: int | None = None) -> str:
    """``path`` with ``.rank<N>`` before its suffix; ``rank`` defaults to this process's
    ``torch.distributed`` rank (0 when no process group is initialized)."""
    if rank is None:
        import torch.distributed as dist

        rank = dist.get_rank() if dist.is_available() and dist.is_initialized() else 0
    stem, suffix = os.path.splitext(os.fspath(path))
    return f"{stem}.rank{rank}{suffix or '.json'}"


def rank_of(path: str | os.PathLike[str]) -> int | None:
    """The rank a file name says (``trace.rank3.json`` -> 3), else ``None``."""
    found = _RANK.search(os.path.basename(os.fspath(path)))
    return int(found.group(1)) if found else None


def load_ranks(paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> dict[int, Graph]:
    """``{rank: Graph}`` from rank files (a glob pattern such as ``"trace.rank*.json"``, or paths).

    The rank comes from the file name, else from the capture's collectives (the rank that
    recorded them); a file that says neither, or two files of one rank, is an error."""

    if isinstance(paths, (str, os.PathLike)):
        pattern = os.fspath(paths)
        names = sorted(glob.glob(pattern)) if glob.has_magic(pattern) else [pattern]
        if not names:
            raise FileNotFoundError(f"no file matches {pattern!r}; rank files are named like trace.rank0.json")
    else:
        names = [os.fspath(p) for p in paths]
    out: dict[int, Graph] = {}
    for name in names:
        graph = load(name)
        rank = rank_of(name)
        if rank is None:
            rank = next((a.rank for op in graph.ops for a in op.args if isinstance(a, Group)), None)
        if rank is None:
            raise ValueError(f"{name}: cannot tell its rank; name rank files like trace.rank0.json (dt.rank_path)")
        if rank in out:
            raise ValueError(f"{name}: a second capture of rank {rank}; pass one file per rank")
        out[rank] = graph
    return dict(sorted(out.items()))
