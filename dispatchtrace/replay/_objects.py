"""Objects the forward returned, made again around the replayed tensors (``structure.Built``)."""

from __future__ import annotations

import importlib
from typing import Any

from .._structure import Built
from .._torch import pytree_node


def built_type(built: Built) -> type:
    """The class a ``Built`` names, imported; ``ImportError`` saying what to import when it cannot be found."""
    if built.cls is not None:
        return built.cls
    module, _, qualname = built.type.rpartition(".")
    while module:
        try:
            obj: Any = importlib.import_module(module)
        except ImportError:
            module, _, head = module.rpartition(".")
            qualname = f"{head}.{qualname}"
            continue
        for part in qualname.split("."):
            obj = getattr(obj, part, None)
        if isinstance(obj, type):
            return obj
        break
    raise ImportError(f"cannot find the class {built.type} that the forward returned an object of; install and "
                      f"import the library that defines it before replaying")


def rebuild(built: Built, fields: Any) -> Any:
    """An object like the one ``built`` recorded, with ``fields`` (its children or attributes, the
    replayed tensors in place) put in.

    >>> import torch
    >>> from dispatchtrace._structure import template
    >>> class Box:
    ...     def __init__(self): self.t, self.n = torch.ones(1), 2
    >>> box = rebuild(template(Box(), lambda t: t, pytree_node), {"t": torch.zeros(1), "n": 2})
    >>> type(box).__name__, box.t, box.n
    ('Box', tensor([0.]), 2)
    """
    cls = built_type(built)
    if built.how == "pytree":
        node = pytree_node(cls)
        if node is None:
            raise TypeError(f"{built.type} is no longer registered with torch's pytree; register it (import the library "
                            f"that does) before replaying")
        return node[1](list(fields), built.context)
    obj = cls.__new__(cls)
    obj.__dict__.update(fields)
    return obj
