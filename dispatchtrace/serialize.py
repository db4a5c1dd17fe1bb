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
from collections.abc import Callable
from typing import Any

from .builder import GraphBuilder
from .graph import Call, Graph, Op
from .lint import LintError
from .structure import iter_leaves
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


# ---- graph -> JSON ---------------------------------------------------------------------------


class _Tables:
    """While writing one graph: the tensors mentioned (by id) and the distinct source records."""

    def __init__(self) -> None:
        self.refs: dict[int, TensorRef] = {}
        self.sources: list[Any] = []
        self._source_ix: dict[Any, int] = {}

    def ids(self, refs: Any) -> list[int]:
        """Tensor ids of ``refs``, each ref noted for the ``tensors`` table."""
        out = []
        for r in refs:
            self.refs.setdefault(r.id, r)
            out.append(r.id)
        return out

    def value(self, v: Any) -> Any:
        """An argument as JSON, each ref inside it noted for the ``tensors`` table."""
        for leaf in iter_leaves(v):
            if isinstance(leaf, TensorRef):
                self.refs.setdefault(leaf.id, leaf)
        return _value(v)

    def source(self, source: Any) -> int:
        """Index of ``source`` in the ``sources`` table (equal records share one entry)."""
        key = _key(source)
        ix = self._source_ix.get(key)
        if ix is None:
            ix = self._source_ix[key] = len(self.sources)
            self.sources.append(_record(source))
        return ix


def _op_entry(op: Op, call_ix: dict[int, int], t: _Tables) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": op.name, "target": op.target, "call": call_ix[id(op.call)],
        "args": [t.value(a) for a in op.args], "kwargs": {k: t.value(v) for k, v in op.kwargs.items()},
        "inputs": t.ids(op.inputs), "outputs": t.ids(op.outputs), "mutated": t.ids(op.mutated),
        "is_view": op.is_view, "producers": [p.index for p in op.producers],
    }
    if op.phase != "forward":
        entry["phase"] = op.phase
    if op.source is not None:
        entry["source"] = t.source(op.source)
    return entry


def _call_entry(call: Call, call_ix: dict[int, int], t: _Tables) -> dict[str, Any]:
    children = [["call", call_ix[id(c)]] if isinstance(c, Call) else ["op", c.index] for c in call.children]
    entry: dict[str, Any] = {
        "path": call.path, "type": call.type, "index": call.index, "depth": call.depth,
        "parent": None if call.parent is None else call_ix[id(call.parent)], "repeat": call.repeat,
        "inputs": t.ids(call.inputs), "outputs": t.ids(call.outputs), "children": children,
    }
    if call.source is not None:
        entry["source"] = t.source(call.source)
    if call.returned is not None:
        entry["returned"] = t.value(call.returned)
    return entry


def _tensor_row(r: TensorRef) -> list[Any]:
    producer = None if r.producer is None else r.producer.index
    return [r.id, list(r.shape), r.dtype, r.device, r.storage, r.version, producer, r.kind, r.name, r.slot]


