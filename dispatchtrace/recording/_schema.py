"""What an ATen overload writes, read once per overload from its schema's alias info (the capture's hot path)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

# Ops that write arguments their schema does not annotate as written (checked on torch 2.14):
# the batch-norm kernels update running_mean / running_var (args 3 and 4) when training (arg 5).
_UNANNOTATED_WRITES: dict[str, tuple[tuple[int, ...], int]] = {
    "aten::native_batch_norm": ((3, 4), 5),
    "aten::cudnn_batch_norm": ((3, 4), 5),
    "aten::miopen_batch_norm": ((3, 4), 5),
}

# Namespaces of the functional collectives, which name their process group by a string.
_FUNCTIONAL = frozenset({"_c10d_functional", "_c10d_functional_autograd", "c10d_functional"})


@dataclass(frozen=True, slots=True)
class OpSchema:
    """Per-overload facts capture needs on its hot path."""

    target: str
    base: str
    writes: tuple[tuple[int, str], ...]
    write_if: int | None
    views: bool = False  # a result aliases an argument and nothing is written (view, select, split, expand)
    lift: bool = False  # ``aten.lift_fresh`` and kin: the argument is a constant the forward built from Python data
    group: tuple[int, str] | None = None  # a collective's group-name argument (position, name): ``collectives.with_groups``
    self_only: bool = False  # writes its first argument, always, and nothing else (``relu_``, ``add_``): ``Recorder.op``'s fast path

    def written(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
        """The argument values (tensors or tensor lists) this call writes."""
        if not self.writes:
            return []
        if self.write_if is not None and not _arg(args, kwargs, self.write_if, ""):
            return []
        out = []
        for pos, name in self.writes:
            value = _arg(args, kwargs, pos, name)
            if value is not None:
                out.append(value)
        return out


def _arg(args: tuple[Any, ...], kwargs: dict[str, Any], pos: int, name: str) -> Any:
    if pos < len(args):
        return args[pos]
    return kwargs.get(name)


SCHEMAS: dict[int, OpSchema] = {}
"""``OpSchema`` by ``id(overload)``: an ``OpOverload`` hashes in Python, an ``id`` does not (each
overload is kept alive in ``_OVERLOADS``, so its ``id`` is never reused)."""
_OVERLOADS: list[Any] = []
_LIFTS = frozenset({"aten.lift_fresh.default", "aten.lift_fresh_copy.default", "aten.lift.default"})


def schema_of(func: Any) -> OpSchema:
    """Cached ``OpSchema`` for an ``OpOverload``."""
    info = SCHEMAS.get(id(func))
    if info is None:
        _OVERLOADS.append(func)
        info = SCHEMAS[id(func)] = _build(func)
    return info


def _build(func: Any) -> OpSchema:
    target = str(func)
    base = getattr(getattr(func, "overloadpacket", None), "__name__", target.split(".")[-2] if "." in target else target)
    writes: list[tuple[int, str]] = []
    write_if = None
    schema = getattr(func, "_schema", None)
    if isinstance(schema, torch._C.FunctionSchema):
        for i, arg in enumerate(schema.arguments):
            if arg.alias_info is not None and arg.alias_info.is_write:
                writes.append((i, arg.name))
        extra = _UNANNOTATED_WRITES.get(schema.name)
        if extra is not None and not writes:
            positions, write_if = extra
            writes = [(p, schema.arguments[p].name) for p in positions]
        if schema.name.startswith("c10d::") and schema.name.endswith("_") and not writes:
            writes = [(0, schema.arguments[0].name)]  # in-place c10d collectives write their first argument
    views = isinstance(schema, torch._C.FunctionSchema) and not writes and any(
        r.alias_info is not None and not r.alias_info.is_write for r in schema.returns)
    group = None
    if isinstance(schema, torch._C.FunctionSchema) and schema.name.split("::")[0] in _FUNCTIONAL:
        group = next(((i, a.name) for i, a in enumerate(schema.arguments) if a.name == "group_name"), None)
    self_only = len(writes) == 1 and writes[0][0] == 0 and write_if is None
    return OpSchema(target, base, tuple(writes), write_if, views, target in _LIFTS, group, self_only)
