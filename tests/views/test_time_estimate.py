"""g.estimate(spec): per-op roofline with efficiency curves, SDPA charged as flash, unsure ops said, phases."""

from __future__ import annotations

import json
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from models import needs_node_hook
from torch.utils.checkpoint import checkpoint

import dispatchtrace as dt
from dispatchtrace.graph import itemsize
from dispatchtrace.views._attention import regions
from dispatchtrace.views._kernels import work_class


class Block(nn.Module):
    """A Llama decoder block by hand: RMSNorm, grouped-query attention through SDPA (causal), SwiGLU MLP."""

    def __init__(self, dim: int = 4096, heads: int = 32, kv_heads: int = 8, hidden: int = 14336) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.norm1, self.norm2 = nn.RMSNorm(dim), nn.RMSNorm(dim)
        self.q = nn.Linear(dim, dim, bias=False)
        self.k = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.v = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.o = nn.Linear(dim, dim, bias=False)
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        h = self.norm1(x)
        q = self.q(h).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.k(h).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v(h).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + self.o(y.transpose(1, 2).reshape(b, s, -1))
        return x + self.down(F.silu(self.gate(self.norm2(x))) * self.up(self.norm2(x)))


def _llama_step(seq: int = 4096, layers: int = 2) -> dt.Graph:
    with torch.device("meta"):
        model = nn.Sequential(*[Block() for _ in range(layers)]).to(torch.bfloat16)
    x = torch.zeros(1, seq, 4096, dtype=torch.bfloat16, device="meta")
    with dt.capture(model) as g:
        model(x).float().square().mean().backward()
    return g


@pytest.fixture(scope="module")
def llama() -> dt.Graph:
    return _llama_step()


def _bytes(refs: tuple[dt.TensorRef, ...]) -> int:
    return sum((r.numel or 0) * (itemsize(r.dtype) or 0) for r in refs)


@needs_node_hook  # the backward ops' attribution (which forward op a backward kernel differentiates)
def test_llama_blocks_attention_is_charged_as_flash(llama: dt.Graph) -> None:
    est = llama.estimate("h100")
    spec = est.spec
    found = regions(llama)
    assert len(found) == 2 and all(r.causal and r.dtype == "bfloat16" and r.backward for r in found)
    q = k = None
    for r in found:
        ops = llama.ops[r.start:r.stop]
        assert any(op.target == "aten._safe_softmax.default" for op in ops)
        charged = [op for op in ops if est.time(op)]
        assert len(charged) == 1  # one kernel forward ...
        assert len([i for i in r.backward if est.time(llama.ops[i])]) == 1  # ... and one backward
        # the flash FLOPs: 4·B·H·L²·D halved (causal), from the shapes of q (32 heads) and the grouped k, v
        assert r.flops == 4 * 32 * 4096 * 4096 * 128 // 2
        # bytes: q, k, v, output, logsumexp; never the 32 x 4096 x 4096 score matrix
        q, k = 4096 * 4096 * 2, 4096 * 1024 * 2
        assert r.nbytes == q + 2 * k + q + 32 * 4096 * 4
        assert r.nbytes < 32 * 4096 * 4096 * 2
        t = est.time(charged[0])
        assert t >= r.flops / spec.peak("bfloat16") + spec.launch_overhead
    attention = sum(est.time(llama.ops[i]) for r in found for i in (*range(r.start, r.stop), *r.backward))
    math_path = sum(  # what the decomposition would cost, op by op: the score matrix read and written
        _bytes(op.outputs) for r in found for op in llama.ops[r.start:r.stop] if not op.is_view
    ) / spec.memory_bandwidth
    assert attention < math_path + 2 * sum(r.flops for r in found) * 3.5 / spec.peak("bfloat16")


