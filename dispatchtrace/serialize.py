"""Save a capture as plain, versioned JSON and load it back as a real ``Graph`` (no pickle, no torch tensors).

>>> import io, torch, dispatchtrace as dt
>>> lin, x = torch.nn.Linear(4, 2), torch.ones(1, 4)
>>> with dt.capture(lin) as g:
...     y = lin(x)
>>> text = dumps(g)
>>> text[:45]
'{"format":"dispatchtrace","version":1,"dispat'
>>> g2 = loads(text)
>>> str(g2) == str(g), g2.calls[0].label, g2.costs().total.params
(True, 'Linear', 10)

The format is described in ``docs/format.md``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from typing import Any

from .graph import Call, Graph, Op
from .tensors import TensorRef

FORMAT = "dispatchtrace"
VERSION = 1


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


def _unvalue(v: Any, refs: dict[int, TensorRef]) -> Any:
    if isinstance(v, list):
        return [_unvalue(x, refs) for x in v]
    if not isinstance(v, dict):
        return v
    if "$t" in v:
        return refs[v["$t"]]
    if "$tuple" in v:
        return tuple(_unvalue(x, refs) for x in v["$tuple"])
    if "$dict" in v:
        return {k: _unvalue(x, refs) for k, x in v["$dict"]}
    if "$float" in v:
        return float(v["$float"])
    if "$complex" in v:
        return complex(*v["$complex"])
    if "$opaque" in v:
        return Opaque(v["$opaque"], v["text"])
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


def _unrecord(data: Any) -> Any:
    if data is None:
        return None
    fields = {k: _unvalue(v, {}) for k, v in data["fields"].items()}
    module, _, qualname = data["$record"].rpartition(".")
    if module.startswith("dispatchtrace"):  # only our own classes are ever constructed
        import importlib

        try:
            cls = getattr(importlib.import_module(module), qualname)
            return cls(**fields)
        except Exception:  # a renamed or changed record: keep its fields
            pass
    return Record(data["$record"], fields)


# ---- graph -> JSON ---------------------------------------------------------------------------


def to_json(graph: Graph) -> dict[str, Any]:
    """The capture as a JSON-ready dict (see ``docs/format.md``)."""
    from . import __version__

    calls = [graph.root, *graph.calls]
    call_ix = {id(c): i for i, c in enumerate(calls)}
    op_ix = {id(op): op.index for op in graph.ops}
    refs: dict[int, TensorRef] = {}

    def ids(rs: Any) -> list[int]:
        out = []
        for r in rs:
            refs.setdefault(r.id, r)
            out.append(r.id)
        return out

    def scan(v: Any) -> None:
        if isinstance(v, TensorRef):
            refs.setdefault(v.id, v)
        elif isinstance(v, (list, tuple)):
            for x in v:
                scan(x)
        elif isinstance(v, dict):
            for x in v.values():
                scan(x)

    ops = []
    sources: list[Any] = []
    source_ix: dict[Any, int] = {}

    def source_index(source: Any) -> int:
        key = _key(source)
        if key not in source_ix:
            source_ix[key] = len(sources)
            sources.append(_record(source))
        return source_ix[key]

    for op in graph.ops:
        scan(op.args)
        scan(op.kwargs)
        entry: dict[str, Any] = {
            "name": op.name, "target": op.target, "call": call_ix[id(op.call)],
            "args": [_value(a) for a in op.args], "kwargs": {k: _value(v) for k, v in op.kwargs.items()},
            "inputs": ids(op.inputs), "outputs": ids(op.outputs), "mutated": ids(op.mutated),
            "is_view": op.is_view, "producers": [op_ix[id(p)] for p in op.producers],
        }
        if op.phase != "forward":
            entry["phase"] = op.phase
        if op.source is not None:
            entry["source"] = source_index(op.source)
        ops.append(entry)

    call_entries = []
    for call in calls:
        children = [["call", call_ix[id(c)]] if isinstance(c, Call) else ["op", op_ix[id(c)]] for c in call.children]
        call_entry = {
            "path": call.path, "type": call.type, "index": call.index, "depth": call.depth,
            "parent": None if call.parent is None else call_ix[id(call.parent)], "repeat": call.repeat,
            "inputs": ids(call.inputs), "outputs": ids(call.outputs), "children": children,
        }
        if call.source is not None:
            call_entry["source"] = source_index(call.source)
        if call.returned is not None:
            call_entry["returned"] = _value(call.returned)
        call_entries.append(call_entry)
    graph_inputs, graph_outputs = ids(graph.inputs), ids(graph.outputs)
    tensors = [[r.id, list(r.shape), r.dtype, r.device, r.storage, r.version,
                None if r.producer is None else op_ix[id(r.producer)], r.kind, r.name, r.slot]
               for r in sorted(refs.values(), key=lambda r: r.id)]
    import torch

    error = graph.error
    return {
        "format": FORMAT, "version": VERSION, "dispatchtrace": __version__, "torch": torch.__version__,
        "complete": graph.complete,
        "error": None if error is None else {"type": type(error).__name__, "message": str(error)},
        "tensors": tensors, "calls": call_entries, "ops": ops, "sources": sources,
        "backward_ops": [[op.name, op.target] for op in graph.backward_ops],
        "inputs": graph_inputs, "outputs": graph_outputs,
        "params": {"total": graph.root.params, "calls": [[c.params, c.self_params] for c in calls]},
    }


def dumps(graph: Graph) -> str:
    """The capture as JSON text."""
    return json.dumps(to_json(graph), separators=(",", ":"), allow_nan=False)


def save(graph: Graph, path: str | os.PathLike[str]) -> None:
    """Write ``graph`` to ``path`` as JSON (``g.save("trace.json")``)."""
    text = dumps(graph)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
        f.write("\n")


# ---- JSON -> graph ---------------------------------------------------------------------------


def loads(text: str, *, where: str = "the text") -> Graph:
    """A ``Graph`` from JSON text written by ``dumps`` / ``save``."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        stripped = text.strip()
        truncated = stripped.startswith("{") and not stripped.endswith("}")
        hint = " (it looks truncated)" if truncated else ""
        raise FormatError(f"{where} is not valid JSON{hint}: {e}; save the capture again with g.save(path)") from None
    return from_json(data, where=where)


