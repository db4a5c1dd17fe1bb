"""Model specs and input shapes as the command line spells them: ``resnet50``, ``hf:gpt2``, ``file.py:Net``, ``1x3x224x224``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
import torch.nn as nn

from ..errors import ModelError
from ..models import DEFAULT_SHAPE, Built, Task, build, random_tensor
from ._errors import CliError

_SHAPE = "a shape is sizes >= 1 joined by 'x', e.g. 1x3x224x224"


def load_model(spec: str, *, device: str = "cpu", dtype: torch.dtype | None = None) -> nn.Module:
    """Build the model ``spec`` names, in eval mode, with its parameters on ``device``: ``dispatchtrace.models.build``
    (see there for the forms: torchvision names, ``coolcnn``, ``hf:TYPE``, ``timm:NAME``, ``package.module:factory``,
    ``path/to/file.py:Name``), its ``ModelError`` as a ``CliError``.

    A floating-point ``dtype`` (``torch.bfloat16``) casts the model's floating-point parameters
    and buffers to it, as ``model.to(dtype)`` does; other dtypes (``torch.int64`` token ids) are
    for the inputs only and leave the model as it is. On ``meta`` the model is built there
    directly, so no memory is spent on weights.

    >>> load_model("coolcnn").training
    False
    >>> load_model("coolcnn", dtype=torch.bfloat16).output_layer.weight.dtype
    torch.bfloat16
    >>> load_model("resnet5")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    dispatchtrace.cli._errors.CliError: unknown model 'resnet5'; did you mean resnet50 ...MODEL is ...
    """
    return build_model(spec, device=device, dtype=dtype).model


def build_model(spec: str, *, config: Mapping[str, Any] | None = None, task: Task | None = None,
                seq: int | None = None, device: str = "cpu", dtype: torch.dtype | None = None,
                max_bytes: float | None = None) -> Built:
    """``dispatchtrace.models.build`` (the model and its example inputs) with its errors as ``CliError``s."""
    try:
        return build(spec, config=config, task=task, seq=seq, device=device, dtype=dtype, max_bytes=max_bytes)
    except ModelError as e:
        raise CliError(str(e)) from e


def parse_shape(text: str) -> tuple[int, ...]:
    """``"1x3x224x224"`` (or ``1,3,224,224``) as a shape; every size a whole number >= 1.

    >>> parse_shape("1x3x224x224"), parse_shape("8,128"), parse_shape("16")
    ((1, 3, 224, 224), (8, 128), (16,))
    >>> parse_shape("1x3xa")
    Traceback (most recent call last):
    dispatchtrace.cli._errors.CliError: malformed input shape '1x3xa': a shape is sizes >= 1 joined by 'x', e.g. 1x3x224x224
    >>> parse_shape("-1x3x2x2")
    Traceback (most recent call last):
    dispatchtrace.cli._errors.CliError: input shape '-1x3x2x2' has a negative size (-1): a shape is sizes >= 1 joined by 'x', e.g. 1x3x224x224
    """
    parts = text.strip().lower().replace(",", "x").split("x")
    try:
        shape = tuple(int(p) for p in parts)
    except ValueError:
        raise CliError(f"malformed input shape {text!r}: {_SHAPE}") from None
    bad = [s for s in shape if s < 1]
    if bad:
        what = f"a negative size ({bad[0]})" if bad[0] < 0 else "a size of 0 (an empty tensor)"
        raise CliError(f"input shape {text!r} has {what}: {_SHAPE}")
    return shape


def parse_dtype(text: str) -> torch.dtype:
    """``"float32"``, ``"bf16"``, ``"int64"`` as a ``torch.dtype``.

    >>> parse_dtype("float16"), parse_dtype("bf16"), parse_dtype("torch.int64")
    (torch.float16, torch.bfloat16, torch.int64)
    """
    name = text.strip().removeprefix("torch.")
    name = {"f32": "float32", "f16": "float16", "bf16": "bfloat16", "f64": "float64", "i64": "int64", "i32": "int32"}.get(name, name)
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise CliError(f"unknown dtype {text!r}: use a torch dtype name such as float32, bfloat16, float16 or int64")
    return dtype


def parse_inputs(shapes: Sequence[str | tuple[int, ...]] = (), *, dtype: str | torch.dtype = "float32",
                 device: str = "cpu", model: nn.Module | None = None) -> list[torch.Tensor]:
    """One random tensor per shape: ``torch.randn`` for float dtypes, small ints for integer ones.

    With no shapes, the model's ``input_shape`` attribute if it has one, else ``1x3x224x224``.
    On ``meta`` the tensors have no data.

    >>> [tuple(t.shape) for t in parse_inputs(["2x3", "4"])]
    [(2, 3), (4,)]
    >>> parse_inputs(["5"], dtype="int64")[0].dtype
    torch.int64
    """
    dt = parse_dtype(dtype) if isinstance(dtype, str) else dtype
    if not shapes:
        shapes = [tuple(getattr(model, "input_shape", DEFAULT_SHAPE))]
    return [random_tensor(parse_shape(s) if isinstance(s, str) else tuple(s), dt, device) for s in shapes]
