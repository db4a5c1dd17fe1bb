"""Load a capture saved as JSON back into a real ``Graph``, checking every record on the way (``Graph.lint``)."""

from __future__ import annotations

import builtins
import json
import os
from dataclasses import replace
from typing import Any

from .._collector import Paused
from ..errors import SavedError
from ..graph import Call, Graph, GraphBuilder, Literal, Op, Saved, Stats, TensorRef
from ..graph.lint import LintError
from ._check import check_types
from ._kept import read_kept
from ._values import (
    FORMAT,
    OLDEST,
    OP_EXTRA,
    OP_FIELDS,
    STATS_FIELDS,
    VERSION,
    FormatError,
    _no_tensor,
    _unrecord,
    _unvalue,
)


def loads(text: str, *, where: str = "the text", folder: str | None = None) -> Graph:
    """A ``Graph`` from JSON text written by ``dumps`` / ``save`` (the cyclic collector paused meanwhile);
    ``folder`` holds the file of kept values it names, if any (``None``: not read, a note says so)."""
    with Paused():
        return _loads(text, where, folder)


def _loads(text: str, where: str, folder: str | None = None) -> Graph:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        stripped = text.strip()
        truncated = stripped.startswith("{") and not stripped.endswith("}")
        hint = " (it looks truncated)" if truncated else ""
        raise FormatError(f"{where} is not valid JSON{hint}: {e}; save the capture again with g.save(path)") from None
    return from_json(data, where=where, folder=folder)


def load(path: str | os.PathLike[str]) -> Graph:
    """Read a capture written by ``g.save(path)``; views, summary and diagrams work on it without the model."""
    with open(path, "rb") as f:
        raw = f.read()
    where = os.fspath(path)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        kind = "a binary file" if b"\0" in raw[:4096] else "not UTF-8 text"
        raise FormatError(f"{where} is {kind} (byte {e.start} cannot be read as UTF-8), not a dispatchtrace capture; "
                          "pass a file written by g.save(path) or `dispatchtrace MODEL -o trace.json`") from None
    return loads(text, where=where, folder=os.path.dirname(where))


