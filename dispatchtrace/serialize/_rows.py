"""What each row and entry of a saved file holds, declared once: its fields in order and the JSON type of each.

``_save.py`` writes the rows in this order, ``_load.py`` reads them in it, and ``_check.py`` checks them with
the checker each ``RowType`` compiles from its fields (one function per row kind, the tests inline, as attrs
writes its ``__init__`` from the declared fields), so that checking a file costs no call per field.

>>> TENSOR_ROW.names[:3], OP_EXTRA.names
(('id', 'shape', 'dtype'), ('phase', 'origin', 'grad_of', 'param', 'dtensor'))
>>> SAVED_ROW.check("saved entry 0", [3, -1, 0])
Traceback (most recent call last):
...
dispatchtrace.errors.FormatError: saved entry 0: bytes is -1, not an integer >= 0 or null
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import FormatError
from ..graph import PHASES, Stats, itemsize

KINDS = ("input", "parameter", "buffer", "activation", "constant")
"""A tensor's kind, as a tensor row names it."""

_SYMBOLIC = re.compile(r"(?=.*\b[a-z]+\d+\b)[\w\s+\-*/()%.,]+")
"""The text of a symbolic size (``s0``, ``2*s1 + 1``, ``u0``): arithmetic on at least one torch symbol."""

_ABSENT = object()


def _shape_ok(v: Any) -> bool:
    return type(v) is list and all((type(s) is int and s >= 0) or (type(s) is str and _SYMBOLIC.fullmatch(s)) for s in v)


def _dtype_ok(v: Any) -> bool:
    return type(v) is str and (itemsize(v) is not None or v.startswith(("q", "bits")))


