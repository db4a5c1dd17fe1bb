"""The ``.et`` Chakra execution trace of a rank's schedule, decoded with MLCommons' own ``mlc-chakra``."""

from __future__ import annotations

import io
import json
import warnings

import pytest
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as fc

import dispatchtrace as dt
from dispatchtrace.render._chakra import SCHEMA, et_bytes, groups_json
from dispatchtrace.views import timeline

MS = 1e-3


def _decode(data: bytes):
    pb = pytest.importorskip("chakra.schema.protobuf.et_def_pb2")
    protolib = pytest.importorskip("chakra.src.third_party.utils.protolib")
    f = io.BytesIO(data)
    meta = pb.GlobalMetadata()
    assert protolib.decodeMessage(f, meta)
    nodes = []
    while True:
        node = pb.Node()
        if not protolib.decodeMessage(f, node):
            break
        nodes.append(node)
    return pb, meta, nodes


def _attrs(node) -> dict:
    out = {}
    for a in node.attr:
        out[a.name] = getattr(a, a.WhichOneof("value"))
    return out


def test_compute_and_collective_nodes_with_sizes_groups_and_dependencies():
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", store=FakeStore(), rank=2, world_size=8)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            lin = torch.nn.Linear(64, 64)
            x = torch.ones(4, 64)
            with dt.capture(lin) as g:
                y = fc.wait_tensor(fc.all_reduce(lin(x), "sum", dist.group.WORLD))
                y.relu()
    finally:
        dist.destroy_process_group()
    is_comm = lambda op: op.target.startswith(("c10d.", "_c10d_functional."))  # noqa: E731
    t = timeline(g, lambda op: 0.0 if is_comm(op) or op.is_view else MS, lambda c: 2 * MS)
    body = et_bytes(g, t, {"name": "NVIDIA H100 80GB HBM3", "source": "estimate"})
    pb, meta, nodes = _decode(body)
    assert meta.version == SCHEMA
    kinds = [pb.NodeType.Name(n.type) for n in nodes]
    assert kinds.count("COMM_COLL_NODE") == 1 and kinds.count("COMP_NODE") >= 2
    coll = nodes[kinds.index("COMM_COLL_NODE")]
    a = _attrs(coll)
    assert a["comm_type"] == pb.ALL_REDUCE and a["comm_size"] == 4 * 64 * 4 and a["pg_name"] == "0"
    assert coll.duration_micros == 2000
    addmm = next(n for n in nodes if "addmm" in n.name)
    assert _attrs(addmm)["num_ops"] == 2 * 4 * 64 * 64 and _attrs(addmm)["tensor_size"] > 0
    assert addmm.duration_micros == 1000
    assert addmm.id in coll.data_deps  # the all-reduce reads the Linear's output
    relu = next(n for n in nodes if "relu" in n.name)
    ids = {n.id for n in nodes}
    assert set(relu.data_deps) <= ids and relu.data_deps  # through the wait to the all-reduce
    assert json.loads(groups_json(g)) == {"0": list(range(8))}