def from_json(data: Any, *, where: str = "the data", folder: str | None = None) -> Graph:
    """A ``Graph`` from the dict ``to_json`` returns (kept values read from ``folder``, see ``loads``)."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise FormatError(f"{where} is not a dispatchtrace capture (no \"format\": \"dispatchtrace\" field); "
                          "write one with g.save(path)")
    version = data.get("version")
    if type(version) is not int:
        raise FormatError(f"{where} has format version {version!r}, which is not an integer: the file was not written "
                          f"by dispatchtrace or was edited; save the capture again with g.save(path)")
    if version < OLDEST:
        raise FormatError(f"{where} has format version {version}, older than the {OLDEST} this dispatchtrace reads "
                          f"(no release wrote it); save the capture again with g.save(path)")
    if version > VERSION:
        raise FormatError(f"{where} has format version {version}, newer than the {VERSION} this dispatchtrace "
                          f"reads; upgrade it (pip install -U dispatchtrace)")
    try:
        check_types(data)
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
    kept = data.get("kept")
    if kept:
        if folder is None:
            graph.notes.append(f"the values this capture kept are in {kept['file']}, beside its JSON file: "
                               "dt.load(path) reads them")
        else:
            graph.kept.update(read_kept(kept, folder, where))
    return graph


class _Loader:
    """One ``from_json``: replays the file's calls and ops through a ``GraphBuilder`` in the order
    they ran (depth first through ``children``), checking that the file's own numbering agrees."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        self.builder = GraphBuilder()
        self.graph = self.builder.graph
        self.call_entries: list[dict[str, Any]] = data["calls"]
        ops = data["ops"]
        self.op_entries: list[list[Any]] = _rows(ops) if data["version"] >= 3 else [_row(o) for o in ops]
        self.calls: list[Call | None] = [self.graph.root] + [None] * (len(self.call_entries) - 1)
        self.sources = [_unrecord(r) for r in data["sources"]]
        self.rows = {row[0]: row for row in data["tensors"]}
        self.refs: dict[int, TensorRef] = {}
        # ops are read-only: equal values are loaded as one object, shared (as capture shares them)
        self.shapes: dict[tuple[Any, ...], tuple[Any, ...]] = {}  # one tuple per distinct shape
        self.lists: dict[tuple[int, ...], list[int]] = {}  # one list per distinct int list in args
        self._text = {}.setdefault  # one str per distinct target, dtype, device, kind
        self.texts: dict[tuple[str, str, str], tuple[str, str, str]] = {}  # one (dtype, device, kind) per distinct one
        self.extras: list[tuple[Op, dict[str, Any]]] = []  # the ops whose row has the optional object, with it
        self.alone: dict[int, tuple[TensorRef]] = {}  # ref id -> the (ref,) of ops that read (or return) it alone
        self.made: list[tuple[Op] | None] = [None] * len(self.op_entries)  # op index -> (op,), once it is a lone producer
        self.at = -1  # the op being loaded; every op after it is yet to come

    def build(self) -> Graph:
        self._enter(self.graph.root, 0)
        self.at = len(self.graph.ops) - 1
        if len(self.graph.ops) != len(self.op_entries):
            missing = len(self.graph.ops)
            raise FormatError(f"op {missing} ({self.op_entries[missing][0]}) is in no call's children: "
                              f"every op must be a child of the call that ran it")
        if None in self.calls:
            missing = self.calls.index(None)
            raise FormatError(f"call {missing} ({self.call_entries[missing]['path']!r}) is in no call's "
                              f"children: every call must be a child of its parent")
        calls: list[Call] = self.calls  # type: ignore[assignment]
        for call, c in zip(calls, self.call_entries, strict=True):
            self._finish_call(call, c)
        self._attribute()
        apart = self.data.get("backward_ops") or []  # format 1 kept backward ops apart, by name only
        if apart:
            self.builder.add_note(f"this file (format 1) listed {len(apart)} backward ops apart, by name and target "
                                  f"only; they are not in g.ops (capture again to record them in order)")
        saved = self.data.get("saved", [])  # optional: absent in older files (read as none)
        self.builder.set_saved(_saved(entry, calls) for entry in saved)
        for note in self.data.get("notes", []):  # optional: a capture that saw everything has none
            self.builder.add_note(note)
        self._values()
        params = self.data["params"]
        for call, (n, own) in zip(calls, params["calls"], strict=True):
            call.params, call.self_params = n, own
        self.graph.root.params = params["total"]
        self.builder.set_graph_io(self._refs(self.data["inputs"]), self._refs(self.data["outputs"]))
        error = self.data["error"]
        for name, lit in self.data.get("constants", {}).items():
            values = lit["values"]
            self.builder.set_constant(name, Literal(lit["dtype"], tuple(lit["shape"]),
                                                    None if values is None else tuple(self._unvalue(v) for v in values),
                                                    lit.get("why")))
        return self.builder.finish(None if error is None else _error(error["type"], error["message"], error.get("module")),
                                   complete=self.data["complete"])

    def _values(self) -> None:
        """Format 5's values: the mode, each tensor's stats (a row of ``STATS_FIELDS``)."""
        values = self.data.get("values", "none")
        if values not in ("none", "stats"):
            raise FormatError(f"values is {values!r}, not \"none\" or \"stats\"")
        self.graph.values = values
        stats = self.graph.stats
        for row in self.data.get("stats", ()):
            if type(row) is not list or len(row) != len(STATS_FIELDS):
                raise FormatError(f"a stats row is {str(row)[:60]}, not [{', '.join(STATS_FIELDS)}]")
            rid, numel, nan, posinf, neginf, zeros, *moments = row
            stats[rid] = Stats(numel, nan, posinf, neginf, zeros, *[_unvalue(m, _no_tensor) for m in moments])
        for row in self.data.get("fingerprints", ()):
            if type(row) is not list or len(row) != 2 or row[0] not in stats or type(row[1]) is not str:
                raise FormatError(f"a fingerprints row is {str(row)[:60]}, not [tensor with stats, hex]")
            stats[row[0]] = replace(stats[row[0]], fingerprint=int(row[1], 16))

    def _attribute(self) -> None:
        """Each op's ``origin``, ``grad_of`` and ``param`` (all calls and ops exist by now)."""
        calls, ops = self.calls, self.graph.ops
        for op, extra in self.extras:
            origin, grad_of, param = extra.get("origin"), extra.get("grad_of"), extra.get("param")
            if origin is None and grad_of is None and param is None:
                continue
            if origin is not None and not 0 < origin < len(calls):
                raise FormatError(f"op {op.index} ({op.name}) has origin {origin!r}, which is no call of the file "
                                  f"(a position in calls other than the root)")
            if grad_of is not None and not 0 <= grad_of < op.index:
                raise FormatError(f"op {op.index} ({op.name}) has grad_of {grad_of!r}, which is no op that ran before it")
            self.builder.set_attribution(op, phase=op.phase, origin=None if origin is None else calls[origin],
                                         grad_of=None if grad_of is None else ops[grad_of], param=param)

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
        name, target, in_call, args, kwargs, inputs, outputs, mutated, is_view, producers, source, *extra = \
            self.op_entries[ix]
        ops = self.graph.ops
        n = self.at = self.at + 1  # len(ops): only this adds ops
        if ix != n:
            raise FormatError(f"op {ix} ({name}) runs as op {n} in the calls' children: ops must be listed "
                              f"in the order they ran (their index is their position in execution order)")
        if in_call != ci:
            raise FormatError(f"op {ix} ({name}) says it ran in call {in_call}, but is a child of call {ci}")
        one = type(producers) is list and len(producers) == 1
        if one:
            p = producers[0]
            if not 0 <= p < n:
                raise FormatError(f"op {ix} ({name}) lists op {p} as a producer, which did not run before "
                                  f"it: every op's producers precede it")
        elif producers and not (0 <= min(producers) and max(producers) < n):
            p = next(p for p in producers if not 0 <= p < n)
            raise FormatError(f"op {ix} ({name}) lists op {p} as a producer, which did not run before "
                              f"it: every op's producers precede it")
        known, new, alone = self.refs.get, self._new, self.alone
        args = tuple([a if type(a) is int or a is None else (known(a["$t"]) or new(a["$t"]))  # _arg, inline
                      if type(a) is dict and "$t" in a else self._ints(a) if type(a) is list else self._arg(a)
                      for a in args])
        kwargs = _NO_KWARGS if type(kwargs) is dict and not kwargs else {k: self._arg(v) for k, v in kwargs.items()}
        if type(inputs) is list and len(inputs) == 1:  # one tuple per ref read alone, shared by every op that does
            refs = alone.get(inputs[0]) or self._alone(inputs[0])
        else:
            refs = tuple([known(r) or new(r) for r in inputs])
        if one:  # one tuple per producer, shared by every op it alone produced for
            made = self.made[p]
            if made is None:
                made = self.made[p] = (ops[p],)
        else:
            made = tuple([ops[p] for p in producers])
        if args == refs:  # an op whose args are exactly its inputs (mm(a, b)) shares the one tuple
            args = refs
        op = self.builder.add_op(call, name, self._text(target, target) if type(target) is str else target, args,
                                 kwargs, refs, made, phase=extra[0].get("phase", "forward") if extra else "forward")
        if type(outputs) is list and len(outputs) == 1:  # a new ref: its (ref,) is the one its lone readers share
            r = outputs[0]
            outs = alone[r] = (known(r) or new(r),)
        else:
            outs = tuple([known(r) or new(r) for r in outputs])
        self.builder.set_outputs(op, outs, tuple([known(r) or new(r) for r in mutated]) if mutated else (), is_view)
        if source is not None:
            op.source = self.sources[source]
        if extra:
            self.extras.append((op, extra[0]))
            if extra[0].get("dtensor") is not None:
                self.builder.set_dtensor(op, self.sources[extra[0]["dtensor"]])

    def _finish_call(self, call: Call, c: dict[str, Any]) -> None:
        if c.get("source") is not None:
            call.source = self.sources[c["source"]]
        self.builder.set_call_inputs(call, self._refs(c["inputs"]))
        returned = c.get("returned")
        self.builder.set_call_result(call, self._refs(c["outputs"]),
                                     None if returned is None else self._unvalue(returned))
        arguments = c.get("arguments")
        if arguments is not None:
            positional, keywords = self._unvalue(arguments)
            self.builder.set_call_arguments(call, [tuple(p) for p in positional], keywords)

    # ---- tensors ---------------------------------------------------------------------------------
    def _ref(self, rid: int) -> TensorRef:
        return self.refs.get(rid) or self._new(rid)

    def _alone(self, rid: int) -> tuple[TensorRef]:
        """The one ``(ref,)`` of the ops that read or return only tensor ``rid``."""
        refs = self.alone[rid] = (self.refs.get(rid) or self._new(rid),)
        return refs

    def _new(self, rid: int) -> TensorRef:
        """The ref of tensor ``rid``, met for the first time."""
        _, shape, dtype, device, storage, version, producer, kind, name, slot = self.rows[rid]
        if producer is not None and not 0 <= producer <= self.at:
            raise FormatError(f"tensor {rid} is produced by op {producer}, but op {self.at} already uses it: "
                              f"a tensor is used only after the op that produced it")
        shape = tuple(shape)
        if type(dtype) is str and type(device) is str and type(kind) is str:  # else (a damaged file) kept as read
            texts = (dtype, device, kind)  # one str per distinct dtype, device, kind; one lookup for the three
            dtype, device, kind = self.texts.get(texts) or self._texts(texts)
        ref = self.refs[rid] = TensorRef(rid, self.shapes.setdefault(shape, shape), dtype, device, storage, version,
                                         None if producer is None else self.graph.ops[producer], kind, name, slot)
        return ref

    def _texts(self, texts: tuple[str, str, str]) -> tuple[str, str, str]:
        """A new ``(dtype, device, kind)``, each str the one already met where it was."""
        text = self._text
        shared = self.texts[texts] = (text(texts[0], texts[0]), text(texts[1], texts[1]), text(texts[2], texts[2]))
        return shared

    def _refs(self, ids: list[int]) -> list[TensorRef]:
        known = self.refs.get
        return [known(r) or self._ref(r) for r in ids]

    def _unvalue(self, v: Any) -> Any:
        return _unvalue(v, self._ref)

    def _ints(self, v: list[Any]) -> Any:
        """``_arg(v)`` of a list: the one list of those ints where all are ints (``[1, 2048, 16384]``)."""
        for x in v:
            if type(x) is not int:
                return self._arg(v)
        return self.lists.setdefault(tuple(v), v)

    def _arg(self, v: Any) -> Any:
        """``_unvalue(v)``, the common cases first: a tensor, a plain value, a list of ints."""
        t = type(v)
        if t is dict and "$t" in v:
            rid = v["$t"]
            return self.refs.get(rid) or self._ref(rid)
        if t is list:
            return [x if type(x) is int else self._arg(x) for x in v]
        if t is int or t is str or t is float or t is bool or v is None:
            return v
        return _unvalue(v, self._ref)


