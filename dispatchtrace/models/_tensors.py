"""Random example tensors and where models are built: ``randn`` for floats, small ints for ids, data-free on meta."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from ..errors import ModelError


def random_tensor(shape: tuple[int, ...], dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu",
                  *, high: int = 2) -> torch.Tensor:
    """``torch.randn`` for float and complex dtypes, random bools, else ints in ``[0, high)``; empty on meta.

    >>> random_tensor((2, 3)).shape, random_tensor((4,), torch.int64, high=10).max() < 10
    (torch.Size([2, 3]), tensor(True))
    >>> random_tensor((1, 8), torch.int64, "meta").is_meta
    True
    """
    if torch.device(device).type == "meta":
        return torch.empty(shape, dtype=dtype, device="meta")
    if dtype.is_floating_point or dtype.is_complex:
        return torch.randn(shape, dtype=dtype, device=device)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, device=device).bool()
    return torch.randint(0, high, shape, dtype=dtype, device=device)


def check_device(device: str | torch.device) -> torch.device:
    """``device`` as a ``torch.device``; an unknown name or CUDA without a GPU is a ``ModelError``."""
    try:
        ctx = torch.device(device)
    except RuntimeError as e:
        raise ModelError(f"unknown device {str(device)!r}: use cpu, meta or cuda") from e
    if ctx.type == "cuda" and not torch.cuda.is_available():
        raise ModelError(f"device {str(device)!r}: torch sees no CUDA device here (torch.cuda.is_available() is "
                         "False); use cpu, or meta for shapes only")
    return ctx


@contextlib.contextmanager
def on(device: torch.device) -> Iterator[None]:
    """Create tensors on ``device`` by default inside the block (``torch.device`` as a context manager)."""
    if device.type == "cpu":
        yield
        return
    with device:
        yield
