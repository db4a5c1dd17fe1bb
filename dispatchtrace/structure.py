"""Walks nested Python values (tuples, lists, dicts, namedtuples, dataclasses) for tensors."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

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


def tensors_in(value: Any) -> list[torch.Tensor]:
    """The tensors of ``leaves(value)`` without their paths; fast for flat tuples and lists.

    >>> [t.shape[0] for t in tensors_in((torch.ones(1), 2, [torch.ones(3)]))]
    [1, 3]
    """
    if isinstance(value, torch.Tensor):
        return [value]
    if type(value) is tuple or type(value) is list:
        out = []
        for v in value:
            if isinstance(v, torch.Tensor):
                out.append(v)
            elif v is None or type(v) in (int, float, bool, str):
                continue
            else:
                out.extend(tensors_in(v))
        return out
    return [t for _, t in leaves(value)]


def template(value: Any, read: Any, _depth: int = 0) -> Any:
    """``value`` with every tensor replaced by ``read(tensor)``: tuples, lists and dicts kept,
    namedtuples and dataclasses as dicts of their fields, ``None`` and scalars as they are,
    other objects as ``None``.

    >>> template({"a": torch.ones(1), "b": [None, 3, torch.zeros(2)]}, lambda t: tuple(t.shape))
    {'a': (1,), 'b': [None, 3, (2,)]}
    """
    if isinstance(value, torch.Tensor):
        return read(value)
    if value is None or type(value) in (int, float, bool, str) or _depth > 32:
        return value if _depth <= 32 else None
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return {name: template(getattr(value, name), read, _depth + 1) for name in value._fields}
    if isinstance(value, (list, tuple)):
        return type(value)(template(v, read, _depth + 1) for v in value) if type(value) in (list, tuple) \
            else [template(v, read, _depth + 1) for v in value]
    if isinstance(value, dict):
        return {k: template(v, read, _depth + 1) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: template(getattr(value, f.name), read, _depth + 1) for f in dataclasses.fields(value)}
    return None