_PLAIN = len(OP_FIELDS)  # an op row's fixed fields; an object of the optional ones may follow
_NO_KWARGS: dict[str, Any] = {}  # the kwargs of every op without any: one dict, not one each (ops are read-only)


def _rows(ops: list[Any]) -> list[list[Any]]:
    """Format 3's op rows, each checked for its shape (the fields' values are checked as they are read)."""
    if type(ops) is list and set(map(type, ops)) <= {list}:  # the common case, without a call per row
        sizes = set(map(len, ops))
        if sizes <= {_PLAIN} or sizes <= {_PLAIN, _PLAIN + 1} and set(map(type, [o[-1] for o in ops if len(o) > _PLAIN])) <= {dict}:
            return ops
    for i, o in enumerate(ops):
        if type(o) is not list or not _PLAIN <= len(o) <= _PLAIN + 1 or (len(o) > _PLAIN and type(o[_PLAIN]) is not dict):
            raise FormatError(f"op {i} is {type(o).__name__} {str(o)[:60]}, not a row [{', '.join(OP_FIELDS)}] "
                              f"optionally followed by an object of {', '.join(OP_EXTRA)}")
    return ops


def _row(o: dict[str, Any]) -> list[Any]:
    """A format 1 or 2 op object as a format 3 row (a missing required key is a ``KeyError``: damaged)."""
    row = [o[k] for k in OP_FIELDS[:-1]]
    row.append(o.get("source"))
    extra = {k: o[k] for k in OP_EXTRA if k in o}
    if extra:
        row.append(extra)
    return row


def _saved(entry: Any, calls: list[Call]) -> Saved:
    """One ``saved`` entry, ``[storage, bytes, call position]``, checked."""
    storage, nbytes, ix = entry
    if (storage is not None and type(storage) is not int) or (nbytes is not None and (type(nbytes) is not int or nbytes < 0)) \
            or type(ix) is not int or not 0 <= ix < len(calls):
        raise FormatError(f"saved entry {entry!r} is not [storage number or null, bytes or null, call position]")
    return Saved(storage, nbytes, calls[ix])


def _error(type_name: str, message: str, module: str | None = None) -> BaseException:
    """The exception that ended the capture: the built-in type itself (``RuntimeError``), else a
    ``SavedError`` named like it."""
    found = getattr(builtins, type_name, None) if module in (None, "builtins") else None
    if isinstance(found, type) and issubclass(found, BaseException):
        try:
            return found(message)
        except TypeError:  # a built-in that wants other arguments (UnicodeDecodeError)
            pass
    name = type_name if type_name.isidentifier() else "CaptureError"
    qualified = f"{module}.{type_name}" if module else type_name
    return type(name, (SavedError,), {"__module__": "dispatchtrace.errors", "type": qualified})(message)