@needs_node_hook  # the backward ops' attribution (which forward op a backward kernel differentiates)
def test_llama_blocks_no_op_beats_the_roofline(llama: dt.Graph) -> None:
    est = llama.estimate("h100-sxm")
    spec, costs = est.spec, llama.costs()
    matmuls = elementwise = 0
    for op in llama.ops:
        cls = work_class(op.target)
        if op.is_view or est.bound(op) in ("free", "fused"):
            assert est.time(op) == 0
            continue
        if cls == "matmul":
            matmuls += 1
            dtype = op.inputs[0].dtype
            assert dtype == "bfloat16"
            assert est.time(op) >= costs.op(op).flops / spec.peak(dtype)  # never past the dense peak
            assert est.efficiency(op) <= 1
        elif cls == "elementwise":
            elementwise += 1
            assert est.time(op) >= _bytes(op.outputs) / spec.memory_bandwidth  # never past the bandwidth
            assert est.bound(op) in ("memory", "overhead")
    assert matmuls >= 2 * 7 * 3 and elementwise > 20  # forward, grad input, grad weight of seven Linears a block
    assert est.phase("backward") > est.phase("forward") > 0
    assert math.isclose(est.total, sum(est.phases.values()))
    assert math.isclose(est.time(llama.root), est.total)
    top = llama.calls[0]
    assert math.isclose(est.time(top), est.time(top, phase="forward") + est.time(top, phase="backward"))
    assert est.time(llama.calls[1]) < est.time(top)
    text = str(est)
    assert text.splitlines()[0].startswith("Estimated time on NVIDIA H100") and "backward" in text.splitlines()[0]
    assert "Share" in text and "Unsure" not in text and not est.unsure


def test_spec_from_json(tmp_path, llama: dt.Graph) -> None:
    data = dt.DeviceSpec.named("h100").to_dict()
    data["name"], data["memory_bandwidth"] = "my-h100", data["memory_bandwidth"] * 2
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(data))
    mine, stock = llama.estimate(path), llama.estimate("h100")
    assert mine.spec.name == "my-h100" and mine.total < stock.total
    add = next(op for op in llama.ops if op.target == "aten.add.Tensor" and mine.bound(op) != "fused")
    assert mine.bound(add) == "memory" and mine.time(add) < stock.time(add)
    assert llama.estimate(str(path)).total == mine.total == llama.estimate(dt.DeviceSpec.load(path)).total


@torch.library.custom_op("dt_test::mystery", mutates_args=())
def mystery(x: torch.Tensor) -> torch.Tensor:
    return x.clone()


@mystery.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


def test_ops_without_a_formula_are_said_and_never_free() -> None:
    x = torch.ones(256, 256)
    with dt.capture() as g:
        y = torch.ops.dt_test.mystery(x) + 1
    est = g.estimate("a100-80gb")
    op = g.ops[0]
    assert op.target == "dt_test.mystery.default" and work_class(op.target) == "other"
    assert est.unsure == (op,) and est.unsure_calls == (g.root,)
    assert est.time(op) >= 2 * 256 * 256 * 4 / est.spec.memory_bandwidth + est.spec.launch_overhead
    assert est.bound(op) in ("memory", "overhead")
    assert "Unsure: 1 ops have no FLOP formula (dt_test.mystery.default)" in str(est)
    assert y.shape == x.shape


@needs_node_hook  # the backward ops' attribution (which forward op a backward kernel differentiates)
def test_checkpointed_step_counts_recompute() -> None:
    block = nn.Sequential(nn.Linear(512, 2048), nn.GELU(), nn.Linear(2048, 512))
    x = torch.randn(64, 512, requires_grad=True)
    with dt.capture(block) as g:
        checkpoint(block, x, use_reentrant=False).sum().backward()
    est = g.estimate("h100")
    assert est.phase("recompute") > 0 and est.phase("backward") > 0
    # the recompute stops once backward has what it needs (non-reentrant checkpoint): the first Linear and GELU
    recomputed = [op for op in g.ops if op.phase == "recompute" and est.time(op)]
    assert [op.target for op in recomputed] == ["aten.addmm.default", "aten.gelu.default"]
    assert math.isclose(est.phase("recompute"), est.time(g.ops[1]) + est.time(g.ops[2]))
    call = g.calls[0]
    assert math.isclose(est.time(call), sum(est.time(call, phase=p) for p in ("forward", "backward", "recompute")))
    assert est.time(call, phase="recompute") > 0


