"""Bad input and faults: errors, nesting, odd inputs and outputs, threads, memory, devices."""

from __future__ import annotations

import dataclasses
import gc
import threading
import weakref
from collections import namedtuple

import pytest
import torch
import torch.nn as nn
from models import CountOps, needs_node_hook
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.nn.modules import module as nn_module

import dispatchtrace as dt


def _registries() -> tuple[dict, dict, dict]:
    return (
        dict(nn_module._global_forward_pre_hooks),
        dict(nn_module._global_forward_hooks),
        dict(nn_module._global_forward_hooks_always_called),
    )


class Boom(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)

    def forward(self, x):
        x = self.a(x)
        if x.shape[0] > 0:
            raise ValueError("boom at b")
        return self.b(x)


def test_a_forward_that_raises_leaves_a_partial_capture_and_no_hooks() -> None:
    model = Boom()
    before = _registries()
    x = torch.ones(2, 4)
    with pytest.raises(ValueError, match="boom at b") as info:
        with dt.capture(model) as g:
            model(x)
    err = info.value
    assert _registries() == before
    assert torch._C._len_torch_dispatch_stack() == 0
    assert g.error is err and g.complete
    assert [c.path for c in g.calls] == ["", "a"]
    assert [op.target for op in g.ops] == ["aten.t.default", "aten.addmm.default"]
    assert "boom" not in str(g) and "aten.addmm.default" in str(g)
    # the next capture works
    with dt.capture(model.a) as g2:
        model.a(torch.ones(2, 4))
    assert g2.error is None and len(g2.calls) == 1


def test_keyboard_interrupt_closes_open_calls() -> None:
    class Stop(nn.Module):
        def forward(self, x):
            raise KeyboardInterrupt

    model = nn.Sequential(nn.ReLU(), Stop())
    before = _registries()
    with pytest.raises(KeyboardInterrupt):
        with dt.capture(model) as g:
            model(torch.ones(2))
    assert _registries() == before
    assert isinstance(g.error, KeyboardInterrupt)
    assert [c.path for c in g.calls] == ["", "0", "1"]


def test_nested_captures_both_record() -> None:
    model = nn.Sequential(nn.Linear(3, 3), nn.ReLU())
    with dt.capture(model) as outer:
        model[0](torch.ones(1, 3))
        with dt.capture(model) as inner:
            model(torch.ones(1, 3))
    assert [c.path for c in inner.calls] == ["", "0", "1"]
    assert [c.path for c in outer.calls] == ["0", "", "0", "1"]
    assert [op.target for op in outer.ops][-len(inner.ops):] == [op.target for op in inner.ops]


def test_a_capture_object_can_be_reused_but_not_reentered() -> None:
    model = nn.Linear(2, 2)
    cap = dt.capture(model)
    x = torch.ones(1, 2)
    with cap as g1:
        model(x)
    with cap as g2:
        model(x)
    assert str(g1) == str(g2) and g1 is not g2
    with cap:
        with pytest.raises(RuntimeError, match="already recording"):
            cap.__enter__()


def test_a_plain_function_names_modules_like_module_tracker() -> None:
    lin = nn.Linear(2, 2)

    def fn(x):
        return lin(x).relu() * 2

    with dt.capture(fn) as g:
        fn(torch.ones(1, 2))
    assert [(c.path, c.type) for c in g.calls] == [("Linear", "Linear")]
    assert g.ops[-1].call is g.root
    params = {r.name for op in g.ops for r in op.inputs if r.kind == "parameter"}
    assert params == {"Linear.weight", "Linear.bias"}


Pair = namedtuple("Pair", "left right")


@dataclasses.dataclass
class Box:
    t: torch.Tensor
    note: str


class Structured(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 2)

    def forward(self, d, pair, box, flag=None, scale=2):
        a = self.lin(d["x"]) * scale
        b = pair.left + pair.right[0]
        idx = (d["ids"] > 0) & d["mask"]
        return {"a": a, "rest": [b, None, box.t.sum()], "idx": idx, "n": 3}