def to_json(graph: Graph) -> dict[str, Any]:
    """The capture as a JSON-ready dict (see ``docs/format.md``)."""
    import torch

    from . import __version__

    calls = [graph.root, *graph.calls]
    call_ix = {id(c): i for i, c in enumerate(calls)}
    t = _Tables()
    ops = [_op_entry(op, call_ix, t) for op in graph.ops]
    call_entries = [_call_entry(call, call_ix, t) for call in calls]
    graph_inputs, graph_outputs = t.ids(graph.inputs), t.ids(graph.outputs)
    error = graph.error
    return {
        "format": FORMAT, "version": VERSION, "dispatchtrace": __version__, "torch": torch.__version__,
        "complete": graph.complete,
        "error": None if error is None else {"type": type(error).__name__, "message": str(error)},
        "tensors": [_tensor_row(r) for r in sorted(t.refs.values(), key=lambda r: r.id)],
        "calls": call_entries, "ops": ops, "sources": t.sources,
        "backward_ops": [[op.name, op.target] for op in graph.backward_ops],
        "notes": list(graph.notes),
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
        graph = _Loader(data).build()
    except FormatError as e:
        raise FormatError(f"{where} is not a consistent dispatchtrace capture: {e}; "
                          "save the capture again with g.save(path)") from None
    except (KeyError, IndexError, TypeError, ValueError) as e:
        raise FormatError(f"{where} is a damaged dispatchtrace capture ({type(e).__name__}: {e}); "
                          "save the capture again with g.save(path)") from None
    try:
        graph.lint()
    except LintError as e:
        raise FormatError(f"{where} is not a consistent dispatchtrace capture: {e}; "
                          "save the capture again with g.save(path)") from None
    return graph


class _Loader:
    """One ``from_json``: replays the file's calls and ops through a ``GraphBuilder`` in the order
    they ran (depth first through ``children``), checking that the file's own numbering agrees."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        self.builder = GraphBuilder()
        self.graph = self.builder.graph
        self.call_entries: list[dict[str, Any]] = data["calls"]
        self.op_entries: list[dict[str, Any]] = data["ops"]
        self.calls: list[Call | None] = [self.graph.root] + [None] * (len(self.call_entries) - 1)
        self.sources = [_unrecord(r) for r in data["sources"]]
        self.rows = {row[0]: row for row in data["tensors"]}
        self.refs: dict[int, TensorRef] = {}
        self.at = -1  # the op being loaded; every op after it is yet to come

    def build(self) -> Graph:
        self._enter(self.graph.root, 0)
        self.at = len(self.graph.ops) - 1
        if len(self.graph.ops) != len(self.op_entries):
            missing = len(self.graph.ops)
            raise FormatError(f"op {missing} ({self.op_entries[missing]['name']}) is in no call's children: "
                              f"every op must be a child of the call that ran it")
        if None in self.calls:
            missing = self.calls.index(None)
            raise FormatError(f"call {missing} ({self.call_entries[missing]['path']!r}) is in no call's "
                              f"children: every call must be a child of its parent")
        calls: list[Call] = self.calls  # type: ignore[assignment]
        for call, c in zip(calls, self.call_entries, strict=True):
            self._finish_call(call, c)
        for name, target in self.data["backward_ops"]:
            self.builder.add_backward_op(name, target)
        for note in self.data.get("notes", []):  # files written before notes existed have none
            self.builder.add_note(note)
        params = self.data["params"]
        for call, (n, own) in zip(calls, params["calls"], strict=True):
            call.params, call.self_params = n, own
        self.graph.root.params = params["total"]
        self.builder.set_graph_io(self._refs(self.data["inputs"]), self._refs(self.data["outputs"]))
        error = self.data["error"]
        return self.builder.finish(None if error is None else _error(error["type"], error["message"]),
                                   complete=self.data["complete"])

    # ---- in execution order --------------------------------------------------------------------
    def _enter(self, call: Call, ci: int) -> None:
        for kind, ix in self.call_entries[ci]["children"]:
            if kind == "call":
                self._enter(self._add_call(call, ci, ix), ix)
            elif kind == "op":
                self._add_op(call, ci, ix)
            else:
                raise FormatError(f"call {ci} has a child of unknown kind {kind!r} (expected \"call\" or \"op\")")

    def _add_call(self, parent: Call, pi: int, ix: int) -> Call:
        c = self.call_entries[ix]
        if ix == 0 or self.calls[ix] is not None or c["parent"] != pi:
            raise FormatError(f"call {ix} ({c['path']!r}) is listed among the children of call {pi}, but its "
                              f"parent is {c['parent']!r}: each call is a child of its parent, once")
        call = self.builder.add_call(parent, c["path"], c["type"], c["index"], repeat=c["repeat"])
        if c["depth"] != call.depth:
            raise FormatError(f"call {ix} ({c['path']!r}) has depth {c['depth']}, but its parent's depth is "
                              f"{parent.depth}: a call's depth is its parent's plus one")
        self.calls[ix] = call
        return call

    def _add_op(self, call: Call, ci: int, ix: int) -> None:
        o = self.op_entries[ix]
        n = self.at = len(self.graph.ops)
        if ix != n:
            raise FormatError(f"op {ix} ({o['name']}) runs as op {n} in the calls' children: ops must be listed "
                              f"in the order they ran (their index is their position in execution order)")
        if o["call"] != ci:
            raise FormatError(f"op {ix} ({o['name']}) says it ran in call {o['call']}, but is a child of call {ci}")
        for p in o["producers"]:
            if not 0 <= p < n:
                raise FormatError(f"op {ix} ({o['name']}) lists op {p} as a producer, which did not run before "
                                  f"it: every op's producers precede it")
        op = self.builder.add_op(
            call, o["name"], o["target"], tuple(self._unvalue(a) for a in o["args"]),
            {k: self._unvalue(v) for k, v in o["kwargs"].items()}, tuple(self._refs(o["inputs"])),
            tuple(self.graph.ops[p] for p in o["producers"]), phase=o.get("phase", "forward"))
        self.builder.set_outputs(op, tuple(self._refs(o["outputs"])), tuple(self._refs(o["mutated"])), o["is_view"])
        if o.get("source") is not None:
            op.source = self.sources[o["source"]]

    def _finish_call(self, call: Call, c: dict[str, Any]) -> None:
        if c.get("source") is not None:
            call.source = self.sources[c["source"]]
        self.builder.set_call_inputs(call, self._refs(c["inputs"]))
        returned = c.get("returned")
        self.builder.set_call_result(call, self._refs(c["outputs"]),
                                     None if returned is None else self._unvalue(returned))

    # ---- tensors ---------------------------------------------------------------------------------
    def _ref(self, rid: int) -> TensorRef:
        ref = self.refs.get(rid)
        if ref is None:
            _, shape, dtype, device, storage, version, producer, kind, name, slot = self.rows[rid]
            if producer is not None and not 0 <= producer <= self.at:
                raise FormatError(f"tensor {rid} is produced by op {producer}, but op {self.at} already uses it: "
                                  f"a tensor is used only after the op that produced it")
            ref = self.refs[rid] = TensorRef(rid, tuple(shape), dtype, device, storage, version,
                                             None if producer is None else self.graph.ops[producer], kind, name, slot)
        return ref

    def _refs(self, ids: list[int]) -> list[TensorRef]:
        return [self._ref(r) for r in ids]

    def _unvalue(self, v: Any) -> Any:
        return _unvalue(v, self._ref)


def _error(type_name: str, message: str) -> BaseException:
    """An exception of a class named like the one that ended the capture (its traceback is not saved)."""
    name = type_name if type_name.isidentifier() else "CaptureError"
    return type(name, (Exception,), {"__module__": "dispatchtrace.serialize"})(message)