def test_optimizer_foreach_is_one_launch() -> None:
    model = nn.Sequential(*[nn.Linear(64, 64) for _ in range(8)])
    opt = torch.optim.Adam(model.parameters(), foreach=True)
    with dt.capture(model) as g:
        model(torch.randn(4, 64)).sum().backward()
        opt.step()
    est = g.estimate("h100")
    foreach = [op for op in g.ops if op.phase == "optimizer" and op.target.startswith("aten._foreach_")]
    assert foreach and est.phase("optimizer") > 0
    spec = est.spec
    for op in foreach:
        n = len(op.inputs)
        assert n >= 16  # every parameter (weights and biases) in one op
        assert spec.launch_overhead <= est.time(op) < n * spec.launch_overhead
    assert not est.unsure


def test_sdpa_run_as_one_fused_op_is_attention() -> None:
    q = k = v = torch.randn(1, 4, 64, 32)
    with dt.capture() as g:
        F.scaled_dot_product_attention(q, k, v, is_causal=True)
    est = g.estimate("h100")
    (op,) = [op for op in g.ops if est.time(op)]
    assert work_class(op.target) == "attention" and not regions(g)
    assert est.roofline[op.index] > 0 and est.bound(op) == "overhead"


def test_bad_input() -> None:
    lin = nn.Linear(4, 4)
    with dt.capture(lin) as g:
        lin(torch.ones(2, 4))
    with pytest.raises(dt.SpecError, match="did you mean 'h100-sxm'"):
        g.estimate("h100-sxn")
    with pytest.raises(dt.SpecError):
        g.estimate(3)  # type: ignore[arg-type]
    est = g.estimate("l4")
    with dt.capture(lin) as other:
        lin(torch.ones(2, 4))
    with pytest.raises(ValueError, match="not an op of the capture"):
        est.time(other.ops[0])
    with pytest.raises(ValueError, match="not a call of the capture"):
        est.time(other.calls[0])
    with pytest.raises(ValueError, match="a phase is one of"):
        est.phase("sideways")  # type: ignore[arg-type]
    assert est.measured(g.calls[0]) is None and not est.timed


def test_damaged_spec_file(tmp_path) -> None:
    lin = nn.Linear(4, 4)
    with dt.capture(lin) as g:
        lin(torch.ones(2, 4))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(dt.SpecError) as e:
        g.estimate(bad)
    assert "\n" not in str(e.value)


def test_measured_beside_estimated_and_in_every_view(tmp_path) -> None:
    model = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    x = torch.randn(32, 256)
    with dt.capture(model, timing=True) as g:
        model(x)
    assert "Est. time" not in str(g.summary())
    est = g.estimate("h100")
    assert est.timed
    for call in g.calls:
        assert math.isclose(est.measured(call), call.time)  # forward only: where the ops ran
    op = g.ops[1]
    assert est.measured(op) == op.time and est.efficiency(op, measured=True) == est.roofline[op.index] / op.time
    text = str(est)
    assert "Measured" in text.splitlines()[1] and "Est/Meas" in text
    rows = g.summary().rows()
    assert rows[1]["est_time"] == est.time(g.calls[1]) and rows[1]["bound"] == est.bound(g.ops[1])
    assert math.isclose(rows[1]["est_ratio"], est.time(g.calls[1]) / g.calls[1].time)
    assert "Est. time" in str(g.summary()) and "Bound" in str(g.summary())
    g.render(tmp_path / "g.mx.json")
    assert '"est_time"' in (tmp_path / "g.mx.json").read_text()
    g.render(tmp_path / "g.html")  # the viewer's details and colour modes list the registry's metrics
    assert '"est_time","label":"estimated time"' in (tmp_path / "g.html").read_text()
    dt.views.forget_estimate(g)
    assert "Est. time" not in str(g.summary())


def test_estimate_of_a_loaded_capture_and_no_leak(tmp_path) -> None:
    import gc
    import weakref

    g = _llama_step(seq=256, layers=1)
    est = g.estimate("h200")
    g.save(tmp_path / "step.json")
    loaded = dt.load(tmp_path / "step.json")
    again = loaded.estimate("h200")
    assert math.isclose(again.total, est.total) and len(regions(loaded)) == 1
    ref = weakref.ref(loaded)
    del loaded, again
    gc.collect()
    assert ref() is None  # the views' hold on the last estimate keeps no capture alive


