"""How recorded values are written as JSON and read back: arguments, torch enums, small records."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

from .tensors import TensorRef

FORMAT = "dispatchtrace"
VERSION = 3
"""The format this dispatchtrace writes: 3 writes each op as a row (``OP_FIELDS``) instead of an object;
2 recorded every phase in ``ops`` (``phase``, ``origin``, ``grad_of``, ``param``)."""
OLDEST = 1
"""The oldest format it reads: 1 kept backward ops apart, in ``backward_ops`` (read as a note)."""


OP_FIELDS = ("name", "target", "call", "args", "kwargs", "inputs", "outputs", "mutated", "is_view", "producers", "source")
"""The fields of an op's row in format 3, in order; a 12th item, an object, holds the optional ones (``OP_EXTRA``)."""
OP_EXTRA = ("phase", "origin", "grad_of", "param", "dtensor")
"""The keys the optional object at the end of an op's row may hold."""


class FormatError(ValueError):
    """A file that is not a dispatchtrace capture this version can read."""


@dataclasses.dataclass(frozen=True, slots=True)
class Opaque:
    """Stand-in for an argument JSON cannot hold (a Python object of another type): its text only."""

    type: str
    text: str

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return self.text


@dataclasses.dataclass(frozen=True, slots=True)
class Record:
    """Stand-in for a saved record (e.g. ``op.source``) whose class cannot be imported here."""

    type: str
    fields: dict[str, Any]

    def __getattr__(self, name: str) -> Any:
        try:
            return self.fields[name]
        except KeyError:
            raise AttributeError(name) from None


# ---- values --------------------------------------------------------------------------------


def _value(v: Any) -> Any:
    """A recorded argument as JSON: tensors by ref id, torch enums and tuples tagged."""
    t = type(v)
    if v is None or t is bool or t is str or t is int:
        return v
    if t is float:
        return v if math.isfinite(v) else {"$float": repr(v)}
    if isinstance(v, TensorRef):
        return {"$t": v.id}
    if t is list:
        return [_value(x) for x in v]
    if t is tuple:
        return {"$tuple": [_value(x) for x in v]}
    if t is dict:
        return {"$dict": [[k, _value(x)] for k, x in v.items()]}
    if isinstance(v, Opaque):
        return {"$opaque": v.type, "text": v.text}
    if dataclasses.is_dataclass(v) and t.__module__.startswith("dispatchtrace."):  # a record capture made (a Group)
        return _record(v)
    import torch

    if isinstance(v, torch.dtype):
        return {"$dtype": str(v).removeprefix("torch.")}
    if isinstance(v, torch.device):
        return {"$device": str(v)}
    if isinstance(v, torch.layout):
        return {"$layout": str(v).removeprefix("torch.")}
    if isinstance(v, torch.memory_format):
        return {"$memory_format": str(v).removeprefix("torch.")}
    if isinstance(v, complex):
        return {"$complex": [v.real, v.imag]}
    if isinstance(v, (bool, int)):  # numpy / subclass scalars
        return int(v) if not isinstance(v, bool) else bool(v)
    if isinstance(v, float):
        return _value(float(v))
    return {"$opaque": f"{t.__module__}.{t.__qualname__}", "text": str(v)}


def _unvalue(v: Any, ref: Callable[[int], TensorRef]) -> Any:
    """A saved argument back as its value; ``ref(id)`` gives the ``TensorRef`` of a tensor id."""
    if isinstance(v, list):
        return [_unvalue(x, ref) for x in v]
    if not isinstance(v, dict):
        return v
    if "$t" in v:
        return ref(v["$t"])
    if "$tuple" in v:
        return tuple(_unvalue(x, ref) for x in v["$tuple"])
    if "$dict" in v:
        return {k: _unvalue(x, ref) for k, x in v["$dict"]}
    if "$float" in v:
        return float(v["$float"])
    if "$complex" in v:
        return complex(*v["$complex"])
    if "$opaque" in v:
        return Opaque(v["$opaque"], v["text"])
    if "$record" in v:
        return _unrecord(v)
    import torch

    if "$dtype" in v or "$layout" in v or "$memory_format" in v:
        name = v.get("$dtype") or v.get("$layout") or v["$memory_format"]
        obj = getattr(torch, name, None)
        return obj if obj is not None else Opaque("torch", f"torch.{name}")
    if "$device" in v:
        return torch.device(v["$device"])
    raise FormatError(f"unknown tagged value {sorted(v)!r}; the file may come from a newer dispatchtrace")


def _record(obj: Any) -> Any:
    """Any small record (dataclass, namedtuple, slotted object) as ``{"$record": type, "fields": ...}``."""
    if obj is None:
        return None
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        fields = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    elif hasattr(obj, "_asdict"):
        fields = dict(obj._asdict())
    elif isinstance(obj, Record):
        fields = obj.fields
    else:
        fields = {k: getattr(obj, k) for k in getattr(obj, "__slots__", ()) if hasattr(obj, k)} or dict(vars(obj))
    t = type(obj)
    name = obj.type if isinstance(obj, Record) else f"{t.__module__}.{t.__qualname__}"
    return {"$record": name, "fields": {k: _value(v) for k, v in fields.items()}}


def _key(record: Any) -> Any:
    """Equal records share one table entry; unhashable ones are kept apart by identity."""
    try:
        hash(record)
    except TypeError:
        return ("id", id(record))
    return ("value", record)


def _no_tensor(rid: int) -> TensorRef:
    raise FormatError(f"a saved record holds tensor {rid}; records hold plain values only")


def _unrecord(data: Any) -> Any:
    if data is None:
        return None
    fields = {k: _unvalue(v, _no_tensor) for k, v in data["fields"].items()}
    module, _, qualname = data["$record"].rpartition(".")
    if module.startswith("dispatchtrace"):  # only our own classes are ever constructed
        import importlib

        try:
            cls = getattr(importlib.import_module(module), qualname)
            return cls(**fields)
        except Exception:  # a renamed or changed record: keep its fields
            pass
    return Record(data["$record"], fields)