def test_nested_structures_ints_bools_and_none() -> None:
    model = Structured()
    d = {"x": torch.ones(1, 2), "ids": torch.tensor([1, 0]), "mask": torch.tensor([True, True])}
    pair = Pair(torch.ones(2), [torch.zeros(2)])
    box = Box(torch.ones(3), "hi")
    with dt.capture(model) as g:
        out = model(d, pair, box, None, scale=3)
    names = [r.name for r in g.inputs]
    assert names == ["d['x']", "d['ids']", "d['mask']", "pair.left", "pair.right[0]", "box.t"]
    assert {r.dtype for r in g.inputs} == {"float32", "int64", "bool"}
    top = g.calls[0]
    assert len(top.outputs) == 4  # a, b, sum, idx: None and 3 are not tensors
    assert [r.dtype for r in top.outputs] == ["float32", "float32", "float32", "bool"]
    assert out["n"] == 3
    mul = next(op for op in g.ops if op.target == "aten.mul.Tensor")
    assert mul.args[1] == 3


def test_user_hooks_that_replace_outputs_and_inputs() -> None:
    lin = nn.Linear(2, 2)
    model = nn.Sequential(lin, nn.ReLU())
    h1 = lin.register_forward_pre_hook(lambda m, args: (args[0] * 10,))
    h2 = lin.register_forward_hook(lambda m, args, out: out + 1)
    try:
        with dt.capture(model) as g:
            model(torch.ones(1, 2))
    finally:
        h1.remove()
        h2.remove()
    lin_call = g.calls[1]
    assert [op.target for op in lin_call.ops] == ["aten.mul.Tensor", "aten.t.default", "aten.addmm.default"]
    add = next(op for op in g.ops if op.target == "aten.add.Tensor")
    assert add.call is g.calls[0]  # runs after the Linear call closed
    relu = g.calls[2].ops[0]
    assert relu.producers == (add,)


def test_keyword_arguments_become_call_inputs() -> None:
    class Inner(nn.Module):
        def forward(self, x, *, bias):
            return x + bias

    class Outer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = Inner()

        def forward(self, x):
            b = x * 2
            return self.inner(x, bias=b)

    model = Outer()
    x = torch.ones(2)
    with dt.capture(model) as g:
        model(x)
    inner = g.calls[1]
    mul = g.ops[0]
    assert [r.producer for r in inner.inputs] == [None, mul]


def test_other_threads_do_not_leak_into_the_capture() -> None:
    other = nn.Sequential(nn.Linear(2, 2), nn.Tanh())
    started, stop = threading.Event(), threading.Event()
    seen: list[int] = []

    def worker() -> None:
        started.set()
        while not stop.is_set():
            other(torch.ones(1, 2))
            seen.append(1)

    t = threading.Thread(target=worker)
    t.start()
    started.wait()
    model = nn.Sequential(nn.ReLU())
    try:
        with dt.capture(model) as g:
            for _ in range(200):
                model(torch.ones(2))
    finally:
        stop.set()
        t.join()
    assert seen, "the worker never ran"
    assert {c.type for c in g.calls} == {"Sequential", "ReLU"}
    assert {op.target for op in g.ops} <= {"aten.relu.default", "aten.ones.default"}


def test_the_capture_holds_no_tensor_data() -> None:
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU())
    x = torch.ones(4, 8)
    with dt.capture(model) as g:
        out = model(x)
    ref_out, ref_x = weakref.ref(out), weakref.ref(x)
    del out, x
    gc.collect()
    assert ref_out() is None and ref_x() is None
    assert [op.short for op in g.ops] == ["aten::t", "aten::addmm", "aten::relu", "aten::detach"]
    ref_model = weakref.ref(model)
    del model
    gc.collect()
    assert ref_model() is None and g.calls[0].module is None


