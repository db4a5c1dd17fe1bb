"""Real multi-process runs (gloo on 127.0.0.1, 2 and 4 ranks): every rank captures and saves its graph;
the ranks' collectives match, FLOPs per rank equal FlopCounterMode's, the mismatch finder names the
collective where a rank-dependent forward diverges. Each run is a subprocess under a hard timeout."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import dispatchtrace as dt
from dispatchtrace.views import mismatch

pytestmark = [pytest.mark.slow, pytest.mark.distributed]
WORKER = Path(__file__).parents[1] / "dist_worker.py"
TIMEOUT = 240


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(case: str, world: int, out: Path) -> dict[int, dt.Graph]:
    """Runs ``case`` on ``world`` ranks; a hang past TIMEOUT kills the whole process group and fails."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2]), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, str(WORKER), case, str(world), str(_free_port()), str(out)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"{case} on {world} ranks hung for {TIMEOUT} s")
    assert proc.returncode == 0, output[-4000:]
    ranks = dt.load_ranks(str(out / "trace.rank*.json"))
    assert sorted(ranks) == list(range(world))
    return ranks


def _flops(out: Path, rank: int) -> int:
    return int((out / f"flops.rank{rank}.txt").read_text())


def _signature(g: dt.Graph) -> list[tuple[object, ...]]:
    return [(c.kind, c.reduce, c.group.ranks if c.group else None, c.shapes) for c in g.collectives()
            if c.kind not in ("send", "recv")]


@pytest.mark.parametrize("world", [2, 4])
def test_functional_collectives_match_across_ranks(tmp_path, world):
    ranks = run_ranks("functional", world, tmp_path)
    sigs = {r: _signature(g) for r, g in ranks.items()}
    assert [s[0] for s in sigs[0]] == ["all_reduce", "all_gather", "reduce_scatter", "all_to_all"]
    assert all(s == sigs[0] for s in sigs.values())
    for rank, g in ranks.items():
        c = g.collectives()
        assert all(x.group.ranks == tuple(range(world)) and x.group.rank == rank for x in c)
        assert c[1].received == 4 * 8 * world and c[3].wait is g.op("wait_tensor")
    assert mismatch(ranks) is None


def test_c10d_collectives_and_point_to_point(tmp_path):
    ranks = run_ranks("c10d", 2, tmp_path)
    assert _signature(ranks[0]) == _signature(ranks[1])
    kinds = {r: [c.kind for c in g.collectives()] for r, g in ranks.items()}
    assert kinds == {0: ["all_reduce", "all_gather", "broadcast", "send"],
                     1: ["all_reduce", "all_gather", "broadcast", "recv"]}
    b0, b1 = ranks[0].collectives()[2], ranks[1].collectives()[2]
    assert (b0.sent, b0.received, b1.sent, b1.received) == (32, 0, 0, 32)
    assert mismatch(ranks) is None


@pytest.mark.parametrize("world", [2, 4])
def test_tensor_parallel_forward(tmp_path, world):
    ranks = run_ranks("tp", world, tmp_path)
    for rank, g in ranks.items():
        g.lint()
        # FlopCounterMode counts the DTensor-level matmuls at global shapes, the capture this rank's shards
        assert g.costs().total.flops * world == _flops(tmp_path, rank)
        assert {op.dtensor.target for op in g.ops if op.dtensor} >= {"aten.addmm.default"}
        (c,) = g.collectives()  # RowwiseParallel's all-reduce of the partial sums, run by its forward hook on
        # `down`: user hooks run after the call closed, so it belongs to the caller (docs/semantics.md)
        assert c.kind == "all_reduce" and c.op.call.path == "" and c.shapes == "f32[2, 8] -> f32[2, 8]"
        assert c.op.producers[0].call.path == "down"  # the partial sums of the row-wise layer
    assert mismatch(ranks) is None


def test_fsdp2_forward_all_gathers_serve_their_module_call(tmp_path):
    ranks = run_ranks("fsdp", 2, tmp_path)
    for rank, g in ranks.items():
        g.lint()
        found = g.collectives()
        assert [(c.kind, c.op.call.path, c.region) for c in found] == [
            ("all_gather", "a", "FSDP::all_gather (a)"), ("all_gather", "b", "FSDP::all_gather (b)")]
        # this rank's shards of the block's 4 parameters (16*8 + 16 + 8*16 + 8 = 280 floats) in, all of them out
        assert all(c.shapes == "f32[140] -> f32[280]" and c.group.ranks == (0, 1) for c in found)
        weight = g.op("t").inputs[0]
        assert (weight.name, weight.kind, weight.shape) == ("a.up.weight", "parameter", (16, 8))  # unsharded
        assert g.costs().total.flops == _flops(tmp_path, rank)
    assert mismatch(ranks) is None


