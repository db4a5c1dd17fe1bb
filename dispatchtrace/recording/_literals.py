"""Literal constants: the values of small tensors a forward builds from Python data, kept as plain data."""

from __future__ import annotations

import torch

from .._torch import disable_current_modes, has_values
from ..graph import Literal

CONSTANTS_LIMIT = 4096
"""Default byte limit per tensor for ``capture(constants=...)``."""

LIFTS = frozenset({"aten.lift_fresh.default", "aten.lift_fresh_copy.default", "aten.lift.default"})
"""Ops that take a tensor built from Python data into the dispatcher (``torch.tensor(0.5)``, ``mask[...] = 3``)."""


def literal_of(t: torch.Tensor, limit: int) -> Literal:
    """What ``capture`` keeps of the constant ``t``: its values when it has them and is at most ``limit`` bytes.

    >>> literal_of(torch.tensor([[1.0, 2.0]]), CONSTANTS_LIMIT)
    Literal(dtype='float32', shape=(1, 2), values=(1.0, 2.0), why=None)
    >>> literal_of(torch.zeros(2000), CONSTANTS_LIMIT).why
    'it is 8000 bytes, over the capture limit of 4096 (dt.capture(model, constants=8000) keeps it)'
    """
    dtype, shape = str(t.dtype).removeprefix("torch."), tuple(int(s) for s in t.shape)
    if not has_values(t):
        kind = "meta" if t.device.type == "meta" else "fake"
        return Literal(dtype, shape, None, f"{kind} tensors hold no values")
    if limit <= 0:
        return Literal(dtype, shape, None, "recording constants is off (dt.capture(model, constants=0))")
    size = t.numel() * t.element_size()
    if size > limit:
        return Literal(dtype, shape, None, f"it is {size} bytes, over the capture limit of {limit} "
                                           f"(dt.capture(model, constants={size}) keeps it)")
    try:
        with disable_current_modes():  # under FakeTensorMode a literal is still real Python data
            values = tuple(t.detach().cpu().reshape(-1).tolist())
    except (RuntimeError, TypeError) as exc:  # a dtype without Python numbers (float8, quantized)
        return Literal(dtype, shape, None, f"its dtype has no Python numbers ({exc})")
    return Literal(dtype, shape, values)
