"""The one walker over nested values: op arguments and results, and what module calls take and return.

Two shapes of nesting, each walked here and nowhere else:

- op arguments and results (what the dispatcher passes): tensors inside plain lists and tuples
  (``Tensor[]``, ``Tensor?[]``, multi-output results). ``tensor_leaves`` flattens them: capture
  numbers an op's outputs and replay unpacks them by this one order; ``map_leaves`` rebuilds them
  with each leaf replaced (capture: tensors to refs; replay: refs to nodes; costs: refs to meta
  tensors); ``iter_leaves`` visits the leaves (serialization collects the refs).
- module-call arguments and results (what user code passes): also dicts, namedtuples and
  dataclasses; ``leaves`` gives each tensor with its access path, ``tensors_in`` the tensors,
  ``template`` the structure with refs in place of tensors (other objects that hold tensors as
  ``Built`` records, ``rebuild`` makes them again).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import torch

_PLAIN_MODULES = frozenset({"builtins", "collections"})


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


@dataclasses.dataclass(frozen=True, slots=True)
class Built:
    """An object of another type than a list, tuple, dict, namedtuple or dataclass inside what a call
    returned, that holds tensors: how to make it again around other tensors (``rebuild``).

    ``type`` is its class as ``module.QualName``; ``how`` is ``"pytree"`` for a type registered with
    torch's pytree (Hugging Face's ``ModelOutput``: ``fields`` its children, ``context`` pytree's
    context) or ``"object"`` for any other object (a Hugging Face ``DynamicCache``: ``fields`` its
    ``__dict__``, ``context`` ``None``), each field a template itself.
    """

    type: str
    how: str
    context: Any
    fields: Any
    cls: type | None = dataclasses.field(default=None, compare=False, repr=False)
    """The class itself while this process has it (a class from a saved file is imported by ``type``)."""


def template(value: Any, read: Any, node_of: Callable[[type], Any] | None = None, _depth: int = 0) -> Any:
    """``value`` with every tensor replaced by ``read(tensor)``: tuples, lists and dicts kept,
    namedtuples and dataclasses as dicts of their fields, ``None``, scalars, dtypes and devices as
    they are, the rest as ``None``; with ``node_of`` (torch's pytree registry: ``_torch.pytree_node``),
    objects that hold tensors as ``Built`` records instead (a type ``node_of`` knows by its children,
    any other by its attributes), as what a call returned is recorded.

    >>> template({"a": torch.ones(1), "b": [None, 3, torch.zeros(2)]}, lambda t: tuple(t.shape))
    {'a': (1,), 'b': [None, 3, (2,)]}
    >>> class Cache:
    ...     def __init__(self): self.keys, self.seen = [torch.ones(2)], 1
    >>> template(Cache(), lambda t: tuple(t.shape), lambda cls: None).fields
    {'keys': [(2,)], 'seen': 1}
    """
    if isinstance(value, torch.Tensor):
        return read(value)
    if value is None or type(value) in (int, float, bool, str) or _depth > 32:
        return value if _depth <= 32 else None
    if isinstance(value, (torch.device, torch.dtype)):
        return value
    cls = type(value)
    if node_of is not None and cls.__module__ not in _PLAIN_MODULES:
        node = node_of(cls)
        if node is not None:
            children, context = node[0](value)
            return Built(_name(cls), "pytree", context, [template(c, read, node_of, _depth + 1) for c in children], cls)
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return {name: template(getattr(value, name), read, node_of, _depth + 1) for name in value._fields}
    if isinstance(value, (list, tuple)):
        return type(value)(template(v, read, node_of, _depth + 1) for v in value) if type(value) in (list, tuple) \
            else [template(v, read, node_of, _depth + 1) for v in value]
    if isinstance(value, dict):
        return {k: template(v, read, node_of, _depth + 1) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: template(getattr(value, f.name), read, node_of, _depth + 1) for f in dataclasses.fields(value)}
    attrs = getattr(value, "__dict__", None)
    if node_of is not None and type(attrs) is dict and not isinstance(value, (type, torch.nn.Module)) \
            and _holds_tensor(attrs, 0):
        return Built(_name(cls), "object", None, {k: template(v, read, node_of, _depth + 1) for k, v in attrs.items()}, cls)
    return None


def _name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _holds_tensor(value: Any, depth: int) -> bool:
    """Whether a tensor is inside ``value`` (lists, tuples, dicts and objects' attributes, 6 deep)."""
    if isinstance(value, torch.Tensor):
        return True
    if depth > 6 or value is None or type(value) in (int, float, bool, str):
        return False
    if isinstance(value, (list, tuple)):
        return any(_holds_tensor(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return any(_holds_tensor(v, depth + 1) for v in value.values())
    attrs = getattr(value, "__dict__", None)
    return type(attrs) is dict and not isinstance(value, (type, torch.nn.Module)) and _holds_tensor(attrs, depth + 1)


# ---- op arguments and results: plain lists, tuples (and dicts) ------------------------------


def tensor_leaves(value: Any) -> list[torch.Tensor]:
    """The tensors of an op result or argument, in order, through nested lists and tuples (``None`` dropped).

    Capture numbers an op's outputs in this order (``%split[1]``); the replayed graph calls it to
    unpack results whose structure has optional tensors.

    >>> [t.shape for t in tensor_leaves((torch.ones(2), None, [torch.zeros(3)]))]
    [torch.Size([2]), torch.Size([3])]
    """
    if isinstance(value, torch.Tensor):
        return [value]
    out: list[torch.Tensor] = []
    if isinstance(value, (list, tuple)):
        for v in value:
            if isinstance(v, torch.Tensor):
                out.append(v)
            elif isinstance(v, (list, tuple)):
                out.extend(tensor_leaves(v))
    return out


def map_leaves(value: Any, fn: Callable[[Any], Any]) -> Any:
    """``value`` with every leaf replaced by ``fn(leaf)``; lists, tuples and dicts (exact types) kept.

    Subclasses (``torch.Size``, namedtuples) are leaves.

    >>> map_leaves((1, [2, 3], {"k": 4}), lambda v: v * 10)
    (10, [20, 30], {'k': 40})
    """
    t = type(value)
    if t is list or t is tuple:
        return t([map_leaves(v, fn) for v in value])
    if t is dict:
        return {k: map_leaves(v, fn) for k, v in value.items()}
    return fn(value)


def iter_leaves(value: Any) -> Iterator[Any]:
    """Every leaf of ``value`` as ``map_leaves`` sees it, in order.

    >>> list(iter_leaves(((1, [2]), {"k": 3})))
    [1, 2, 3]
    """
    t = type(value)
    if t is list or t is tuple:
        for v in value:
            yield from iter_leaves(v)
    elif t is dict:
        for v in value.values():
            yield from iter_leaves(v)
    else:
        yield value
