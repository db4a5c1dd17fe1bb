"""The two seed questions, answered by the capture core on real torchvision models."""

from __future__ import annotations

import os

import torch
import torch.nn as nn
from models import CountOps
from vision import torchvision

import dispatchtrace as dt
from dispatchtrace.models import CoolCNN


def _pre_hook_order(model: nn.Module, *args) -> list[str]:
    names = {m: n for n, m in model.named_modules(remove_duplicate=False)}
    seen: list[str] = []
    handle = torch.nn.modules.module.register_module_forward_pre_hook(lambda m, a: seen.append(names.get(m, "?")))
    try:
        model(*args)
    finally:
        handle.remove()
    return seen


def _ancestors(op: dt.Op) -> set[dt.Op]:
    seen: set[dt.Op] = set()
    todo = [op]
    while todo:
        for p in todo.pop().producers:
            if p not in seen:
                seen.add(p)
                todo.append(p)
    return seen


def test_resnet50_relu_calls_in_order() -> None:
    model = torchvision.models.resnet50().eval()
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        expected = [p for p in _pre_hook_order(model, x)]
        with dt.capture(model) as g:
            model(x)
    relu_paths = [c.path for c in g.calls if c.type == "ReLU"]
    assert len(relu_paths) == 49
    assert relu_paths == [p for p in expected if p.endswith("relu")]
    assert [c.path for c in g.calls] == expected
    for layer in range(1, 5):
        for call in (c for c in g.calls if c.path.startswith(f"layer{layer}.") and c.type == "ReLU"):
            same = [c.index for c in g.calls if c.path == call.path]
            assert same == [0, 1, 2]
    for call in (c for c in g.calls if c.type == "ReLU"):
        assert [op.target for op in call.ops] == ["aten.relu_.default"]


def test_resnet50_residual_add_depends_on_both_paths() -> None:
    model = torchvision.models.resnet50().eval()
    with torch.no_grad(), dt.capture(model) as g:
        model(torch.randn(1, 3, 224, 224))
    block = next(c for c in g.calls if c.path == "layer1.0")
    add = next(op for op in block.ops if op.target == "aten.add_.Tensor")
    bn3 = next(c for c in g.calls if c.path == "layer1.0.bn3")
    down = next(c for c in g.calls if c.path == "layer1.0.downsample")
    assert {p.call for p in add.producers} == {bn3, down.children[1]}  # downsample.1 is its BatchNorm2d
    # a block without downsample: the identity is the previous block's last relu_
    block1 = next(c for c in g.calls if c.path == "layer1.1")
    add1 = next(op for op in block1.ops if op.target == "aten.add_.Tensor")
    prev_relu = [c for c in g.calls if c.path == "layer1.0.relu"][2]
    assert {p.call.path for p in add1.producers} == {"layer1.1.bn3", "layer1.0.relu"}
    assert prev_relu.ops[0] in add1.producers
    # the relu after the add reads the add's result, in place
    relu3 = [c for c in g.calls if c.path == "layer1.1.relu"][2]
    assert relu3.ops[0].producers == (add1,)
    assert relu3.ops[0].inputs[0].storage == add1.outputs[0].storage


def test_coolcnn_branches_and_merge() -> None:
    model = CoolCNN()
    x = torch.randn(1, 3, 32, 32)
    with dt.capture(model) as g:
        model(x)
    pools = [c for c in g.calls if c.path == "max_pool"]
    assert [c.index for c in pools] == [0, 1, 2]
    add = next(op for op in g.ops if op.target == "aten.add.Tensor")
    assert add.call.path == "" and add.call.type == "CoolCNN"
    assert set(add.producers) == {pools[0].ops[0], pools[1].ops[0]}
    conv_of = {c.path: c.ops[0] for c in g.calls if c.type == "Conv2d"}
    assert conv_of["initial_conv"] in _ancestors(pools[0].ops[0])
    assert conv_of["parallel_conv"] not in _ancestors(pools[0].ops[0])
    assert conv_of["parallel_conv"] in _ancestors(pools[1].ops[0])
    assert conv_of["initial_conv"] not in _ancestors(pools[1].ops[0])
    for path in ("initial_conv", "parallel_conv"):
        conv = conv_of[path]
        assert conv.inputs[0].kind == "input" and conv.inputs[0].name == "x"
        assert conv.inputs[0] is g.inputs[0]
        assert conv.producers == ()
    div = add.users[0]
    assert div.target == "aten.div.Tensor" and div.producers == (add,)
    assert [c.path for c in g.calls] == _pre_hook_order(model, x)


def test_op_count_matches_empty_dispatch_mode() -> None:
    models = {
        "resnet18": (torchvision.models.resnet18(), (1, 3, 64, 64)),
        "mobilenet_v3_small": (torchvision.models.mobilenet_v3_small(), (1, 3, 64, 64)),
        "squeezenet1_0": (torchvision.models.squeezenet1_0(), (1, 3, 64, 64)),
        "coolcnn": (CoolCNN(), (1, 3, 32, 32)),
    }
    for name, (model, shape) in models.items():
        model.eval()
        x = torch.randn(shape)
        with torch.no_grad():
            with CountOps() as counter:
                model(x)
            with dt.capture(model) as g:
                model(x)
        assert len(g.ops) == counter.n, name
        assert [op.index for op in g.ops] == list(range(len(g.ops)))
        assert len({op.name for op in g.ops}) == len(g.ops)


def test_calls_and_ops_know_the_line_that_issued_them() -> None:
    model = CoolCNN()
    x = torch.randn(1, 3, 32, 32)
    with dt.capture(model) as g:
        model(x)
    by_path = {c.label: c for c in g.calls}
    assert by_path["initial_conv"].source.text == "main_path = self.max_pool(torch.relu(self.initial_conv(x)))"
    assert by_path["max_pool#1"].source.text.startswith("parallel_path = ")
    assert by_path["CoolCNN"].source.function == "test_calls_and_ops_know_the_line_that_issued_them"
    add = next(op for op in g.ops if op.target == "aten.add.Tensor")
    assert add.source.text == "x = (main_path + parallel_path) / 2"
    assert add.source.function == "CoolCNN.forward" and add.source.file.endswith(os.path.join("models", "coolcnn.py"))
    with dt.capture(model, source=False) as g2:
        model(x)
    assert all(op.source is None for op in g2.ops) and all(c.source is None for c in g2.calls)


def test_ops_issued_inside_dispatchtrace_are_attributed_to_the_users_line() -> None:
    # the frames of every module of the package (graph/_literal.py here, two levels below the package root)
    # are the capture's own: the source line is the user's call, not dispatchtrace's
    from dispatchtrace.graph import Literal

    lit = Literal("float32", (1, 2), (1.0, 2.0))
    with dt.capture(torch.nn.Identity()) as g:
        lit.tensor("cpu")
    assert g.ops and all(op.source.file == __file__ for op in g.ops)
    assert {op.source.text for op in g.ops} == {'lit.tensor("cpu")'}
