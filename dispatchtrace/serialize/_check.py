"""The type of every field of a saved file, checked before a graph is built from it (``FormatError`` if not).

A damaged file must not load as a graph that draws something the capture never saw (a shape ``"abc"``
drawn as ``f32[a, b, c]``): each table's rows and each record's fields are checked here for their JSON
type (a shape is a list of ints and symbolic sizes, a dtype a dtype torch knows, a kind one of the five,
a position an int), and ``_Loader`` and ``Graph.lint`` check what the values mean.

>>> check_types({"tensors": [[0, "abc", "float32", "cpu", 0, 0, None, "input", "x", 0]], "calls": [], "ops": []})
Traceback (most recent call last):
...
dispatchtrace.errors.FormatError: tensor row 0: shape is 'abc', not a list of sizes (ints, or the text of a symbolic size)
"""

from __future__ import annotations

import re
from typing import Any

from ..errors import FormatError
from ..graph import PHASES, itemsize
from ._times import check_times

_KINDS = ("input", "parameter", "buffer", "activation", "constant")


def _fail(where: str, field: str, value: Any, want: str) -> None:
    raise FormatError(f"{where}: {field} is {_short(value)}, not {want}")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _int(where: str, field: str, v: Any, *, null: bool = False, low: int | None = None) -> None:
    if v is None and null:
        return
    if type(v) is not int or (low is not None and v < low):
        _fail(where, field, v, "an integer" + (f" >= {low}" if low is not None else "") + (" or null" if null else ""))


def _str(where: str, field: str, v: Any, *, null: bool = False) -> None:
    if v is None and null:
        return
    if type(v) is not str:
        _fail(where, field, v, "a string" + (" or null" if null else ""))


def _ints(where: str, field: str, v: Any) -> None:
    if type(v) is not list or any(type(x) is not int for x in v):
        _fail(where, field, v, "a list of integers")


def _shape(where: str, v: Any) -> None:
    if type(v) is not list or any(not (type(s) is int and s >= 0) and not (type(s) is str and _SYMBOLIC.fullmatch(s))
                                  for s in v):
        _fail(where, "shape", v, "a list of sizes (ints, or the text of a symbolic size)")


_SYMBOLIC = re.compile(r"(?=.*\b[a-z]+\d+\b)[\w\s+\-*/()%.,]+")
"""The text of a symbolic size (``s0``, ``2*s1 + 1``, ``u0``): arithmetic on at least one torch symbol."""


def _dtype(where: str, v: Any) -> None:
    if type(v) is not str or itemsize(v) is None and not v.startswith(("q", "bits")):
        _fail(where, "dtype", v, "the name of a torch dtype ('float32')")


def check_types(data: dict[str, Any]) -> None:
    """``FormatError`` naming the first field of ``data`` (a saved file's top object) of the wrong type."""
    _check_tensors(data.get("tensors"))
    _check_calls(data.get("calls"))
    _check_ops(data.get("ops"), data.get("version", 4))
    check_times(data, len(data.get("ops") or ()))
    for key in ("inputs", "outputs"):
        _ints("the file", key, data.get(key))
    for i, note in enumerate(_list("the file", "notes", data.get("notes", []))):
        if type(note) is not str or not note:
            _fail(f"note {i}", "its text", note, "a non-empty string")
    if type(data.get("complete")) is not bool:
        _fail("the file", "complete", data.get("complete"), "true or false")
    error = data.get("error")
    if error is not None:
        if type(error) is not dict:
            _fail("the file", "error", error, "an object or null")
        _str("the error", "type", error.get("type"))
        _str("the error", "message", error.get("message"))
        _str("the error", "module", error.get("module"), null=True)
    params = data.get("params")
    if type(params) is not dict:
        _fail("the file", "params", params, "an object of total and calls")
    _int("params", "total", params.get("total"), null=True, low=0)
    for i, pair in enumerate(_list("params", "calls", params.get("calls"))):
        if type(pair) is not list or len(pair) != 2:
            _fail(f"params of call {i}", "the entry", pair, "[params, own params]")
        for v in pair:
            _int(f"params of call {i}", "a count", v, null=True, low=0)
    for i, entry in enumerate(_list("the file", "saved", data.get("saved", []))):
        if type(entry) is not list or len(entry) != 3:
            _fail(f"saved entry {i}", "the entry", entry, "[storage number or null, bytes or null, call position]")
    constants = data.get("constants", {})
    if type(constants) is not dict:
        _fail("the file", "constants", constants, "an object of name: literal")
    for name, lit in constants.items():
        where = f"constant {name}"
        if type(lit) is not dict:
            _fail(where, "the entry", lit, "an object of dtype, shape, values and why")
        _dtype(where, lit.get("dtype"))
        _shape(where, lit.get("shape"))
        values = lit.get("values")
        if values is not None and type(values) is not list:
            _fail(where, "values", values, "a list or null")
        _str(where, "why", lit.get("why"), null=True)
    for i, src in enumerate(_list("the file", "sources", data.get("sources"))):
        if src is not None and (type(src) is not dict or type(src.get("$record")) is not str
                                or type(src.get("fields")) is not dict):
            _fail(f"source {i}", "the record", src, '{"$record": tag, "fields": {...}}')
        if src is not None and src["$record"] in ("Source", "dispatchtrace.source.Source"):
            f = src["fields"]
            _str(f"source {i}", "file", f.get("file"))
            _int(f"source {i}", "line", f.get("line"), low=0)
            _str(f"source {i}", "function", f.get("function"))
            _str(f"source {i}", "text", f.get("text"))