def test_ddp_forward_broadcasts_buffers_from_rank_0(tmp_path):
    ranks = run_ranks("ddp", 2, tmp_path)
    for rank, g in ranks.items():
        g.lint()
        found = g.collectives()
        # BatchNorm's running_mean and running_var coalesced (f32[16]), then num_batches_tracked
        assert [(c.kind, c.peer, c.shapes, c.op.call.path) for c in found] == [
            ("broadcast", 0, "f32[16] -> f32[16]", ""), ("broadcast", 0, "i64[1] -> i64[1]", "")]
        assert [(c.sent, c.received) for c in found] == ([(64, 0), (8, 0)] if rank == 0 else [(0, 64), (0, 8)])
        assert all(c.region == "DistributedDataParallel.forward" for c in found)
        assert g.costs().total.flops == _flops(tmp_path, rank)
    assert mismatch(ranks) is None


def test_mismatch_on_a_rank_dependent_reduce_op(tmp_path):
    ranks = run_ranks("mismatch", 2, tmp_path)
    found = mismatch(ranks)
    assert found is not None and found.position == 1 and found.what == "reduce op differs (sum vs max)"
    text = str(found)
    assert "rank 0: %allreduce__1 all_reduce sum f32[2, 8] -> f32[2, 8] in Branchy  " in text
    assert "dist_worker.py" in text and "dist.all_reduce(x, op=" in text
    assert [s.rank for s in found.sides] == [0, 1]
    r = subprocess.run([sys.executable, "-m", "dispatchtrace", "mismatch", str(tmp_path / "trace.rank*.json")],
                       capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert r.returncode == 1 and r.stdout.strip() == text


def test_mismatch_on_a_skipped_collective_four_ranks(tmp_path):
    ranks = run_ranks("skips", 4, tmp_path)  # each rank alone on the fake backend: nothing can hang
    found = mismatch(ranks)
    assert found is not None and found.position == 1
    assert found.what == "kind differs (all_reduce vs all_gather)"
    sides = {s.rank: s.collective for s in found.sides}
    assert sides[1] is not None and sides[1].kind == "all_gather" and sides[0].op.call.path == ""
    text = str(found)
    assert "rank 1: %all_gather_into_tensor all_gather f32[2, 8] -> f32[8, 8] in Skips  " in text
    line = next(i for i, t in enumerate(WORKER.read_text().splitlines(), 1) if "return fc.all_gather_tensor(x, 0" in t)
    assert f"dist_worker.py:{line} return fc.all_gather_tensor(x, 0, dist.group.WORLD)" in text
    assert text.count("dist.all_reduce(x)") == 3  # ranks 0, 2, 3 wait in their second all-reduce


# ---- training steps: the collectives of backward, attributed ------------------------------------


def _phases(g: dt.Graph) -> set[str]:
    return {op.phase for op in g.ops}


def test_ddp_step_bucket_all_reduces_name_their_parameters(tmp_path):
    ranks = run_ranks("ddp_step", 2, tmp_path)
    for rank, g in ranks.items():
        g.lint()
        assert _phases(g) == {"forward", "backward", "optimizer"}
        reduces = [c for c in g.collectives() if c.kind == "all_reduce"]
        assert [c.op.phase for c in reduces] == ["backward", "backward"]  # two buckets of at most 600 B
        buckets = json.loads((tmp_path / f"buckets.rank{rank}.json").read_text())  # the reducer's own
        assert [sorted(c.params) for c in reduces] == [sorted(b) for b in buckets]
        assert sum(len(c.params) for c in reduces) == 6 and "module.norm.weight" in reduces[0].params
        assert all(c.received == 4 * sum(_numel(g, p) for p in c.params) for c in reduces)  # f32 gradients
        assert g.costs().total.flops == _flops(tmp_path, rank)
    assert mismatch(ranks) is None


def test_diff_of_two_ddp_ranks_with_different_inputs_names_the_first_op_where_they_part(tmp_path):
    ranks = run_ranks("ddp_step:stats", 2, tmp_path)  # each rank's batch is its own (_training: + rank)
    d = dt.diff(ranks[0], ranks[1])
    assert d.structural == () and d.first is not None and d.first.a.phase == "forward"
    # first: the BatchNorm buffer the warm-up step updated from each rank's own batch, read by DDP's
    # broadcast of the buffers from rank 0; then, inside the model, the first layer that reads the batch
    assert d.first.a.call.label == "DistributedDataParallel" and d.first.a.inputs[0].name == "module.norm.running_mean"
    inside = [p for cd in d.calls if cd.a.path.startswith("module.") for p in cd.ops if p.departs]
    first_inside = min(inside, key=lambda p: p.a.index)
    assert first_inside.a.call.label == "module.block.up" and first_inside.a.phase == "forward"
    assert any(r.kind == "input" for r in first_inside.a.inputs)
    updates = [p for cd in d.calls for p in cd.ops if p.a.phase == "optimizer"]
    assert updates and not any(p.departs for p in updates)  # the gradients were all-reduced: the same step
    r = subprocess.run([sys.executable, "-m", "dispatchtrace", "diff", str(tmp_path / "trace.rank0.json"),
                        str(tmp_path / "trace.rank1.json")], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert r.returncode == 1 and "in DistributedDataParallel" in r.stdout
    assert "it reads module.norm.running_mean (buffer), which differs already" in r.stdout


def _numel(g: dt.Graph, name: str) -> int:
    ref = next(r for op in g.ops for r in op.inputs if r.name == name)
    return ref.numel


def test_fsdp2_step_all_gathers_and_reduce_scatters_serve_their_module(tmp_path):
    ranks = run_ranks("fsdp_step", 2, tmp_path)
    for rank, g in ranks.items():
        g.lint()
        found = [(c.kind, c.op.phase, c.serves.path, c.region) for c in g.collectives()]
        assert found == [  # forward all-gathers a then b; backward re-gathers b, prefetches a, reduces b then a
            ("all_gather", "forward", "a", "FSDP::all_gather (a)"), ("all_gather", "forward", "b", "FSDP::all_gather (b)"),
            ("all_gather", "backward", "b", "FSDP::all_gather (b)"), ("all_gather", "backward", "a", "FSDP::all_gather (a)"),
            ("reduce_scatter", "backward", "b", "FSDP::post_backward_reduce (b)"),
            ("reduce_scatter", "backward", "a", "FSDP::post_backward_reduce (a)")]
        scatters = [c for c in g.collectives() if c.kind == "reduce_scatter"]
        assert all(c.shapes == "f32[280] -> f32[140]" and c.reduce == "avg" for c in scatters)
        assert [sorted(c.params) for c in scatters] == [
            [f"{m}.{p}" for p in ("down.bias", "down.weight", "up.bias", "up.weight")] for m in ("b", "a")]
        # the parameters' unsharded shapes in forward, their sharded ones (dim 0 halved) where SGD updates them
        shapes = {(r.name, op.phase, r.shape) for op in g.ops for r in op.inputs if r.kind == "parameter"}
        assert {("a.up.weight", "forward", (16, 8)), ("a.up.weight", "optimizer", (8, 8)),
                ("a.down.weight", "optimizer", (4, 16))} <= shapes
        assert g.costs().total.flops == _flops(tmp_path, rank)
    assert mismatch(ranks) is None


def test_tensor_parallel_step_backward_at_both_levels(tmp_path):
    ranks = run_ranks("tp_step", 2, tmp_path)
    for rank, g in ranks.items():
        g.lint()
        mms = [op for op in g.ops if op.phase == "backward" and op.target == "aten.mm.default"]
        # backward's DTensor ops run as local ops on the shards, each attributed to its forward call
        assert mms and all(op.dtensor is not None and op.origin.path in ("up", "down") for op in mms)
        assert all(r.shape != (16, 8) and r.shape != (8, 16) for op in mms for r in op.inputs)  # no global shapes
        (fwd, bwd) = g.collectives()
        assert (fwd.op.phase, bwd.op.phase) == ("forward", "backward")
        # the batch's gradient: up's column shards each give a partial sum, all-reduced in backward by the
        # redistribution of DTensor.from_local's backward (no DTensor-level op: it runs on the local gradient)
        assert bwd.kind == "all_reduce" and bwd.shapes == "f32[4, 8] -> f32[4, 8]" and bwd.serves.path == "up"
        assert bwd.wait is not None and bwd.params == ()
        # FlopCounterMode counts backward's DTensor-level matmuls at global shapes too: world x this rank's
        assert g.costs().total.flops * 2 == _flops(tmp_path, rank)
    assert mismatch(ranks) is None
