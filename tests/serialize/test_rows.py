"""The saved file's rows are declared once (``serialize/_rows.py``): a saved capture read through the declarations
is the capture, the loader unpacks the fields in the declared order, and each check is the declaration's."""

from __future__ import annotations

import ast
import inspect
import json
import textwrap

import pytest
import torch
import torch.nn as nn
from models import needs_node_hook

import dispatchtrace as dt
from dispatchtrace.serialize import FormatError, dumps
from dispatchtrace.serialize import _load as load_module
from dispatchtrace.serialize._rows import (
    CALL_ENTRY,
    OP_EXTRA,
    OP_ROW,
    PARAMS_ROW,
    SAVED_ROW,
    STATS_ROW,
    TENSOR_ROW,
    TYPES,
)


@pytest.fixture(scope="module")
def step() -> tuple[dt.Graph, dict]:
    torch.manual_seed(0)
    net, x = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 1)), torch.randn(2, 4)
    with dt.capture(net, values="stats") as g:
        net(x).sum().backward()
    return g, json.loads(dumps(g))


@needs_node_hook  # the saved entries (g.saved)
def test_every_row_read_through_its_declaration_is_the_capture(step: tuple[dt.Graph, dict]) -> None:
    g, data = step
    calls = [g.root, *g.calls]
    for op, row in zip(g.ops, data["ops"], strict=True):
        f = dict(zip(OP_ROW.names, row, strict=False))
        assert (f["name"], f["target"], calls[f["call"]], f["is_view"]) == (op.name, op.target, op.call, op.is_view)
        assert (f["inputs"], f["outputs"], f["mutated"]) == ([r.id for r in op.inputs], [r.id for r in op.outputs],
                                                             [r.id for r in op.mutated])
        assert f["producers"] == [p.index for p in op.producers]
        extra = row[len(OP_ROW.names)] if len(row) > len(OP_ROW.names) else {}
        assert set(extra) <= set(OP_EXTRA.names) and extra.get("phase", "forward") == op.phase
    refs = {r.id: r for op in g.ops for r in (*op.inputs, *op.outputs)}
    for row in data["tensors"]:
        f = dict(zip(TENSOR_ROW.names, row, strict=True))
        r = refs.get(f["id"])
        if r is not None:
            assert (tuple(f["shape"]), f["dtype"], f["storage"], f["version"], f["kind"], f["name"], f["slot"]) == \
                (r.shape, r.dtype, r.storage, r.version, r.kind, r.name, r.slot)
    for row in data["stats"]:
        f = dict(zip(STATS_ROW.names, row, strict=True))
        s = g.stats[f["tensor"]]
        assert (f["numel"], f["nan"], f["zeros"]) == (s.numel, s.nan, s.zeros) and f["norm"] == pytest.approx(s.norm)
    for entry, call in zip(data["calls"], calls, strict=True):
        assert set(entry) <= set(CALL_ENTRY.names) and (entry["path"], entry["index"]) == (call.path, call.index)
    for pair, call in zip(data["params"]["calls"], calls, strict=True):
        assert dict(zip(PARAMS_ROW.names, pair, strict=True)) == {"params": call.params, "self_params": call.self_params}
    assert data["saved"] and all(calls[dict(zip(SAVED_ROW.names, e, strict=True))["call"]] is s.call
                                 for e, s in zip(data["saved"], g.saved, strict=True))


def _unpacked(fn: object) -> list[str]:
    """The names of the first tuple unpack in ``fn`` whose right side is a row (a subscript)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))  # type: ignore[arg-type]
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Tuple) and isinstance(node.value, ast.Subscript):
            return [e.id if isinstance(e, ast.Name) else e.value.id for e in node.targets[0].elts]  # type: ignore[attr-defined]
    raise AssertionError("no unpack of a row")


def test_the_loader_unpacks_the_declared_fields_in_order() -> None:
    ops = _unpacked(load_module._Loader._add_op)
    assert ops[:-1] == [{"call": "in_call"}.get(n, n) for n in OP_ROW.names] and ops[-1] == "extra"
    tensors = _unpacked(load_module._Loader._new)
    assert tensors[1:] == list(TENSOR_ROW.names[1:])  # (the id, known already, unpacked as _)


@pytest.mark.parametrize("declared", [TENSOR_ROW, OP_ROW, STATS_ROW, SAVED_ROW, PARAMS_ROW], ids=lambda d: d.what)
def test_a_row_of_another_length_is_refused_by_its_declaration(declared: object) -> None:
    n = len(declared.fields)  # type: ignore[attr-defined]
    for row in ([0] * (n - 1), [0] * (n + declared.more + 1), {"a": 1}):  # type: ignore[attr-defined]
        with pytest.raises(FormatError, match=r"where: the row is .*, not \[" + declared.names[0]):  # type: ignore[attr-defined]
            declared.check("where", row)  # type: ignore[attr-defined]


def test_each_field_of_another_type_is_named() -> None:
    good = {"int>=0": 1, "int>=0?": None, "str": "x", "str?": None, "ints": [1], "list": [], "dict": {}, "bool": True,
            "shape": [2], "dtype": "float32", "kind": "input", "phase": "forward", "int>=1": 1, "int>=-1": -1, "int": 0,
            "any": 0, "value": 0.5}
    assert set(good) == set(TYPES)
    for declared in (TENSOR_ROW, OP_ROW, SAVED_ROW, PARAMS_ROW, CALL_ENTRY, OP_EXTRA):
        row = [good[f.type] for f in declared.fields]
        as_given = dict(zip(declared.names, row, strict=True)) if declared.keyed else row
        declared.check("where", as_given)
        for k, f in enumerate(declared.fields):
            if f.type in ("any", "value"):
                continue
            bad = list(row)
            bad[k] = {"$t": 1} if f.type != "dict" else "x"
            given = dict(zip(declared.names, bad, strict=True)) if declared.keyed else bad
            with pytest.raises(FormatError, match=f"where: {f.name} is "):
                declared.check("where", given)