class _Chain(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(x)
        z = torch.sigmoid(y)
        up = torch.ops.aten.upsample_nearest2d.vec(z, None, [2.0, 2.0])
        return torch.ops.aten.view(up, [4, 4]) + torch.ops.aten.view(z, [2, 2]).sum() + y.view(2, 2).sum()


def test_the_graph_shares_its_read_only_tuples_and_int_lists() -> None:
    """Ops are read-only, so capture makes no second copy of what one op already holds: args that are
    all tensors are the inputs tuple, one input read as its producer returned it is the producer's
    outputs tuple, equal int lists are one list."""
    model, x = _Chain(), torch.randn(1, 1, 2, 2)
    with dt.capture(model) as g:
        model(x)
    relu, sigmoid, up, view4, view2, view2b = (g.ops[i] for i in (0, 1, 2, 3, 4, 7))
    assert (relu.short, sigmoid.short, up.short, view4.short, view2.short, view2b.short) == (
        "aten::relu", "aten::sigmoid", "aten::upsample_nearest2d", "aten::view", "aten::view", "aten::view")
    assert relu.args is relu.inputs
    assert sigmoid.inputs is relu.outputs and sigmoid.args is relu.outputs
    assert up.inputs is sigmoid.outputs and up.args is not up.inputs
    assert view2.args[1] == [2, 2] and view2.args[1] is view2b.args[1] and view4.args[1] is not view2.args[1]
    assert all(type(v) is int for v in view2.args[1])
    g.lint()


def test_two_captures_of_the_same_model_print_the_same() -> None:
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(inplace=True), nn.Flatten(), nn.LazyLinear(2))
    x = torch.randn(1, 3, 8, 8)
    model(x)
    texts = []
    for _ in range(2):
        with dt.capture(model) as g:
            model(x)
        texts.append(str(g))
    assert texts[0] == texts[1] and "%relu_" in texts[0]


def test_meta_tensors_capture_without_memory() -> None:
    with torch.device("meta"):
        model = nn.Sequential(nn.Linear(4096, 4096), nn.GELU(), nn.Linear(4096, 4096))
        x = torch.randn(8, 4096)
    with dt.capture(model) as g:
        model(x)
    assert [op.target for op in g.ops] == ["aten.t.default", "aten.addmm.default", "aten.gelu.default",
                                            "aten.t.default", "aten.addmm.default"]
    assert {r.device for op in g.ops for r in op.outputs} == {"meta"}
    assert g.ops[-1].producers == (g.ops[2], g.ops[3])


def test_fake_tensor_mode() -> None:
    with FakeTensorMode():
        model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
        x = torch.randn(2, 4)
        with dt.capture(model) as g:
            model(x)
        with CountOps() as count:
            model(x)
    assert [c.path for c in g.calls] == ["", "0", "1"]
    # fake tensors answer .device through a dispatched prim op: real ops, recorded like any other
    assert len(g.ops) == count.n
    aten = [op for op in g.ops if op.target.startswith("aten.")]
    assert [op.short for op in aten] == ["aten::t", "aten::addmm", "aten::relu", "aten::detach"]
    assert aten[2].producers == (aten[1],)
    assert g.inputs[0].name == "input" and g.inputs[0].shape == (2, 4)


@pytest.mark.parametrize("ctx", ["no_grad", "inference_mode", "grad"])
def test_grad_modes(ctx: str) -> None:
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(inplace=True))
    manager = {"no_grad": torch.no_grad, "inference_mode": torch.inference_mode, "grad": torch.enable_grad}[ctx]
    with manager(), dt.capture(model) as g:
        model(torch.ones(2, 4))
    relu = next(op for op in g.ops if op.target == "aten.relu_.default")
    assert relu.mutated[0].version == 1
    assert g.ops[-1].outputs[0].shape == (2, 4)


