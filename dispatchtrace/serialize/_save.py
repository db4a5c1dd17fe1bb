"""Save a capture as plain, versioned JSON and load it back as a real ``Graph`` (no pickle, no torch tensors).

>>> import io, torch, dispatchtrace as dt
>>> from dispatchtrace.serialize import loads
>>> lin, x = torch.nn.Linear(4, 2), torch.ones(1, 4)
>>> with dt.capture(lin) as g:
...     y = lin(x)
>>> text = dumps(g)
>>> text[:45]
'{"format":"dispatchtrace","version":4,"dispat'
>>> g2 = loads(text)
>>> str(g2) == str(g), g2.calls[0].label, g2.costs().total.params
(True, 'Linear', 10)

The format is described in ``docs/format.md``.
"""

from __future__ import annotations

import json
import os
from operator import attrgetter
from typing import Any

import torch

from .._collector import Paused
from .._structure import Built
from .._version import __version__
from ..graph import Call, Graph, Op, TensorRef
from ._kept import write_kept
from ._load import SavedError
from ._rows import STATS_FLOATS, STATS_ROW
from ._times import times_entries
from ._values import FORMAT, PLAIN, VERSION, _key, _record, _value

_STATS = attrgetter(*STATS_ROW.names[1:])  # a Stats record's fields in the row's order

# The rows below are written in the order of their declarations in ``_rows.py`` (``TENSOR_ROW``, ``OP_ROW``,
# ``OP_EXTRA``, ``CALL_ENTRY``, ``STATS_ROW``, ``SAVED_ROW``, ``PARAMS_ROW``), spelled out where a row is made per op
# so that writing one costs no call; tests/serialize/test_rows.py reads a saved capture through the declarations.

# ---- graph -> JSON ---------------------------------------------------------------------------


class _Tables:
    """While writing one graph: the tensors mentioned (by id) and the distinct source records."""

    def __init__(self) -> None:
        self.refs: dict[int, TensorRef] = {}
        self.sources: list[Any] = []
        self._source_ix: dict[Any, int] = {}
        self._source_of: dict[int, tuple[Any, int]] = {}  # id(record) -> (record, its index)

    def ids(self, refs: Any) -> list[int]:
        """Tensor ids of ``refs``, each ref noted for the ``tensors`` table."""
        note = self.refs.setdefault
        for r in refs:
            note(r.id, r)
        return [r.id for r in refs]

    def value(self, v: Any) -> Any:
        """An argument as JSON (``_value``), each ref inside it noted for the ``tensors`` table."""
        t = type(v)  # (the plain types first: none of them is a TensorRef)
        if t is int or t is str or t is bool or v is None:
            return v
        if t is list:
            return [x if type(x) is int else self.value(x) for x in v]
        if t is TensorRef or (t is not tuple and t is not dict and isinstance(v, TensorRef)):
            return {"$t": self.refs.setdefault(v.id, v).id}
        if t is tuple:
            return {"$tuple": [self.value(x) for x in v]}
        if t is dict:
            return {"$dict": [[k, self.value(x)] for k, x in v.items()]}
        if t is Built:  # an object the forward returned (a ModelOutput, a DynamicCache), refs inside
            return {"$object": v.type, "how": v.how, "context": self.value(v.context), "fields": self.value(v.fields)}
        return _value(v)

    def source(self, source: Any) -> int:
        """Index of ``source`` in the ``sources`` table (equal records share one entry)."""
        seen = self._source_of.get(id(source))
        if seen is not None and seen[0] is source:  # the same record as an earlier op's
            return seen[1]
        key = _key(source)
        ix = self._source_ix.get(key)
        if ix is None:
            ix = self._source_ix[key] = len(self.sources)
            self.sources.append(_record(source))
        self._source_of[id(source)] = (source, ix)
        return ix


def _op_rows(ops: list[Op], call_ix: dict[int, int], t: _Tables) -> list[list[Any]]:
    """Each op as a row (``_rows.OP_ROW``): ``[name, target, call, args, kwargs, inputs, outputs, mutated,
    is_view, producers, source]``, then ``{phase, origin, grad_of, param, dtensor}`` (``_rows.OP_EXTRA``) where any is set.

    One loop, no call per op (consecutive ops mostly share their call and source record); each ref
    noted for the ``tensors`` table where it is met, in the order ``_Tables.ids`` and ``value`` meet them."""
    value, note, source = t.value, t.refs.setdefault, t.source
    rows: list[list[Any]] = []
    last_call = last_source = last_ix = None
    for op in ops:
        call, src, args, inputs, kwargs, rare = op.call, op.source, op.args, op.inputs, op.kwargs, op.rare
        mutated = () if rare is None else rare.mutated  # the five rare fields: one read when none is set
        if call is not last_call:
            last_call, cix = call, call_ix[id(call)]
        if src is None:
            six = None
        elif src is last_source:
            six = last_ix
        else:
            last_source, six = src, source(src)
            last_ix = six
        if args is inputs:  # every arg a ref (the loader and capture share the tuple): noted as inputs
            ids = [note(r.id, r).id for r in inputs]
            row_args = [{"$t": i} for i in ids]
        else:
            row_args = [a if type(a) is int else {"$t": note(a.id, a).id} if type(a) is TensorRef else value(a)
                        for a in args]
            ids = [note(r.id, r).id for r in inputs]
        row_kwargs = {k: value(v) for k, v in kwargs.items()} if kwargs else {}
        row = [op.name, op.target, cix, row_args, row_kwargs, ids,
               [note(r.id, r).id for r in op.outputs], [note(r.id, r).id for r in mutated] if mutated else [],
               op.is_view, [p.index for p in op.producers], six]
        if op.phase != "forward" or (rare is not None and (rare.origin is not None or rare.grad_of is not None
                                                            or rare.param is not None or rare.dtensor is not None)):
            extra: dict[str, Any] = {}
            if op.phase != "forward":
                extra["phase"] = op.phase
            if op.origin is not None:
                extra["origin"] = call_ix[id(op.origin)]
            if op.grad_of is not None:
                extra["grad_of"] = op.grad_of.index
            if op.param is not None:
                extra["param"] = op.param
            if op.dtensor is not None:  # the DTensor-level op, a record in the same table as sources
                extra["dtensor"] = t.source(op.dtensor)
            row.append(extra)
        rows.append(row)
    return rows