def _list(where: str, field: str, v: Any) -> list[Any]:
    if type(v) is not list:
        _fail(where, field, v, "a list")
    return v


def _check_tensors(rows: Any) -> None:
    for i, row in enumerate(_list("the file", "tensors", rows)):
        where = f"tensor row {i}"
        if type(row) is not list or len(row) != 10:
            _fail(where, "the row", row, "[id, shape, dtype, device, storage, version, producer, kind, name, slot]")
        rid, shape, dtype, device, storage, version, producer, kind, name, slot = row
        _int(where, "id", rid, low=0)
        _shape(where, shape)
        _dtype(where, dtype)
        _str(where, "device", device)
        _int(where, "storage", storage, low=0)
        _int(where, "version", version, low=0)
        _int(where, "producer", producer, null=True, low=0)
        if kind not in _KINDS:
            _fail(where, "kind", kind, f"one of {', '.join(_KINDS)}")
        _str(where, "name", name, null=True)
        _int(where, "slot", slot, low=0)


def _check_calls(entries: Any) -> None:
    for i, c in enumerate(_list("the file", "calls", entries)):
        where = f"call {i}"
        if type(c) is not dict:
            _fail(where, "the entry", c, "an object")
        _str(where, "path", c.get("path"))
        _str(where, "type", c.get("type"))
        _int(where, "index", c.get("index"), low=0)
        _int(where, "depth", c.get("depth"), low=-1)
        _int(where, "parent", c.get("parent"), null=True, low=0)
        _int(where, "repeat", c.get("repeat"), low=1)
        _int(where, "source", c.get("source"), null=True, low=0)
        for key in ("inputs", "outputs"):
            _ints(where, key, c.get(key))
        for child in _list(where, "children", c.get("children")):
            if type(child) is not list or len(child) != 2 or type(child[0]) is not str or type(child[1]) is not int:
                _fail(where, "a child", child, '["call" or "op", position]')


def _check_ops(rows: Any, version: Any) -> None:
    if type(version) is int and version < 3:
        return  # op objects of formats 1 and 2: read field by field (``_row``), checked as they are built
    for i, row in enumerate(_list("the file", "ops", rows)):
        where = f"op {i}"
        if type(row) is not list or len(row) < 11:
            continue  # ``_rows`` says what an op row is
        name, target, call, args, kwargs, inputs, outputs, mutated, is_view, producers, source, *extra = row
        _str(where, "name", name)
        _str(where, "target", target)
        _int(where, "call", call, low=0)
        if type(args) is not list:
            _fail(where, "args", args, "a list")
        if type(kwargs) is not dict:
            _fail(where, "kwargs", kwargs, "an object")
        for key, refs in (("inputs", inputs), ("outputs", outputs), ("mutated", mutated), ("producers", producers)):
            _ints(where, key, refs)
        if type(is_view) is not bool:
            _fail(where, "is_view", is_view, "true or false")
        _int(where, "source", source, null=True, low=0)
        if extra and type(extra[0]) is dict:
            e = extra[0]
            if "phase" in e and e["phase"] not in PHASES:
                _fail(where, "phase", e["phase"], f"one of {', '.join(PHASES)}")
            _int(where, "origin", e.get("origin"), null=True, low=0)
            _int(where, "grad_of", e.get("grad_of"), null=True, low=0)
            _str(where, "param", e.get("param"), null=True)
            _int(where, "dtensor", e.get("dtensor"), null=True, low=0)