@needs_node_hook
def test_backward_inside_the_block_follows_the_forward_at_the_root() -> None:
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    with dt.capture(model) as g:
        loss = model(torch.ones(2, 4)).sum()
        loss.backward()
    phases = [op.phase for op in g.ops]
    first = phases.index("backward")
    assert set(phases[:first]) == {"forward"} and set(phases[first:]) == {"backward"}
    assert all(op.call is g.root for op in g.ops[first:])  # a record of time: only the root was running
    threshold = g.op("threshold_backward")
    assert threshold.origin is g.calls[2] and threshold.grad_of is g.op("relu")  # nn.ReLU's call, its op
    assert model[0].weight.grad is not None


def test_nested_and_sparse_tensors_are_recorded() -> None:
    layer = nn.TransformerEncoderLayer(16, 2, 32, batch_first=True)
    enc = nn.TransformerEncoder(layer, 2).eval()
    x = torch.randn(2, 5, 16)
    mask = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])
    with torch.no_grad(), dt.capture(enc) as g:
        enc(x, src_key_padding_mask=mask)
    nested = next(op for op in g.ops if op.target == "aten._nested_tensor_from_mask.default")
    assert nested.outputs[0].shape == (2, "*", 16)
    fused = [op for op in g.ops if op.target == "aten._transformer_encoder_layer_fwd.default"]
    assert len(fused) == 2 and fused[1].producers[0] is fused[0]
    sparse = torch.randn(4, 4).to_sparse()
    with dt.capture() as g2:
        (sparse * 2).to_dense()
    assert [op.short for op in g2.ops] == ["aten::mul", "aten::_to_dense"]
    assert g2.ops[1].producers == (g2.ops[0],)


def test_parameter_counts_outlive_the_model() -> None:
    def traced() -> dt.Graph:
        emb = nn.Embedding(10, 4)
        head = nn.Linear(4, 10, bias=False)
        head.weight = emb.weight  # tied
        model = nn.Sequential(emb, nn.ReLU(), head)
        with dt.capture(model) as g:
            model(torch.tensor([1, 2]))
        return g

    g = traced()
    gc.collect()
    assert g.calls[0].module is None
    assert [(c.path, c.params, c.self_params) for c in g.calls] == [
        ("", 40, 0), ("0", 40, 40), ("1", 0, 0), ("2", 40, 40)]
    assert g.root.params == 40


def test_call_outputs_are_what_the_module_hooks_finally_return() -> None:
    model = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    x = torch.ones(1, 2)
    model.register_forward_hook(lambda m, args, out: out * 3)
    model[0].register_forward_hook(lambda m, args, out: out + 1)
    hooks_before = (dict(model._forward_hooks), dict(model[0]._forward_hooks))
    with dt.capture(model) as g:
        y = model(x)
    mul = next(op for op in g.ops if op.target == "aten.mul.Tensor")
    add = next(op for op in g.ops if op.target == "aten.add.Tensor")
    assert g.calls[0].outputs == mul.outputs and g.outputs == list(mul.outputs)
    assert g.calls[1].outputs == add.outputs  # Linear's output after its hook added 1
    assert (dict(model._forward_hooks), dict(model[0]._forward_hooks)) == hooks_before
    assert mul.call is g.root and add.call is g.calls[0]
    torch.testing.assert_close(y, (model[1](model[0](x))) * 3)


def test_the_returned_structure_is_kept() -> None:
    class M(nn.Module):
        def forward(self, x):
            return {"boxes": [x * 2, None], "n": 3, "pair": Pair(x + 1, x - 1)}

    model, x = M(), torch.ones(2)
    with dt.capture(model) as g:
        model(x)
    mul, add, sub = g.ops
    assert g.calls[0].returned == {"boxes": [mul.outputs[0], None], "n": 3,
                                   "pair": {"left": add.outputs[0], "right": sub.outputs[0]}}
    assert g.outputs == [mul.outputs[0], add.outputs[0], sub.outputs[0]]
    lin, x2 = nn.Linear(2, 2), torch.ones(1, 2)
    with dt.capture(lin) as g2:
        lin(x2)
    assert g2.calls[0].returned is g2.calls[0].outputs[0]