def load(path: str | os.PathLike[str]) -> Graph:
    """Read a capture written by ``g.save(path)``; views, summary and diagrams work on it without the model."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return loads(text, where=os.fspath(path))


def from_json(data: Any, *, where: str = "the data") -> Graph:
    """A ``Graph`` from the dict ``to_json`` returns."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise FormatError(f"{where} is not a dispatchtrace capture (no \"format\": \"dispatchtrace\" field); "
                          "write one with g.save(path)")
    version = data.get("version")
    if not isinstance(version, int) or version > VERSION:
        raise FormatError(f"{where} has format version {version!r}, newer than the {VERSION} this dispatchtrace "
                          f"reads; upgrade it (pip install -U dispatchtrace)")
    try:
        return _build(data)
    except (KeyError, IndexError, TypeError, ValueError) as e:
        if isinstance(e, FormatError):
            raise
        raise FormatError(f"{where} is a damaged dispatchtrace capture ({type(e).__name__}: {e}); "
                          "save the capture again with g.save(path)") from None


def _build(data: dict[str, Any]) -> Graph:
    g = Graph()
    calls: list[Call] = []
    for i, c in enumerate(data["calls"]):
        if i == 0:
            call = g.root
        else:
            call = Call(c["path"], c["type"], c["index"], c["depth"], calls[c["parent"]], repeat=c["repeat"])
        calls.append(call)
    ops = [Op(i, o["name"], o["target"], calls[o["call"]], (), {}, (), phase=o.get("phase", "forward"))
           for i, o in enumerate(data["ops"])]
    sources = [_unrecord(r) for r in data.get("sources", [])]
    refs: dict[int, TensorRef] = {}
    for rid, shape, dtype, device, storage, version, producer, kind, name, slot in data["tensors"]:
        refs[rid] = TensorRef(rid, tuple(shape), dtype, device, storage, version,
                              None if producer is None else ops[producer], kind, name, slot)
    for op, o in zip(ops, data["ops"], strict=True):
        op.args = tuple(_unvalue(a, refs) for a in o["args"])
        op.kwargs = {k: _unvalue(v, refs) for k, v in o["kwargs"].items()}
        op.inputs = tuple(refs[r] for r in o["inputs"])
        op.outputs = tuple(refs[r] for r in o["outputs"])
        op.mutated = tuple(refs[r] for r in o["mutated"])
        op.is_view = o["is_view"]
        op.producers = tuple(ops[p] for p in o["producers"])
        for p in op.producers:
            p.users.append(op)
        if o.get("source") is not None:
            op.source = sources[o["source"]]
    for call, c in zip(calls, data["calls"], strict=True):
        if c.get("source") is not None:
            call.source = sources[c["source"]]
        if c.get("returned") is not None:
            call.returned = _unvalue(c["returned"], refs)
        call.inputs = tuple(refs[r] for r in c["inputs"])
        call.outputs = tuple(refs[r] for r in c["outputs"])
        for kind, ix in c["children"]:
            child = calls[ix] if kind == "call" else ops[ix]
            call.children.append(child)
            if kind == "op":
                call.ops.append(child)  # type: ignore[arg-type]
    g.ops = ops
    g.calls = calls[1:]
    g.inputs = [refs[r] for r in data["inputs"]]
    g.outputs = [refs[r] for r in data["outputs"]]
    g.backward_ops = [Op(i, name, target, g.root, (), {}, (), phase="backward")
                      for i, (name, target) in enumerate(data["backward_ops"])]
    g.complete = data["complete"]
    if data["error"] is not None:
        g.error = _error(data["error"]["type"], data["error"]["message"])
    params = data.get("params") or {"total": None, "calls": []}
    for call, (n, own) in zip(calls, params["calls"], strict=False):  # absent in a file without counts
        call.params, call.self_params = n, own
    g.root.params = params["total"]
    return g


def _error(type_name: str, message: str) -> BaseException:
    """An exception of a class named like the one that ended the capture (its traceback is not saved)."""
    name = type_name if type_name.isidentifier() else "CaptureError"
    return type(name, (Exception,), {"__module__": "dispatchtrace.serialize"})(message)