def _call_entry(call: Call, call_ix: dict[int, int], t: _Tables) -> dict[str, Any]:
    children = [["op", c.index] if type(c) is Op or not isinstance(c, Call) else ["call", call_ix[id(c)]]
                for c in call.children]  # (an op, the common child: no isinstance call)
    entry: dict[str, Any] = {
        "path": call.path, "type": call.type, "index": call.index, "depth": call.depth,
        "parent": None if call.parent is None else call_ix[id(call.parent)], "repeat": call.repeat,
        "inputs": t.ids(call.inputs), "outputs": t.ids(call.outputs), "children": children,
    }
    if call.source is not None:
        entry["source"] = t.source(call.source)
    if call.returned is not None:
        entry["returned"] = t.value(call.returned)
    if call.arguments is not None:
        entry["arguments"] = t.value([[list(p) for p in call.arguments[0]], call.arguments[1]])
    return entry


def _values_entries(graph: Graph) -> dict[str, Any]:
    """Format 5's optional keys: what the capture kept of values, each tensor's ``Stats`` as a row."""
    if graph.values == "none" and not graph.stats:
        return {}
    rows = []
    for rid, s in graph.stats.items():
        row = [rid, *_STATS(s)]
        for k in STATS_FLOATS:
            row[k] = _value(row[k])
        rows.append(row)
    entries: dict[str, Any] = {"values": graph.values, "stats": rows}
    fingerprints = [[rid, f"{s.fingerprint:x}"] for rid, s in graph.stats.items() if s.fingerprint is not None]
    if fingerprints:  # capture(stats=("fingerprint",)): [tensor, hex] (text: a JSON number past 2**53 loses bits)
        entries["fingerprints"] = fingerprints
    return entries


def to_json(graph: Graph) -> dict[str, Any]:
    """The capture as a JSON-ready dict (see ``docs/format.md``)."""
    calls = [graph.root, *graph.calls]
    call_ix = {id(c): i for i, c in enumerate(calls)}
    t = _Tables()
    ops = _op_rows(graph.ops, call_ix, t)
    call_entries = [_call_entry(call, call_ix, t) for call in calls]
    graph_inputs, graph_outputs = t.ids(graph.inputs), t.ids(graph.outputs)
    error = graph.error
    values = _values_entries(graph)
    return {
        "format": FORMAT, "version": VERSION if values else PLAIN, "dispatchtrace": __version__, "torch": torch.__version__,
        "complete": graph.complete,
        "error": None if error is None else _error_entry(error),
        "tensors": [[r.id, list(r.shape), r.dtype, r.device, r.storage, r.version,
                     None if r.producer is None else r.producer.index, r.kind, r.name, r.slot]
                    for r in map(t.refs.__getitem__, sorted(t.refs))],
        "calls": call_entries, "ops": ops, "sources": t.sources,
        "saved": [[rec.storage, rec.bytes, call_ix[id(rec.call)]] for rec in graph.saved],
        "notes": list(graph.notes),
        "inputs": graph_inputs, "outputs": graph_outputs,
        "params": {"total": graph.root.params, "calls": [[c.params, c.self_params] for c in calls]},
        "constants": {name: {"dtype": lit.dtype, "shape": list(lit.shape),
                             "values": None if lit.values is None else [_value(v) for v in lit.values], "why": lit.why}
                      for name, lit in graph.constants.items()},
        **values,
        **times_entries(graph),
    }


def _error_entry(error: BaseException) -> dict[str, Any]:
    saved = getattr(type(error), "type", None) if isinstance(error, SavedError) else None
    module, _, _ = saved.rpartition(".") if saved else (type(error).__module__, "", "")
    args = error.args
    # the argument itself where str() decorates it (str(KeyError("k")) is "'k'"): rebuilt from it on load
    message = args[0] if len(args) == 1 and type(args[0]) is str else str(error)
    return {"type": type(error).__name__, "module": module or None, "message": message}


def dumps(graph: Graph) -> str:
    """The capture as JSON text (the cyclic collector paused meanwhile: ``collector.Paused``)."""
    with Paused():  # every list and dict of to_json's is new, built bottom-up: none can hold itself
        return json.dumps(to_json(graph), separators=(",", ":"), allow_nan=False, check_circular=False)


def save(graph: Graph, path: str | os.PathLike[str]) -> None:
    """Write ``graph`` to ``path`` as JSON (``g.save("trace.json")``); missing folders are created,
    as ``g.render`` and ``-o`` do. The values ``capture(keep=...)`` kept go beside it, as safetensors
    (``trace.values.safetensors``), read back by ``load``."""
    with Paused():
        data = to_json(graph)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    kept = write_kept(graph, path)  # kept tensors beside it, as safetensors
    if kept is not None:
        data["kept"], data["version"] = kept, VERSION
    with Paused():
        text = json.dumps(data, separators=(",", ":"), allow_nan=False, check_circular=False)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
        f.write("\n")