#: each type a field may have: (the test of ``v``, as Python source, and what it is in an error's words)
TYPES: dict[str, tuple[str, str]] = {
    "any": ("True", "anything"),
    "str": ("type(v) is str", "a string"),
    "str?": ("v is None or type(v) is str", "a string or null"),
    "int": ("type(v) is int", "an integer"),
    "int>=0": ("type(v) is int and v >= 0", "an integer >= 0"),
    "int>=0?": ("v is None or type(v) is int and v >= 0", "an integer >= 0 or null"),
    "int>=1": ("type(v) is int and v >= 1", "an integer >= 1"),
    "int>=-1": ("type(v) is int and v >= -1", "an integer >= -1"),
    "ints": ("type(v) is list and not any(type(x) is not int for x in v)", "a list of integers"),
    "list": ("type(v) is list", "a list"),
    "dict": ("type(v) is dict", "an object"),
    "bool": ("type(v) is bool", "true or false"),
    "shape": ("_shape_ok(v)", "a list of sizes (ints, or the text of a symbolic size)"),
    "dtype": ("_dtype_ok(v)", "the name of a torch dtype ('float32')"),
    "kind": ("v in KINDS", f"one of {', '.join(KINDS)}"),
    "phase": ("v in PHASES", f"one of {', '.join(PHASES)}"),
    "value": ("True", "a value"),  # a number, or a non-finite float as {"$float": ...} (``_values._unvalue``)
}


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a row: its ``name`` (the key of an object entry), its ``type`` (a key of ``TYPES``), and for an
    object entry whether the key may be absent (``optional``; a required key that is absent reads as null)."""

    name: str
    type: str
    optional: bool = False


class RowType:
    """A row (``[a, b, ...]``, ``keyed=False``; ``more`` items may follow its fields) or an object entry
    (``{"a": ..., ...}``, ``keyed=True``) of a saved file: its fields in order, and ``check(where, row)``, compiled
    from them, that raises ``FormatError`` naming the first field of the wrong type."""

    def __init__(self, what: str, fields: tuple[Field, ...], *, keyed: bool = False, more: int = 0) -> None:
        self.what = what
        self.fields = fields
        self.names = tuple(f.name for f in fields)
        self.keyed = keyed
        self.more = more
        self.check: Callable[[str, Any], None] = self._compile()

    def describe(self) -> str:
        """``[id, shape, dtype, ...]``: the row as an error names it."""
        return f"[{', '.join(self.names)}]"

    def _compile(self) -> Callable[[str, Any], None]:
        n = len(self.fields)
        lines = ["def check(where, row):"]
        if self.keyed:
            lines.append("    if type(row) is not dict:")
            lines.append("        _fail(where, 'the entry', row, 'an object')")
        else:
            lines.append(f"    if type(row) is not list or not {n} <= len(row) <= {n + self.more}:")
            lines.append(f"        _fail(where, 'the row', row, {self.describe()!r})")
        for i, f in enumerate(self.fields):
            test, want = TYPES[f.type]
            if not self.keyed:
                lines.append(f"    v = row[{i}]")
            elif f.optional:
                lines.append(f"    v = row.get({f.name!r}, _ABSENT)")
                test = f"v is _ABSENT or {test}"
            else:
                lines.append(f"    v = row.get({f.name!r})")
            lines.append(f"    if not ({test}):")
            lines.append(f"        _fail(where, {f.name!r}, v, {want!r})")
        namespace: dict[str, Any] = {"_fail": _fail, "_ABSENT": _ABSENT, "_shape_ok": _shape_ok, "_dtype_ok": _dtype_ok,
                                     "KINDS": KINDS, "PHASES": PHASES}
        exec(compile("\n".join(lines), f"<check of {self.what}>", "exec"), namespace)  # noqa: S102 - our own source
        return namespace["check"]  # type: ignore[no-any-return]


def _fail(where: str, field: str, value: Any, want: str) -> None:
    raise FormatError(f"{where}: {field} is {_short(value)}, not {want}")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


TENSOR_ROW = RowType("a tensor row", (
    Field("id", "int>=0"), Field("shape", "shape"), Field("dtype", "dtype"), Field("device", "str"),
    Field("storage", "int>=0"), Field("version", "int>=0"), Field("producer", "int>=0?"), Field("kind", "kind"),
    Field("name", "str?"), Field("slot", "int>=0")))
"""A row of ``tensors``: one ``TensorRef`` (its ``producer`` an op's position)."""

OP_ROW = RowType("an op row", more=1, fields=(
    Field("name", "str"), Field("target", "str"), Field("call", "int>=0"), Field("args", "list"),
    Field("kwargs", "dict"), Field("inputs", "ints"), Field("outputs", "ints"), Field("mutated", "ints"),
    Field("is_view", "bool"), Field("producers", "ints"), Field("source", "int>=0?")))
"""A row of ``ops`` (format 3 on): one ``Op``, its tensors by id, its call and source by position; an object of
``OP_EXTRA`` may follow."""

OP_EXTRA = RowType("an op's optional fields", keyed=True, fields=(
    Field("phase", "phase", True), Field("origin", "int>=0?", True), Field("grad_of", "int>=0?", True),
    Field("param", "str?", True), Field("dtensor", "int>=0?", True)))
"""The object after an op row, with the fields most ops lack (absent: forward, none)."""

CALL_ENTRY = RowType("a call entry", keyed=True, fields=(
    Field("path", "str"), Field("type", "str"), Field("index", "int>=0"), Field("depth", "int>=-1"),
    Field("parent", "int>=0?"), Field("repeat", "int>=1"), Field("inputs", "ints"), Field("outputs", "ints"),
    Field("children", "list"), Field("source", "int>=0?", True), Field("returned", "any", True),
    Field("arguments", "any", True)))
"""An entry of ``calls``: one ``Call`` as an object (``source``, ``returned``, ``arguments`` only where set)."""

STATS_ROW = RowType("a stats row", (Field("tensor", "int>=0"), *(
    Field(f.name, "int>=0" if f.type in ("int", int) else "int>=0?" if f.type == "int | None" else "value")
    for f in dataclasses.fields(Stats) if f.name != "fingerprint")))
"""A row of ``stats`` (format 5): the tensor's id, then the fields of the ``Stats`` record in its order (the floats
as ``_values._value`` writes them; ``zeros`` null where it was not counted). A fingerprint
(``capture(stats=("fingerprint",))``) is no column: ``fingerprints`` holds ``[tensor, hex]`` entries beside."""

STATS_FLOATS = tuple(i for i, f in enumerate(STATS_ROW.fields) if f.type == "value")
"""The positions of a stats row's floats (written with ``_value``, read with ``_unvalue``)."""

SAVED_ROW = RowType("a saved entry", (Field("storage", "int>=0?"), Field("bytes", "int>=0?"), Field("call", "int>=0")))
"""An entry of ``saved``: ``[storage, bytes, call position]`` (``g.saved``)."""

PARAMS_ROW = RowType("the params of a call", (Field("params", "int>=0?"), Field("self_params", "int>=0?")))
"""An entry of ``params.calls``: the call's parameters with its children's, and its own."""
