"""Kept tensor values (``capture(keep=...)``) beside a saved capture, as safetensors (no code runs on load)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from ..errors import FormatError

if TYPE_CHECKING:
    import torch

    from ..graph import Graph

_MISSING = ("saving or loading the values a capture kept (keep=) needs the safetensors package: "
            "pip install safetensors (or pip install 'dispatchtrace[values]')")


def values_path(path: str | os.PathLike[str]) -> str:
    """Where the kept values of a capture saved at ``path`` go: ``trace.json`` -> ``trace.values.safetensors``.

    >>> values_path("out/trace.json"), values_path("trace")
    ('out/trace.values.safetensors', 'trace.values.safetensors')
    """
    root, ext = os.path.splitext(os.fspath(path))
    return f"{root if ext == '.json' else root + ext}.values.safetensors"


def _safetensors() -> Any:
    try:
        import safetensors.torch as st
    except ImportError:
        raise ImportError(_MISSING) from None
    return st


def write_kept(graph: Graph, path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """Write ``graph.kept`` beside ``path``; the JSON entry that names the file and the tensors in it."""
    if not graph.kept:
        return None
    st = _safetensors()
    target = values_path(path)
    st.save_file({str(rid): t.contiguous() for rid, t in graph.kept.items()}, target,
                 metadata={"format": "dispatchtrace values"})
    return {"file": os.path.basename(target), "tensors": sorted(graph.kept)}


def read_kept(entry: dict[str, Any], folder: str, where: str) -> dict[int, torch.Tensor]:
    """The tensors a saved ``kept`` entry names, read from its file in ``folder``."""
    st = _safetensors()
    target = os.path.join(folder, entry["file"])
    if not os.path.exists(target):
        raise FormatError(f"{where} names kept values in {entry['file']}, which is not beside it in {folder or '.'}; "
                          "copy that file with the JSON (or save the capture again)")
    tensors = st.load_file(target)
    ids = [int(i) for i in entry["tensors"]]
    missing = [i for i in ids if str(i) not in tensors]
    if missing:
        raise FormatError(f"{target} lacks kept tensors {missing[:5]}: it belongs to another capture; save again")
    return {i: tensors[str(i)] for i in ids}