def test_a_gather_reads_the_rows_it_returns() -> None:
    emb = nn.Embedding(50000, 1024)
    with dt.capture(emb) as g:
        emb(torch.zeros(1, 8, dtype=torch.int64))
    est = g.estimate("h100")
    op = g.find_ops("aten.embedding*")[0]
    rows = 8 * 1024 * 4
    assert est.roofline[op.index] == (2 * rows + 8 * 8) / est.spec.memory_bandwidth  # not the 205 MB table


def test_fake_and_empty_captures() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        lin = nn.Linear(1024, 1024)
        x = torch.randn(64, 1024)
        with dt.capture(lin) as g:
            lin(x)
    est = g.estimate("b200")
    assert est.total > 0 and est.bound(g.find_ops("aten.addmm*")[0]) in ("compute", "overhead")
    with dt.capture() as empty:
        pass
    none = empty.estimate("h100")
    assert none.total == 0 and none.phases == {} and "0 s" in str(none).splitlines()[0]


@pytest.mark.parametrize("mask", ["bool", "float", "none"])
def test_math_path_regions_with_masks_and_dropout(mask: str) -> None:
    q, k, v = (torch.randn(2, 4, 64, 32, device="meta", dtype=torch.float16) for _ in range(3))
    attn_mask = {"bool": torch.ones(64, 64, dtype=torch.bool, device="meta"),
                 "float": torch.zeros(2, 1, 64, 64, dtype=torch.float16, device="meta"), "none": None}[mask]
    with dt.capture() as g:
        x = q * 2  # the user's op just before: not the kernel's
        y = F.scaled_dot_product_attention(x, k, v, attn_mask=attn_mask, dropout_p=0.1 if mask == "none" else 0.0)
        z = y + 1
    (r,) = regions(g)
    assert g.ops[r.start - 1].outputs[0].shape == x.shape and g.ops[r.start - 1].target == "aten.mul.Tensor"
    assert g.ops[r.stop].target == "aten.add.Tensor" and g.ops[r.stop].outputs[0].shape == z.shape
    assert not r.causal and r.flops == 4 * 2 * 4 * 64 * 64 * 32 and r.dtype == "float16"
    qkv = 3 * 2 * 4 * 64 * 32 * 2
    extra = {"bool": 64 * 64, "float": 2 * 64 * 64 * 2, "none": 0}[mask]
    assert r.nbytes == qkv + qkv // 3 + extra  # q, k, v, the output, the mask as passed
    est = g.estimate("h100")
    assert [op.index for op in g.ops[r.start:r.stop] if est.time(op)] == [r.start]


def _cpu_like(**changes: object) -> dt.DeviceSpec:
    from dispatchtrace.hardware import Efficiency

    base = dict(name="cpu-like", peak_flops={"float32": 1e11}, memory_bandwidth=5e10, launch_overhead=0.0,
                memory_efficiency={"elementwise": Efficiency.flat(0.5)})
    base.update(changes)
    return dt.DeviceSpec(**base)  # type: ignore[arg-type]


def test_a_large_fresh_output_is_charged_more_per_byte_when_the_spec_says_so() -> None:
    from dispatchtrace.hardware import FreshOutput

    n = 2**24  # 64 MB of float32: past glibc's mmap threshold
    x, y = torch.ones(n, device="meta"), torch.ones(n, device="meta")
    small = torch.ones(2**16, device="meta")
    with dt.capture() as g:
        x + y  # a new 64 MB output
        x.add_(y)  # in place: its output is its input's storage
        small + small  # a new 256 kB output
    new, inplace, little = (op for op in g.ops if op.target.startswith("aten.add"))
    fresh = FreshOutput(points=((2**24, 0.0), (2**26, 1e-9)))
    plain, paged = g.estimate(_cpu_like()), g.estimate(_cpu_like(fresh_output=fresh))
    assert plain.time(new) == pytest.approx(3 * 4 * n / (5e10 * 0.5))  # its bytes alone
    assert paged.time(new) - plain.time(new) == pytest.approx(4 * n * 1e-9)  # + 1 ns for each byte of the new output
    assert paged.time(inplace) == plain.time(inplace) and paged.time(little) == plain.time(little)
    assert paged.time(new) / (4 * n) > paged.time(little) / (4 * 2**16)  # more per byte than a small output


