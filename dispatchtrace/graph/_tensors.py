"""Tensor references: what capture remembers about a tensor instead of its data."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import torch

if TYPE_CHECKING:
    from ._records import Op

Kind = Literal["input", "parameter", "buffer", "activation", "constant"]

# dtype name (as ``TensorRef.dtype`` spells it) -> (label abbreviation, bytes per element)
DTYPES: dict[str, tuple[str, int]] = {
    "float32": ("f32", 4), "float64": ("f64", 8), "float16": ("f16", 2), "bfloat16": ("bf16", 2),
    "int64": ("i64", 8), "int32": ("i32", 4), "int16": ("i16", 2), "int8": ("i8", 1),
    "uint8": ("u8", 1), "uint16": ("u16", 2), "uint32": ("u32", 4), "uint64": ("u64", 8), "bool": ("b8", 1),
    "complex32": ("c32", 4), "complex64": ("c64", 8), "complex128": ("c128", 16),
    "float8_e4m3fn": ("f8e4m3fn", 1), "float8_e5m2": ("f8e5m2", 1),
    "float8_e4m3fnuz": ("f8e4m3fnuz", 1), "float8_e5m2fnuz": ("f8e5m2fnuz", 1),
}


def dtype_abbr(dtype: str) -> str:
    """Short dtype text used in tensor labels.

    >>> dtype_abbr("float32"), dtype_abbr("bool"), dtype_abbr("quint8")
    ('f32', 'b8', 'quint8')
    """
    entry = DTYPES.get(dtype)
    return dtype if entry is None else entry[0]


def itemsize(dtype: str) -> int | None:
    """Bytes per element of a dtype named as ``TensorRef.dtype`` names it (torch asked for others).

    >>> itemsize("float32"), itemsize("bfloat16"), itemsize("no_such_dtype")
    (4, 2, None)
    """
    entry = DTYPES.get(dtype)
    if entry is not None:
        return entry[1]
    dt = getattr(torch, dtype, None)
    return dt.itemsize if isinstance(dt, torch.dtype) else None


def shape_text(dtype: str, shape: tuple[int | str, ...]) -> str:
    """Tensor label in DebugMode style.

    >>> shape_text("float32", (1, 64, 56, 56))
    'f32[1, 64, 56, 56]'
    """
    return f"{dtype_abbr(dtype)}[{', '.join(str(s) for s in shape)}]"


@dataclass(slots=True, eq=False)
class TensorRef:
    """One tensor value as an op saw it: metadata, identity and origin, never data. Read-only.

    (Not ``frozen=True``: a frozen dataclass costs 1.3 µs per instance against 0.2 µs, and
    capture makes one per op output; nothing in dispatchtrace assigns to a ref after creation.)

    ``storage`` is a small integer unique within one capture (views share their base's);
    ``version`` counts the writes to that storage seen so far; ``producer`` is the op whose
    output this tensor object is (``None`` for inputs, parameters, buffers, constants) and
    ``slot`` its position among that op's outputs, kept by every later version of the tensor.
    """

    id: int
    shape: tuple[int | str, ...]
    dtype: str
    device: str
    storage: int
    version: int
    producer: Op | None
    kind: Kind
    name: str | None = None
    slot: int = 0

    @property
    def shape_text(self) -> str:
        """The dtype and shape as every view writes them: ``f32[1, 64, 56, 56]``."""
        return shape_text(self.dtype, self.shape)

    @property
    def label(self) -> str:
        """Deprecated alias of ``shape_text`` (a *label* is how a call is named, ``Call.label``); goes in the next release."""
        warnings.warn("TensorRef.label is TensorRef.shape_text now; label goes in the next release",
                      DeprecationWarning, stacklevel=2)
        return shape_text(self.dtype, self.shape)

    @property
    def text(self) -> str:
        """How the tensor is written in op text: ``%relu_2``, ``%split[1]``, ``fc.weight``, ``x``."""
        op = self.producer
        if op is None:
            return self.name or f"t{self.id}"
        if len(op.outputs) == 1:
            return f"%{op.name}"
        return f"%{op.name}[{self.slot}]"

    @property
    def numel(self) -> int | None:
        n = 1
        for s in self.shape:
            if not isinstance(s, int):
                return None
            n *= s
        return n

    def __repr__(self) -> str:
        return f"TensorRef({self.text}: {self.shape_text}, storage={self.storage}, v{self.version}, {self.kind})"


def shares_storage(outputs: tuple[TensorRef, ...], inputs: list[TensorRef]) -> bool:
    """Whether an output lies in the storage of an input (the op returned a view, or an input)."""
    for r in outputs:
        sid = r.storage
        for i in inputs:
            if i.storage == sid:
                return True
    return False
