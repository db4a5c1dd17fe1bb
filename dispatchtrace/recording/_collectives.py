"""What a collective's process-group and reduce-op arguments mean, as plain records capture keeps.

A c10d op (``c10d.allreduce_``) takes a ``ProcessGroup`` and a ``ReduceOp`` as ``torch.ScriptObject``
arguments, a functional collective (``_c10d_functional.all_reduce``) the group's name. A graph holds
no live process objects: capture replaces each by what it means, a ``Group`` (the global ranks in
it, the capturing rank) or the reduce op's name (``"sum"``, as the functional forms spell it).
Records save to JSON and load back as they were.
"""

from __future__ import annotations

from typing import Any

import torch

from .._torch import reduce_op_code
from ..graph import Group, Opaque


def recorded_object(a: Any) -> Any:
    """An argument leaf that is neither a tensor nor a plain value, as capture records it: a
    process group as its ``Group``, a reduce op as its name (an ``Opaque`` where torch cannot say it), any other c10d ``torch.ScriptObject``
    (a ``Work``) as an ``Opaque`` naming its class; anything else as it is."""
    if isinstance(a, torch.ScriptObject):
        kind = a._type().qualified_name()
        if kind.endswith(".c10d.ProcessGroup"):
            return group_of(torch.distributed.ProcessGroup.unbox(a))
        if kind.endswith(".c10d.ReduceOp"):  # on torch 2.8 it cannot say which: kept as an Opaque
            code = reduce_op_code(a)
            return reduce_name(code) if code is not None else Opaque(kind, "<ReduceOp>")
        if ".c10d." in kind:  # a Work: a handle on this process's pending communication
            return Opaque(kind, f"<{kind.rpartition('.')[2]}>")
        return a  # another torchbind object (a profiler _RecordFunction): replay passes it back
    if torch.distributed.is_available() and isinstance(a, torch.distributed.ProcessGroup):
        return group_of(a)
    return a


def reduce_name(op: Any) -> str:
    """``"sum"``, ``"max"``, ...: a ``ReduceOp`` (or its ``RedOpType`` number) by name.

    >>> reduce_name(4)
    'max'
    """
    from torch.distributed import ReduceOp

    for name, value in ReduceOp.RedOpType.__members__.items():
        if int(value) == int(op):
            return name.lower()
    return str(op)


def group_of(pg: Any) -> Group:
    """The ``Group`` of a live ``ProcessGroup``."""
    import torch.distributed as dist

    ranks = tuple(dist.get_process_group_ranks(pg))
    try:
        backend = str(dist.get_backend(pg))
    except (RuntimeError, ValueError):
        backend = ""
    return Group(str(pg.group_name), ranks, dist.get_rank(), backend)


def named_group(name: Any) -> Any:
    """A functional collective's group-name argument as its ``Group`` (the name as it is when
    the group is unknown here)."""
    if not isinstance(name, str):
        return recorded_object(name)
    from torch.distributed.distributed_c10d import _resolve_process_group

    try:
        return group_of(_resolve_process_group(name))
    except (RuntimeError, ValueError, KeyError):
        return name


def with_groups(args: tuple[Any, ...], kwargs: dict[str, Any], position: int, name: str) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Recorded arguments with the group-name argument (at ``position`` or keyword ``name``)
    replaced by its ``Group``."""
    if position < len(args):
        args = (*args[:position], named_group(args[position]), *args[position + 1:])
    elif name in kwargs:
        kwargs = {**kwargs, name: named_group(kwargs[name])}
    return args, kwargs
