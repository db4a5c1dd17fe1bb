"""Captures on a CUDA device (marked ``cuda``; skipped where torch sees no GPU). ``scripts/gpu-check.sh``
runs them with the overhead benchmark on one GPU and writes a short report.

What they pin down: a capture on CUDA is the CPU capture (calls, ops, edges) up to the kernels the
device picks; which SDPA backend ran is visible per call, with FLOPs equal to ``FlopCounterMode``'s;
an autocast fp16 training step with ``GradScaler`` keeps its phases; the cuDNN LSTM is one op;
pinned-memory ``non_blocking`` copies and a side stream (``record_stream``) keep their edges; a CUDA
graph capture inside the block is refused or noted clearly, never a crash; ``g.saved`` matches what
the caching allocator holds for backward.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from models import needs_node_hook
from vision import torchvision

import dispatchtrace as dt
from dispatchtrace._torch import CUDA_GRAPH

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (scripts/gpu-check.sh runs these)"),
]

# kernels a CUDA build picks for one CPU op: compared as the CPU's name (the calls and edges stay equal)
_SAME = {
    "aten.cudnn_batch_norm.default": "aten._native_batch_norm_legit_no_training.default",
    "aten.cudnn_convolution.default": "aten.convolution.default",
}


def _shape_of(g: dt.Graph) -> tuple[list[str], list[str], list[list[int]]]:
    """Calls (path and index), op targets and each op's producers as indices: what two captures share."""
    index = {id(op): i for i, op in enumerate(g.ops)}
    calls = [f"{c.path}#{c.index}" for c in g.calls]
    targets = [_SAME.get(op.target, op.target) for op in g.ops]
    edges = [sorted(index[id(p)] for p in op.producers) for op in g.ops]
    return calls, targets, edges


def _capture_on(model: nn.Module, x: torch.Tensor, device: str) -> dt.Graph:
    model, x = model.to(device), x.to(device)
    with torch.no_grad(), dt.capture(model) as g:
        model(x)
    g.lint()
    return g


def _equal_on_both(model: nn.Module, x: torch.Tensor) -> None:
    cpu = _shape_of(_capture_on(model, x, "cpu"))
    cuda = _shape_of(_capture_on(model, x, "cuda"))
    assert cuda[0] == cpu[0], "the module calls differ"
    diff = [(i, a, b) for i, (a, b) in enumerate(zip(cpu[1], cuda[1], strict=False)) if a != b]
    assert len(cuda[1]) == len(cpu[1]) and not diff, f"ops differ (index, cpu, cuda): {diff[:8]}"
    assert cuda[2] == cpu[2], "the edges differ"


def test_resnet50_on_cuda_has_the_cpu_captures_calls_ops_and_edges() -> None:
    torch.manual_seed(0)
    _equal_on_both(torchvision.models.resnet50(weights=None).eval(), torch.randn(2, 3, 224, 224))


def test_a_transformer_on_cuda_has_the_cpu_captures_calls_ops_and_edges() -> None:
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True)
    model = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()
    fast = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)  # the encoder's ATen ops on both devices, not one fused op
    try:
        _equal_on_both(model, torch.randn(2, 10, 64))
    finally:
        torch.backends.mha.set_fastpath_enabled(fast)


