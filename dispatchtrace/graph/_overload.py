"""An op's ``target`` text back as torch's ``OpOverload`` (the views' formulas and replay look it up)."""

from __future__ import annotations

import functools
from typing import Any

import torch


@functools.cache
def overload_of(target: str) -> Any:
    """The ``OpOverload`` an op's ``target`` text names, or ``None`` when torch does not know it
    (an op of a library that is not imported).

    >>> overload_of("aten.convolution.default")
    <OpOverload(op='aten.convolution', overload='default')>
    >>> overload_of("nolib.nothing.default") is None
    True
    """
    ns, _, rest = target.partition(".")
    name, _, overload = rest.rpartition(".")
    try:
        return getattr(getattr(getattr(torch.ops, ns), name), overload)
    except (AttributeError, RuntimeError):
        return None
