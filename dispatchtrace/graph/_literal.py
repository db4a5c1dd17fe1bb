"""``Literal``: the value of a small constant tensor a forward built from Python data, as plain data."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True, slots=True)
class Literal:
    """One constant's value as plain data: ``values`` flat in row-major order (``None`` when the
    capture could not keep it, and ``why`` says so).

    >>> Literal("float32", (1, 2), (1.0, 2.0)).tensor("cpu")
    tensor([[1., 2.]])
    >>> Literal("float32", (2000,), None, "it is 8000 bytes").tensor("cpu")
    Traceback (most recent call last):
    ...
    ValueError: no value recorded: it is 8000 bytes
    """

    dtype: str
    shape: tuple[int, ...]
    values: tuple[Any, ...] | None
    why: str | None = None

    def tensor(self, device: str) -> torch.Tensor:
        """The value as a new tensor on ``device``; ``ValueError`` when there is none."""
        if self.values is None:
            raise ValueError(f"no value recorded: {self.why}")
        dtype = getattr(torch, self.dtype)
        return torch.tensor(list(self.values), dtype=dtype, device=device).reshape(self.shape)