class Attention(nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


_BACKENDS = {  # SDPBackend name -> the op its kernel is recorded as
    "FLASH_ATTENTION": "aten._scaled_dot_product_flash_attention.default",
    "EFFICIENT_ATTENTION": "aten._scaled_dot_product_efficient_attention.default",
    "CUDNN_ATTENTION": "aten._scaled_dot_product_cudnn_attention.default",
    "MATH": None,  # decomposed: bmm/matmul and softmax ops inside the call, no fused kernel
}


@pytest.mark.parametrize("backend", list(_BACKENDS))
def test_the_sdpa_backend_that_ran_is_visible_per_call_with_flopcountermodes_flops(backend: str) -> None:
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    attn = Attention()
    q, k, v = (torch.randn(2, 4, 128, 64, device="cuda", dtype=torch.float16) for _ in range(3))
    try:
        with sdpa_kernel(getattr(SDPBackend, backend)):
            attn(q, k, v)
    except RuntimeError as error:  # this GPU, or this build, has no such kernel
        pytest.skip(f"{backend} does not run here: {str(error).splitlines()[0]}")
    with sdpa_kernel(getattr(SDPBackend, backend)), dt.capture(attn) as g:
        attn(q, k, v)
    with sdpa_kernel(getattr(SDPBackend, backend)), FlopCounterMode(display=False) as counter:
        attn(q, k, v)
    g.lint()
    targets = {op.target for op in g.calls[0].ops}
    fused = {t for t in _BACKENDS.values() if t is not None}
    want = _BACKENDS[backend]
    if want is None:
        assert not targets & fused, f"the math backend ran a fused kernel: {targets & fused}"
    else:
        assert want in targets, f"{backend}: recorded {sorted(targets)}"
    assert g.costs().call(g.calls[0]).flops == counter.get_total_flops()


def test_an_autocast_fp16_training_step_with_gradscaler_keeps_its_phases() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 8)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cuda")
    x, y = torch.randn(16, 32, device="cuda"), torch.randint(0, 8, (16,), device="cuda")
    with dt.capture(model) as g:
        with torch.autocast("cuda", dtype=torch.float16):
            loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    g.lint()
    assert {"forward", "backward", "optimizer"} <= {op.phase for op in g.ops}
    linear = [op for op in g.ops if op.phase == "forward" and op.target == "aten.addmm.default"]
    assert linear and all(op.outputs[0].dtype == "float16" for op in linear)
    assert any("non_finite_check_and_unscale" in op.target for op in g.ops), "the scaler's unscale is an op"
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())


def test_the_cudnn_lstm_is_one_op_in_its_call() -> None:
    torch.manual_seed(0)
    lstm = nn.LSTM(32, 64, num_layers=2).cuda()
    with torch.no_grad(), dt.capture(lstm) as g:
        lstm(torch.randn(10, 4, 32, device="cuda"))
    g.lint()
    rnn = [op for op in g.ops if op.target.startswith("aten._cudnn_rnn")]
    assert len(rnn) == 1 and rnn[0].call is g.calls[0], [op.target for op in g.ops]


def test_pinned_non_blocking_copies_and_a_side_stream_keep_their_edges() -> None:
    host = torch.randn(256, 256).pin_memory()
    side = torch.cuda.Stream()
    with dt.capture() as g:
        dev = host.to("cuda", non_blocking=True)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            doubled = dev * 2
            dev.record_stream(side)
        torch.cuda.current_stream().wait_stream(side)
        out = (doubled + 1).sum()
        back = out.to("cpu", non_blocking=True)
    torch.cuda.synchronize()
    g.lint()
    assert back.item() == pytest.approx(float((host * 2 + 1).sum()), rel=1e-4)
    by = {op.target: op for op in g.ops}
    copy = next(op for op in g.ops if op.target in ("aten._to_copy.default", "aten.copy_.default"))
    mul, add = by["aten.mul.Tensor"], by["aten.add.Tensor"]
    assert copy in mul.producers and mul in add.producers
    assert g.inputs and g.inputs[0].device == "cpu" and copy.outputs[0].device.startswith("cuda")


def test_a_cuda_graph_capture_inside_the_block_is_refused_or_noted_never_a_crash() -> None:
    model = nn.Linear(16, 16).cuda()
    static = torch.randn(4, 16, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm up outside the graph, as torch.cuda.graphs asks
        model(static)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    try:
        with dt.capture(model) as g, torch.cuda.graph(graph):
            model(static)
    except RuntimeError as error:  # refused: the message must say what happened and what to do
        text = str(error)
        assert "CUDA graph" in text or "capturing" in text, f"not a clear refusal: {text}"
        return
    graph.replay()
    torch.cuda.synchronize()
    assert CUDA_GRAPH in g.notes, g.notes


@needs_node_hook
def test_saved_activations_match_what_the_caching_allocator_holds_for_backward() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1),
                          nn.Sigmoid(), nn.Flatten(), nn.Linear(16 * 32 * 32, 10)).cuda()
    x = torch.randn(8, 3, 32, 32, device="cuda")
    model(x).sum().backward()  # warm-up: cuDNN and cuBLAS workspaces are taken now, not in the measured block
    model.zero_grad(set_to_none=False)
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    with dt.capture(model) as g:
        out = model(x)
    torch.cuda.synchronize()
    held = torch.cuda.memory_allocated() - before  # what the forward left: saved activations and the output
    peak = torch.cuda.max_memory_allocated() - before
    memory = g.memory()
    retained = memory.call(g.root).retained  # activations live past the block: saved ones and the output
    assert g.saved and memory.call(g.calls[0]).saved > 0 and out is not None
    slack = 512 * (len(g.saved) + 2)  # the caching allocator rounds every block up to 512 bytes
    assert abs(held - retained) <= slack, (held, retained, slack)
    assert peak + slack >= memory.peak - memory.baseline >= held - slack, (peak, memory.peak, memory.baseline, held)