def test_the_shape_axis_charges_a_small_feature_map_and_a_skinny_gemm_their_rows() -> None:
    from dispatchtrace.hardware import Efficiency

    conv = Efficiency(points=((1e6, 0.9),), by_shape=((49, ((1e6, 0.3),)), (3136, ((1e6, 0.9),))))
    matmul = Efficiency(points=((1e6, 0.9),), by_shape=((1, ((1e6, 0.1),)), (256, ((1e6, 0.8),))))
    spec = _cpu_like(compute_efficiency={"convolution": conv, "matmul": matmul},
                     memory_efficiency={"matmul": Efficiency.flat(1.0), "convolution": Efficiency.flat(1.0)})
    late, early = nn.Conv2d(512, 512, 3, padding=1), nn.Conv2d(64, 64, 3, padding=1)
    with torch.device("meta"):
        late, early = late.to("meta"), early.to("meta")
        a, b, v = torch.ones(256, 1024), torch.ones(1024, 1024), torch.ones(1024, 1)
    with dt.capture() as g:
        late(torch.ones(1, 512, 7, 7, device="meta"))  # 231 MFLOP on 49 output positions
        early(torch.ones(1, 64, 56, 56, device="meta"))  # 231 MFLOP on 3136
        a @ b  # 256 rows
        b @ v  # one column
    est = g.estimate(spec)
    convs = g.find_ops("aten.convolution*")
    flops = [g.costs().op(op).flops for op in convs]
    assert flops[0] == flops[1] and est.time(convs[0]) == pytest.approx(flops[0] / (1e11 * 0.3))
    assert est.time(convs[1]) == pytest.approx(flops[1] / (1e11 * 0.9))
    mm, mv = g.find_ops("aten.mm*")
    assert est.time(mm) == pytest.approx(2 * 256 * 1024 * 1024 / (1e11 * 0.8))
    assert est.time(mv) == pytest.approx(2 * 1024 * 1024 / (1e11 * 0.1))  # far below its FLOPs' 0.9


def test_a_kernel_with_its_own_curve_reads_it() -> None:
    from dispatchtrace.hardware import Efficiency

    spec = _cpu_like(kernel_efficiency={"gelu": Efficiency.flat(0.05)})
    x = torch.ones(2**20, device="meta")
    with dt.capture() as g:
        F.gelu(x)
        F.relu(x)
    gelu, relu = g.find_ops("aten.gelu*")[0], g.find_ops("aten.relu*")[0]
    est = g.estimate(spec)
    assert est.time(gelu) == pytest.approx(2 * 4 * 2**20 / (5e10 * 0.05))  # its own curve
    assert est.time(relu) == pytest.approx(2 * 4 * 2**20 / (5e10 * 0.5))  # the class's


@pytest.mark.parametrize("dropout", [0.0, 0.1])
def test_sdpa_with_dropout_on_a_device_that_runs_it_unfused_is_charged_op_by_op(dropout: float) -> None:
    q, k, v = (torch.randn(1, 4, 128, 32, device="meta") for _ in range(3))
    with dt.capture() as g:
        F.scaled_dot_product_attention(q, k, v, dropout_p=dropout, is_causal=True)
    (r,) = regions(g)
    fused = g.estimate(_cpu_like())
    unfused = g.estimate(_cpu_like(attention_dropout_fused=False))
    inside = g.ops[r.start:r.stop]
    assert [op.index for op in inside if fused.time(op)] == [r.start]  # one flash kernel
    assert fused.bound(inside[1]) == "fused" or inside[1].is_view
    if dropout:  # the math path's ops, each by its class: the two bmm, the softmax, the dropout's random numbers
        charged = {op.target for op in inside if unfused.time(op)}
        assert {"aten.bmm.default", "aten._safe_softmax.default"} <= charged and "attention" not in unfused.classes
        assert unfused.time(g.root) > fused.time(g.root)  # the score matrices written and read, not only q, k, v
    else:  # no dropout: the device runs its fused kernel either way
        assert [unfused.time(op) for op in inside] == [fused.time(op) for op in inside]
