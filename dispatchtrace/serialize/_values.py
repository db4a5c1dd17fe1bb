"""How recorded values are written as JSON and read back: arguments, torch enums, small records."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import torch

from .._structure import Built
from ..errors import FormatError
from ..graph import DTensorOp, Group, Literal, Opaque, Source, TensorRef
from ._rows import OP_EXTRA as _OP_EXTRA
from ._rows import OP_ROW, STATS_ROW

FORMAT = "dispatchtrace"
VERSION = 5
"""The format this dispatchtrace writes: 5 may hold values (``values``, ``stats`` rows ``STATS_FIELDS``, a ``kept``
file of tensors beside the JSON); 4 names saved records by a stable tag (``RECORDS``), not a module path;
3 writes each op as a row (``OP_FIELDS``) instead of an object;
2 recorded every phase in ``ops`` (``phase``, ``origin``, ``grad_of``, ``param``)."""
PLAIN = 4
"""The version written for a capture without values: every reader of format 4 reads it."""
OLDEST = 1
"""The oldest format it reads: 1 kept backward ops apart, in ``backward_ops`` (read as a note)."""


OP_FIELDS = OP_ROW.names
"""The fields of an op's row in format 3, in order (``_rows.OP_ROW``); a 12th item, an object, holds the optional ones."""
STATS_FIELDS = STATS_ROW.names
"""A ``stats`` row of format 5 (``_rows.STATS_ROW``): the tensor id, then the fields of ``Stats`` in order."""
OP_EXTRA = _OP_EXTRA.names
"""The keys the optional object at the end of an op's row may hold (``_rows.OP_EXTRA``)."""


RECORDS: dict[str, type] = {"Source": Source, "Group": Group, "DTensorOp": DTensorOp, "Literal": Literal}
"""The record types a saved file holds, by the stable tag it names them with (``{"$record": "Source", ...}``):
a tag never changes when a class moves between modules."""
_TAGS = {cls: tag for tag, cls in RECORDS.items()}
LEGACY = {"dispatchtrace.source.Source": "Source", "dispatchtrace.collectives.Group": "Group",
          "dispatchtrace.dtensor.DTensorOp": "DTensorOp", "dispatchtrace.literals.Literal": "Literal"}
"""The module paths formats 1-3 named those records by (the modules of dispatchtrace 0.1.0), and their tags."""


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
    if t in _TAGS:  # a record capture made (a Group)
        return _record(v)
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
    if "$object" in v:
        return _unbuilt(v, ref)
    if "$record" in v:
        return _unrecord(v)
    if "$dtype" in v or "$layout" in v or "$memory_format" in v:
        name = v.get("$dtype") or v.get("$layout") or v["$memory_format"]
        obj = getattr(torch, name, None)
        return obj if obj is not None else Opaque("torch", f"torch.{name}")
    if "$device" in v:
        return torch.device(v["$device"])
    raise FormatError(f"unknown tagged value {sorted(v)!r}; the file may come from a newer dispatchtrace")


def _unbuilt(v: dict[str, Any], ref: Callable[[int], TensorRef]) -> Built:
    """An object the forward returned (``structure.Built``), its fields type-checked."""
    name, how, fields = v.get("$object"), v.get("how"), _unvalue(v.get("fields"), ref)
    if type(name) is not str or not name or how not in ("pytree", "object") \
            or not isinstance(fields, list if how == "pytree" else dict):
        raise FormatError(f"a saved object record ({str(v)[:80]}) is not a type name, a kind ('pytree' or 'object') "
                          f"and its fields: the file is damaged")
    return Built(name, how, _unvalue(v.get("context"), ref), fields)


def _record(obj: Any) -> Any:
    """A graph record (``RECORDS``) as ``{"$record": tag, "fields": ...}``.

    >>> _record(Source("net.py", 3, "forward", "y = x + 1"))["$record"]
    'Source'
    """
    if obj is None:
        return None
    tag = _TAGS.get(type(obj))
    if tag is None:
        raise TypeError(f"{type(obj).__qualname__} is no record a saved file can hold; add it to RECORDS with a tag")
    fields = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    return {"$record": tag, "fields": {k: _value(v) for k, v in fields.items()}}


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
    """A saved record back as its class, by its tag (or, in a file of format 1-3, the module path it had);
    ``FormatError`` for a record type this dispatchtrace does not know or fields it does not take.

    >>> _unrecord({"$record": "dispatchtrace.collectives.Group", "fields": {"name": "0", "ranks": {"$tuple": [0, 1]},
    ...                                                                  "rank": 1}})
    Group('0', ranks=[0, 1], rank=1)
    >>> _unrecord({"$record": "dispatchtrace.views.costs.OpCost", "fields": {}})
    Traceback (most recent call last):
    ...
    dispatchtrace.errors.FormatError: a saved record of type 'dispatchtrace.views.costs.OpCost', which this dispatchtrace does not know; the file may come from a newer dispatchtrace
    """
    if data is None:
        return None
    tag = data["$record"]
    cls = RECORDS.get(LEGACY.get(tag, tag))
    if cls is None:
        raise FormatError(f"a saved record of type {tag!r}, which this dispatchtrace does not know; the file may come "
                          "from a newer dispatchtrace")
    fields = {k: _unvalue(v, _no_tensor) for k, v in data["fields"].items()}
    try:
        return cls(**fields)
    except TypeError as e:
        raise FormatError(f"a saved {tag} record has fields {sorted(fields)}, not those of a {cls.__name__}: "
                          f"the file is damaged ({e})") from None