def test_values_stats_on_cuda_equal_the_cpu_captures_and_find_the_first_nan() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 64))
    x = torch.randn(32, 64)
    with torch.no_grad(), dt.capture(model, values="stats") as cpu:
        model(x)
    model.cuda()
    with torch.no_grad(), dt.capture(model, values="stats", stats=("zeros",)) as gpu:
        out = model(x.cuda())
    gpu.lint()
    assert gpu.values == "stats" and [op.target for op in gpu.ops] == [op.target for op in cpu.ops]
    for a, b in zip(cpu.ops, gpu.ops, strict=True):
        for ra, rb in zip(a.outputs, b.outputs, strict=True):
            sa, sb = cpu.stats.get(ra.id), gpu.stats.get(rb.id)
            assert (sa is None) == (sb is None), a.target
            if sa is None:
                continue
            assert (sb.numel, sb.nan, sb.posinf, sb.neginf) == (sa.numel, sa.nan, sa.posinf, sa.neginf), a.target
            assert sb.min == pytest.approx(sa.min, rel=1e-4, abs=1e-5) and sb.max == pytest.approx(sa.max, rel=1e-4, abs=1e-5)
            assert sb.mean == pytest.approx(sa.mean, rel=1e-3, abs=1e-5) and sb.norm == pytest.approx(sa.norm, rel=1e-4)
    last = gpu.stats[gpu.ops[-1].outputs[0].id]
    assert last.max == pytest.approx(float(out.max())) and last.norm == pytest.approx(float(out.double().norm()), rel=1e-5)
    relu = next(op for op in gpu.ops if op.target.startswith("aten.relu"))
    assert gpu.stats[relu.outputs[0].id].zeros == int((model[1](model[0](x.cuda())) == 0).sum())
    with torch.no_grad():
        model[2].weight[3, 5] = float("nan")
    with torch.no_grad(), dt.capture(model, values="stats") as bad:
        model(x.cuda())
    found = bad.first_nonfinite()
    assert found is not None and found.carried and found.op.call.path == "2", found  # read from the NaN weight (a leaf)




def test_values_stats_on_cuda_never_synchronise_per_op() -> None:
    """``values="stats"`` keeps each op's stats in rows on the device and reads them once when the block ends:
    inside the block ``torch.cuda.set_sync_debug_mode("error")`` raises on any synchronisation, and none comes."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(inplace=True), nn.Flatten(),
                          nn.Linear(8 * 14 * 14, 10)).cuda().train()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9, foreach=True)  # (Adam's step reads .item())
    x = torch.randn(4, 3, 16, 16, device="cuda")
    model(x).sum().backward()  # warm-up: cuDNN, the optimizer's state, the allocator
    opt.step()
    opt.zero_grad()
    torch.cuda.synchronize()
    with dt.capture(model, values="stats", stats=("zeros", "fingerprint")) as g:
        torch.cuda.set_sync_debug_mode("error")
        try:
            model(x).sum().backward()
            opt.step()
            inside = len(g.stats)
        finally:
            torch.cuda.set_sync_debug_mode(0)
    assert inside == 0 and len(g.stats) > len(g.ops)  # read at the end, every value an op read or made
    read = [r for op in g.ops for r in op.inputs if not op.target.startswith("aten.empty")]
    assert all(r.id in g.stats for r in read if r.device.startswith("cuda"))
    w = model[4].weight.detach()
    last = g.stats[next(r.id for op in reversed(g.ops) for r in op.mutated if r.name == "4.weight")]
    assert last.max == pytest.approx(float(w.max())) and last.fingerprint is not None
    assert last.norm == pytest.approx(float(w.double().norm()), rel=1e-6)
