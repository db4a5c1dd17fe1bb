"""DTensor at both levels, on the fake process group: local ops point to the DTensor-level op they ran for."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn
from models import needs_node_hook
from torch.utils.flop_counter import FlopCounterMode

import dispatchtrace as dt
from dispatchtrace.graph import DTensorOp
from dispatchtrace.serialize import dumps, loads

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def tp_mlp():
    """Rank 0 of 8 on the fake backend; a two-layer MLP sharded column-wise then row-wise."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=8)
    try:
        mesh = init_device_mesh("cpu", (8,), mesh_dim_names=("tp",))
        model = nn.Sequential(nn.Linear(16, 32, bias=False), nn.ReLU(), nn.Linear(32, 16, bias=False))
        parallelize_module(model, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
        yield model, torch.ones(4, 16)
        # every collective the test issued was waited for: none is left for c10d to warn about at exit
        assert torch._C._distributed_c10d._get_work_registry_size() == 0
    finally:
        dist.destroy_process_group()


def _capture(model, x):
    with torch.no_grad(), dt.capture(model) as g:
        out = model(x)
    _waited(out)
    g.lint()
    return g


def _waited(out):
    """Wait for the row-wise layer's all-reduce once the capture is done (it would be unwaited at exit, and
    c10d warns about each unwaited collective when the process ends)."""
    return torch.ops._c10d_functional.wait_tensor(out)


def test_local_ops_point_to_their_dtensor_op(tp_mlp):
    g = _capture(*tp_mlp)
    mm = g.op("mm")
    assert isinstance(mm.dtensor, DTensorOp)
    assert str(mm.dtensor) == "aten.mm.default(f32[4, 16] R, f32[16, 32] S(1)) -> f32[4, 32] S(1) on mesh tp=8"
    assert mm.dtensor.ranks == tuple(range(8)) and mm.outputs[0].shape == (4, 4)  # the local shard
    second = g.op("mm_1").dtensor
    assert second.outputs == ("f32[4, 16] P(sum)",)  # row-wise: partial sums, then the all-reduce
    assert [d.index for d in dict.fromkeys(op.dtensor for op in g.ops if op.dtensor)] == list(range(4))  # t, mm, t, mm
    (c,) = g.collectives()
    assert c.op.dtensor is None and c.kind == "all_reduce" and c.group.ranks == tuple(range(8))


def test_sharding_propagation_on_fake_tensors_is_not_recorded(tp_mlp):
    g = _capture(*tp_mlp)
    assert all(r.device == "cpu" for op in g.ops for r in op.outputs)
    assert not g.find_ops("aten.empty_strided*")
    model, x = tp_mlp
    with torch.no_grad(), dt.capture(model) as again:  # sharding decisions cached now: the same ops
        out = model(x)
    _waited(out)
    assert [op.target for op in again.ops] == [op.target for op in g.ops]


def test_data_edges_run_through_dtensor_ops_and_parameters_are_named(tp_mlp):
    g = _capture(*tp_mlp)
    assert g.op("t").inputs[0].name == "0.weight" and g.op("t").inputs[0].kind == "parameter"
    assert g.op("t").inputs[0].shape == (4, 16)  # rank 0's shard of a [32, 16] weight
    all_reduce = g.collectives()[0].op
    chain, op = [], all_reduce
    while op.producers:
        op = op.producers[0]
        chain.append(op.name)
    assert chain[:3] == ["mm_1", "view_1", "relu"]


def test_flops_are_this_ranks_local_ops(tp_mlp):
    model, x = tp_mlp
    g = _capture(model, x)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        out = model(x)
    _waited(out)
    # FlopCounterMode sees the DTensor-level ops (global shapes: all 8 ranks' work); the capture what rank 0 ran
    assert g.costs().total.flops * 8 == counter.get_total_flops() == 2 * 4 * 16 * 32 * 2


def test_dtensor_records_save_and_load(tp_mlp):
    g = _capture(*tp_mlp)
    g2 = loads(dumps(g))
    assert [str(op.dtensor) for op in g2.ops] == [str(op.dtensor) for op in g.ops]
    assert g2.op("mm").dtensor == g.op("mm").dtensor and isinstance(g2.op("mm").dtensor, DTensorOp)


def test_lint_checks_local_ops_are_consecutive(tp_mlp):
    g = _capture(*tp_mlp)
    g.ops[-1].dtensor = g.op("mm").dtensor  # a local op of `mm` long after it
    with pytest.raises(dt.LintError, match=r"^dtensor: .*DTensor op 1, whose local ops ended before"):
        g.lint()


def test_one_rank_of_a_64_rank_tensor_parallel_llama_on_meta():
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "llama_tp.py"), "--layers", "2", "--dim", "1024",
                        "--heads", "16", "--kv-heads", "8", "--hidden", "2048", "--vocab", "1000", "--seq", "128"],
                       capture_output=True, text=True, timeout=300, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin"})
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("rank 0 of 64 (tensor parallel 8), 2 layers, hidden 1024")
    assert "4 x all_reduce f32[1, 128, 1024] -> f32[1, 128, 1024] over group" in r.stdout
    assert "[0-7]: 524 kB each, 2.1 MB in all" in r.stdout
    assert "first layer's collectives: layers.0.attn, layers.0.mlp" in r.stdout


def test_nested_captures_record_the_same_local_ops(tp_mlp):
    model, x = tp_mlp
    with torch.no_grad(), dt.capture(model) as outer:
        with dt.capture(model) as inner:
            out = model(x)
    _waited(out)
    outer.lint()
    assert [op.target for op in outer.ops] == [op.target for op in inner.ops]  # no fake or bookkeeping ops
    assert all(op.dtensor is None for op in outer.ops)  # the inner capture ran the DTensor ops


@needs_node_hook
def test_a_training_step_runs_backward_at_both_levels_too(tp_mlp):
    model, x = tp_mlp
    x = x.clone().requires_grad_()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def step():
        model(x).sum().backward()
        opt.step()
        opt.zero_grad()

    with dt.capture(model) as g:
        step()
    g.lint()
    backward = [op for op in g.ops if op.phase == "backward"]
    mms = [op for op in backward if op.target == "aten.mm.default"]
    # the weight and input gradients of both layers, each run as local ops on the shards (no global 32-wide
    # shape), pointing to the DTensor-level mm it ran for and to the forward call it differentiates
    assert len(mms) == 4 and all(op.dtensor is not None and op.dtensor.target == "aten.mm.default" for op in mms)
    assert {op.origin.path for op in mms} == {"0", "2"}
    assert all(32 not in r.shape for op in mms for r in op.inputs) and any(4 in r.shape for op in mms for r in op.inputs)
    assert {op.param for op in backward if op.param} == {"0.weight", "2.weight", "input"}  # x is a leaf too
    # the input's gradient: partial sums of the column shards, all-reduced in backward for layer 0's call
    (c,) = [c for c in g.collectives() if c.op.phase == "backward"]
    assert c.kind == "all_reduce" and c.shapes == "f32[4, 16] -> f32[4, 16]" and c.serves.path == "0"
    with FlopCounterMode(display=False) as counter:
        step()
    assert g.costs().total.flops * 8 == counter.get_total_flops()  # every matmul is tensor parallel
