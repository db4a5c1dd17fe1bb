"""Walks nested Python values (tuples, lists, dicts, namedtuples, dataclasses) for tensors."""

from __future__ import annotations

import dataclasses
from typing import Any, Iterator

import torch


def leaves(value: Any, path: str = "", _depth: int = 0) -> Iterator[tuple[str, torch.Tensor]]:
    """Every tensor inside ``value`` with an access path.

    >>> [p for p, _ in leaves({"a": torch.ones(1), "b": (None, torch.zeros(2))}, "x")]
    ["x['a']", "x['b'][1]"]
    """
    if isinstance(value, torch.Tensor):
        yield path, value
    elif _depth > 32:
        return
    elif isinstance(value, tuple) and hasattr(value, "_fields"):
        for name in value._fields:
            yield from leaves(getattr(value, name), f"{path}.{name}", _depth + 1)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from leaves(v, f"{path}[{i}]", _depth + 1)
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from leaves(v, f"{path}[{k!r}]", _depth + 1)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield from leaves(getattr(value, f.name), f"{path}.{f.name}", _depth + 1)
