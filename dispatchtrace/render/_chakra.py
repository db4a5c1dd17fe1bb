"""A rank's step as a Chakra execution trace (``.et``, MLCommons' schema), the input ASTRA-sim replays at scales no one can run.

The file is what Chakra's own tools write (``et_def.proto``, each message prefixed by its length as a
varint): a ``GlobalMetadata``, then one ``Node`` per op that takes time, in program order. A compute op
is a ``COMP_NODE`` with its duration (``duration_micros``), its FLOPs (``num_ops``) and the bytes it
moves (``tensor_size``); a collective is a ``COMM_COLL_NODE`` with ``comm_type``, ``comm_size`` (bytes)
and ``pg_name`` (its process group, whose ranks ``groups_json`` lists for ASTRA-sim's
``--comm-group-configuration``); a send or recv a ``COMM_SEND_NODE`` / ``COMM_RECV_NODE`` with its peer.
``data_deps`` are the capture's data dependencies (through views and other ops that take no time),
``ctrl_deps`` the previous node on the same stream, so a replay keeps the program order. The protobuf
wire format is written here directly (a few field kinds): the package needs no protobuf at run time;
the tests decode the files with ``mlc-chakra``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..views import collective_size, collectives, costs, tensor_bytes
from ._trace_json import producers_in, timeline_of

if TYPE_CHECKING:
    from ..graph import Graph
    from ..views import Costs, Span, Timeline

#: et_def.proto's NodeType and CollectiveCommType numbers
COMP_NODE, COMM_SEND_NODE, COMM_RECV_NODE, COMM_COLL_NODE = 4, 5, 6, 7
COMM_TYPES = {"all_reduce": 0, "reduce": 1, "all_gather": 2, "gather": 3, "scatter": 4, "broadcast": 5,
              "all_to_all": 6, "reduce_scatter": 7, "barrier": 9}
SCHEMA = "1.0.2-chakra.1.0.0"


@dataclass(frozen=True, slots=True, kw_only=True)
class ChakraOptions:
    """What a Chakra trace takes: the ``estimate`` whose times it holds (else a timed capture's measured times)."""

    estimate: Any = None


def write(graph: Graph, o: ChakraOptions) -> bytes:
    """The ``.et`` file's bytes."""
    timeline, device = timeline_of(graph, o.estimate)
    return et_bytes(graph, timeline, device)


def et_bytes(graph: Graph, timeline: Timeline, device: dict[str, Any]) -> bytes:
    """The execution trace of ``timeline`` (a schedule of ``graph``) on ``device`` (its ``name`` and ``source``)."""
    cost = costs(graph)
    out = bytearray()
    meta = _field_bytes(1, SCHEMA.encode()) + b"".join(_field_bytes(2, a) for a in (
        _attr_string("schema", SCHEMA), _attr_string("device", device["name"]),
        _attr_string("source", f"dispatchtrace ({device['source']})")))
    _message(out, meta)
    ids: dict[int, int] = {}
    last_on: dict[str, int] = {}
    for s in timeline.spans:
        if s.end <= s.start and s.collective is None:
            continue
        node_id = len(ids)
        ids[s.op.index] = node_id
        deps = [ids[p.index] for p in producers_in(s.op, ids)]
        ctrl = [last_on[s.stream]] if s.stream in last_on and last_on[s.stream] not in deps else []
        last_on[s.stream] = node_id
        _message(out, _node(node_id, s, deps, ctrl, cost))
    return bytes(out)


def groups_json(graphs: Graph | Mapping[int, Graph]) -> str:
    """ASTRA-sim's communicator groups (``--comm-group-configuration``): each process group's name -> its global
    ranks, as JSON, from one rank's capture or every rank's (``{rank: Graph}``)."""
    groups: dict[str, list[int]] = {}
    for graph in (graphs.values() if isinstance(graphs, Mapping) else [graphs]):
        groups.update({c.group.name: list(c.group.ranks) for c in collectives(graph) if c.group is not None})
    return json.dumps(groups, indent=1, sort_keys=True)


#: the formats that write a rank's schedule (one file per rank of a job)
TIMELINES = ("trace", "chakra")


def per_rank(path: str | os.PathLike[str], rank: int | str) -> str:
    """Where one rank's timeline of a job goes: ``step.trace.json`` -> ``step.rank3.trace.json`` (HTA reads a
    folder of them), ``step.et`` -> ``step.3.et`` (ASTRA-sim reads ``PREFIX.<rank>.et``).

    >>> per_rank("out/step.trace.json", 3), per_rank("out/step.et", 3)
    ('out/step.rank3.trace.json', 'out/step.3.et')
    """
    text = os.fspath(path)
    if text.lower().endswith(".trace.json"):
        return f"{text[:-len('.trace.json')]}.rank{rank}.trace.json"
    stem, suffix = os.path.splitext(text)
    return f"{stem}.{rank}{suffix}"


def _node(node_id: int, s: Span, deps: list[int], ctrl: list[int], cost: Costs) -> bytes:
    op = s.op
    c = s.collective
    attrs = [_attr_bool("is_cpu_op", False), _attr_string("op", op.target), _attr_string("call", op.call.label),
             _attr_string("phase", op.phase)]
    if c is None:
        kind = COMP_NODE
        flops, nbytes = cost.op(op).flops or 0, sum(tensor_bytes(r) or 0 for r in (*op.inputs, *op.outputs))
        attrs += [_attr_uint("num_ops", flops), _attr_uint("tensor_size", nbytes)]
    elif c.kind in ("send", "recv"):
        kind = COMM_SEND_NODE if c.kind == "send" else COMM_RECV_NODE
        peer = c.group.ranks[c.peer] if c.group is not None and c.peer is not None and c.peer < c.group.size else -1
        me = c.group.rank if c.group is not None else -1
        src, dst = (me, peer) if c.kind == "send" else (peer, me)
        attrs += [_attr_int("comm_src", src), _attr_int("comm_dst", dst), _attr_int("comm_tag", 0),
                  _attr_uint("tensor_size", max(c.sent, c.received))]
    else:
        kind = COMM_COLL_NODE
        attrs += [_attr_int("comm_type", COMM_TYPES.get(c.kind, 0)), _attr_int("comm_size", collective_size(c))]
        if c.group is not None:
            attrs.append(_attr_string("pg_name", c.group.name))
    body = _field_varint(1, node_id) + _field_bytes(2, f"{op.name}: {op.short}".encode()) + _field_varint(3, kind)
    body += _packed(4, ctrl) + _packed(5, deps)
    body += _field_varint(6, round(s.start * 1e6)) + _field_varint(7, round(s.seconds * 1e6))
    shapes = json.dumps([list(r.shape) if r.shape is not None else None for r in op.outputs])
    body += _field_bytes(9, _field_bytes(2, shapes.encode()) + _field_bytes(3, json.dumps([r.dtype for r in op.outputs]).encode()))
    return body + b"".join(_field_bytes(10, a) for a in attrs)


# ---- the few protobuf wire-format pieces the schema needs -------------------------------------------

def _varint(n: int) -> bytes:
    if n < 0:
        n += 1 << 64  # int64's two's complement, as protobuf writes a negative int64
    out = bytearray()
    while True:
        bits = n & 0x7F
        n >>= 7
        if n:
            out.append(0x80 | bits)
        else:
            out.append(bits)
            return bytes(out)


def _field_varint(field: int, n: int) -> bytes:
    return _varint(field << 3) + _varint(n) if n else b""  # proto3 leaves zero out


def _field_bytes(field: int, data: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(data)) + data


def _packed(field: int, values: list[int]) -> bytes:
    return _field_bytes(field, b"".join(_varint(v) for v in values)) if values else b""


def _attr_string(name: str, value: str) -> bytes:
    return _field_bytes(1, name.encode()) + _field_bytes(29, value.encode())


def _attr_int(name: str, value: int) -> bytes:  # int64_val = 9
    return _field_bytes(1, name.encode()) + _varint(9 << 3) + _varint(value)


def _attr_uint(name: str, value: int) -> bytes:  # uint64_val = 13
    return _field_bytes(1, name.encode()) + _varint(13 << 3) + _varint(value)


def _attr_bool(name: str, value: bool) -> bytes:  # bool_val = 27
    return _field_bytes(1, name.encode()) + _varint(27 << 3) + _varint(int(value))


def _message(out: bytearray, body: bytes) -> None:
    out += _varint(len(body))
    out += body
