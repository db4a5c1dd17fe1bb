"""views.collapse: module calls as nodes, op-level edges mapped onto them, folded runs as one node (rules: test_fold)."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from models import CoolCNN, traced
from vision import torchvision

import dispatchtrace as dt
from dispatchtrace.views import CollapsedGraph, Node, collapse
from dispatchtrace.views._auto import auto_depth


def names(nodes: list[Node]) -> list[str]:
    return sorted(n.name for n in nodes)


def chain(cg: CollapsedGraph, *path: str) -> None:
    """Assert that ``path`` is a chain of edges, each node's only successor the next one."""
    for a, b in zip(path, path[1:], strict=False):
        assert names(cg.successors(cg.node(a))) == [b], (a, b)


def assert_acyclic(cg: CollapsedGraph) -> None:
    indeg = {n.id: 0 for n in cg.nodes}
    for e in cg.edges:
        indeg[e.dst.id] += 1
    ready = [n for n in cg.nodes if indeg[n.id] == 0]
    seen = 0
    while ready:
        node = ready.pop()
        seen += 1
        for succ in cg.successors(node):
            indeg[succ.id] -= 1
            if indeg[succ.id] == 0:
                ready.append(succ)
    assert seen == len(cg.nodes), "collapsed graph has a cycle"


@pytest.fixture(scope="module")
def resnet() -> dt.Graph:
    model = torchvision.models.resnet50(weights=None).eval()
    return traced(model, torch.randn(1, 3, 64, 64), grad=False)


# ---- CoolCNN: the first seed -------------------------------------------------------------------


def test_coolcnn_depth1_two_parallel_paths_join_at_add(cool: dt.Graph) -> None:
    cg = cool.collapse(1)
    assert names(cg.successors(cg.node("x"))) == ["initial_conv", "parallel_conv"]
    chain(cg, "initial_conv", "relu", "max_pool#0", "add")
    chain(cg, "parallel_conv", "relu_1", "max_pool#1", "add")
    assert names(cg.predecessors(cg.node("add"))) == ["max_pool#0", "max_pool#1"]
    chain(cg, "add", "div", "secondary_conv", "relu_2", "max_pool#2", "view", "fully_connected1", "relu_3",
          "output_layer", "output")
    assert_acyclic(cg)


def test_coolcnn_depth1_nodes_labels_and_kinds(cool: dt.Graph) -> None:
    cg = cool.collapse(1)
    calls = [n for n in cg.nodes if n.kind == "call"]
    assert [n.label for n in calls] == [
        "initial_conv (Conv2d)", "max_pool#0 (MaxPool2d)", "parallel_conv (Conv2d)", "max_pool#1 (MaxPool2d)",
        "secondary_conv (Conv2d)", "max_pool#2 (MaxPool2d)", "fully_connected1 (Linear)", "output_layer (Linear)",
    ]
    assert all(n.call is not None and n.op is None for n in calls)
    ops = [n for n in cg.nodes if n.kind == "op"]
    assert [n.label for n in ops] == ["aten::relu", "aten::relu", "aten::add", "aten::div", "aten::relu",
                                      "aten::view", "aten::relu"]
    assert all(n.op is not None and n.group == cg.clusters[0].id for n in ops)
    assert [g.label for g in cg.clusters] == ["CoolCNN"]
    assert cg.node("x").kind == "input" and cg.node("output").kind == "output"


def test_edges_carry_the_tensors_that_flow(cool: dt.Graph) -> None:
    cg = cool.collapse(1)
    (edge,) = [e for e in cg.edges if e.src.name == "max_pool#0"]
    assert edge.dst.name == "add"
    assert [t.shape_text for t in edge.tensors] == ["f32[1, 16, 16, 16]"]
    assert edge.tensors[0].producer is cool.op("max_pool2d_with_indices")


def test_depth0_is_the_model_as_one_node(cool: dt.Graph) -> None:
    cg = cool.collapse(0)
    assert [n.name for n in cg.nodes] == ["x", "CoolCNN", "output"]
    assert [(e.src.name, e.dst.name) for e in cg.edges] == [("x", "CoolCNN"), ("CoolCNN", "output")]
    assert cg.clusters == ()


def test_op_level_keeps_every_op_but_unused_detach(cool: dt.Graph) -> None:
    cg = cool.collapse()
    shown = [n.op for n in cg.nodes if n.kind == "op"]
    assert shown == [op for op in cool.ops if op.target != "aten.detach.default"]
    assert len(cg.edges) == 19
    assert cg.depth == "ops" and str(cg) == str(cool.collapse("ops"))
    with_noise = cool.collapse("ops", noise=True)
    assert sum(n.kind == "op" for n in with_noise.nodes) == len(cool.ops)


def test_depth_all_is_every_call_with_leaf_calls_closed(cool: dt.Graph, resnet: dt.Graph) -> None:
    assert cool.collapse("all").depth == 1 and str(cool.collapse("all")) == str(cool.collapse(1))
    cg = resnet.collapse("all")
    assert cg.depth == max(c.depth for c in resnet.calls) == 4 and str(cg) == str(resnet.collapse(4))
    calls = [n.call for n in cg.nodes if n.kind == "call"]
    assert calls and all(not any(isinstance(c, dt.Call) for c in call.children) for call in calls)
    assert all(any(isinstance(c, dt.Call) for c in n.op.call.children) or n.op.call.parent is None
               for n in cg.nodes if n.op is not None)


def test_op_level_groups_name_every_call(cool: dt.Graph) -> None:
    cg = cool.collapse("ops")
    labels = [g.label for g in cg.clusters]
    assert labels[0] == "CoolCNN"
    assert "max_pool#2 (MaxPool2d)" in labels and "fully_connected1 (Linear)" in labels
    by_id = {g.id: g for g in cg.clusters}
    conv = next(n for n in cg.nodes if n.op is not None and n.op.name == "convolution")
    assert by_id[conv.group].call.path == "initial_conv"
    assert by_id[by_id[conv.group].parent].call.path == ""


def test_params_shows_parameters_as_nodes(cool: dt.Graph) -> None:
    cg = cool.collapse(1, params=True)
    weight = cg.node("initial_conv.weight")
    assert weight.kind == "tensor" and weight.ref is not None and weight.ref.kind == "parameter"
    assert names(cg.successors(weight)) == ["initial_conv"]
    assert len(cg) == len(cool.collapse(1)) + 10  # weight and bias of five layers


def test_bad_depth_says_what_depths_mean(cool: dt.Graph) -> None:
    for bad in (None, -1, "deep", True, 1.5):
        with pytest.raises(ValueError, match="depth must be an int >= 0 .*'auto', 'ops' or 'all'; got"):
            cool.collapse(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="noise must be True"):
        cool.collapse(noise="show")  # type: ignore[arg-type]


def test_str_is_one_line_per_node_and_edge(cool: dt.Graph) -> None:
    text = str(cool.collapse(1))
    assert "n1 call initial_conv (Conv2d)" in text
    assert "max_pool#1 -> add  f32[1, 16, 16, 16]" in text
    with pytest.raises(KeyError, match="nodes are named like"):
        cool.collapse(1).node("nope")


# ---- ResNet-50: depth, predicate, folding --------------------------------------------------------


def test_resnet50_depth1(resnet: dt.Graph) -> None:
    cg = resnet.collapse(1)
    chain(cg, "x", "conv1", "bn1", "relu", "maxpool", "layer1", "layer2", "layer3", "layer4", "avgpool",
          "flatten" if any(n.name == "flatten" for n in cg.nodes) else "view", "fc", "output")
    assert len(cg) == 13


def test_resnet50_bottleneck_predicate(resnet: dt.Graph) -> None:
    cg = resnet.collapse(predicate=lambda call: call.type == "Bottleneck")
    blocks = [n for n in cg.nodes if n.kind == "call"]
    assert [n.name for n in blocks] == [f"layer{i}.{j}" for i, n in enumerate((3, 4, 6, 3), 1) for j in range(n)]
    chain(cg, *[n.name for n in blocks])
    # the stem stays at op level: convolution -> batch norm -> relu_ -> max pool -> layer1.0
    assert [n.kind for n in cg.predecessors(cg.node("layer1.0"))] == ["op"]
    assert_acyclic(cg)


def test_predicate_outermost_match_wins(resnet: dt.Graph) -> None:
    cg = resnet.collapse(predicate=lambda call: call.type in ("Sequential", "Bottleneck"))
    assert [n.name for n in cg.nodes if n.kind == "call"] == ["layer1", "layer2", "layer3", "layer4"]


def test_every_op_lands_in_exactly_one_node(resnet: dt.Graph) -> None:
    for depth in (0, 1, 2, 3):
        cg = resnet.collapse(depth)
        covered = []
        for node in cg.nodes:
            if node.op is not None:
                covered.append(node.op)
            elif node.call is not None:
                covered.extend(node.call.all_ops())
        shown = [op for op in resnet.ops if op.target not in ("aten.detach.default", "aten.empty.memory_format")]
        assert set(shown) <= set(covered)
        assert len(covered) == len(set(covered))
        assert_acyclic(cg)


def test_residual_branches_stay_two_paths(resnet: dt.Graph) -> None:
    cg = resnet.collapse(3)
    block = "layer1.0"
    add = next(n for n in cg.nodes if n.op is not None and n.op.target == "aten.add_.Tensor"
               and n.op.call.path == block)
    assert names(cg.predecessors(add)) == [f"{block}.bn3", f"{block}.downsample"]
    assert names(cg.successors(cg.node("maxpool"))) == [f"{block}.conv1", f"{block}.downsample"]
    assert cg.node(f"{block}.downsample").label == f"{block}.downsample (Sequential)"


def test_resnet50_fold_counts_identical_bottlenecks(resnet: dt.Graph) -> None:
    cg = resnet.collapse(2, fold=True)
    folded = {n.label: n.fold for n in cg.nodes if n.fold > 1}
    assert folded == {
        "layer1.1–2 (Bottleneck) ×2": 2,
        "layer2.1–3 (Bottleneck) ×3": 3,
        "layer3.1–5 (Bottleneck) ×5": 5,
        "layer4.1–2 (Bottleneck) ×2": 2,
    }
    chain(cg, "layer1.0", "layer1.1×2", "layer2.0", "layer2.1×3", "layer3.0")
    assert len(cg) == len(resnet.collapse(2)) - (1 + 2 + 4 + 1)


def test_auto_depth_is_the_deepest_that_fits(resnet: dt.Graph) -> None:
    depth = auto_depth(resnet)
    assert len(resnet.collapse(depth)) <= 150 < len(resnet.collapse(depth + 1))
    assert len(collapse(resnet, "auto", fold=True)) <= 150
    assert auto_depth(resnet, max_nodes=5) == 0


# ---- folding: a transformer encoder, training and eval (fused fast path) ---------------------


def encoder() -> nn.Module:
    torch.manual_seed(0)
    return nn.TransformerEncoder(nn.TransformerEncoderLayer(64, 4, batch_first=True), 12, enable_nested_tensor=False)


@pytest.mark.parametrize("mode", ["train", "eval"])
def test_transformer_twelve_layers_fold_into_one_node(mode: str) -> None:
    model = encoder().train(mode == "train")
    g = traced(model, torch.randn(2, 10, 64), grad=mode == "train")
    if mode == "eval":  # the fused fast path: one op per layer
        assert {op.target for op in g.ops} == {"aten._transformer_encoder_layer_fwd.default"}
    cg = g.collapse(1, fold=True)
    assert [n.label for n in cg.nodes] == ["src", "layers.0–11 (TransformerEncoderLayer) ×12", "output"]
    node = cg.nodes[1]
    assert node.fold == 12 and [c.path for c in node.calls] == [f"layers.{i}" for i in range(12)]
    chain(cg, "src", node.name, "output")
    assert len(g.collapse(1)) == 14


def test_transformer_folded_cluster_shows_one_layer_inside() -> None:
    g = traced(encoder().train(), torch.randn(2, 10, 64))
    cg = g.collapse(2, fold=True)
    folded = [grp for grp in cg.clusters if grp.fold > 1]
    assert [grp.label for grp in folded] == ["layers.0–11 (TransformerEncoderLayer) ×12"]
    inner = [n for n in cg.nodes if n.group == folded[0].id]
    assert all(n.call is None or n.call.path.startswith("layers.0.") for n in inner)
    assert names(inner) == ["add_1", "add_2", "layers.0.dropout", "layers.0.dropout1", "layers.0.dropout2",
                            "layers.0.linear1", "layers.0.linear2", "layers.0.norm1", "layers.0.norm2",
                            "layers.0.self_attn", "relu"]
    assert_acyclic(cg)
    # every edge tensor comes once: later layers do not repeat the first one's
    assert all(len(e.tensors) == 1 for e in cg.edges)
    assert len(g.collapse(2)) > 10 * 12


# ---- calls without ops, code outside modules --------------------------------------------------


def test_calls_that_run_no_op_pass_tensors_through() -> None:
    model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(), nn.Identity(), nn.Linear(4, 2)).eval()
    g = traced(model, torch.ones(1, 4))
    assert [len(list(c.all_ops())) for c in g.calls[1:]] == [2, 0, 0, 2]
    cg = g.collapse(1)
    chain(cg, "input", "0", "1", "2", "3", "output")
    assert_acyclic(cg)


def test_ops_outside_any_module_stay_op_nodes() -> None:
    model, x = nn.Linear(4, 2), torch.ones(1, 4)
    with dt.capture(model) as g:
        y = model(x * 2).sum()
    assert y.shape == ()
    cg = g.collapse(0)
    assert [(n.kind, n.label) for n in cg.nodes] == [("input", "input_0"), ("op", "aten::mul"),
                                                     ("call", "Linear"), ("op", "aten::sum"), ("output", "output")]
    assert all(n.group is None for n in cg.nodes)
    chain(cg, "input_0", "mul", "Linear")
    # the block's outputs are those of the model call (code after it cannot be told from scratch work)
    assert names(cg.successors(cg.node("Linear"))) == ["output", "sum"]


def test_capture_without_modules() -> None:
    x = torch.ones(3)
    with dt.capture() as g:
        x.sin().cos()
    assert auto_depth(g) == "ops"
    assert str(collapse(g, "all")) == str(collapse(g, "ops"))
    cg = collapse(g, "auto")
    assert [n.label for n in cg.nodes] == ["input_0", "aten::sin", "aten::cos"]
    chain(cg, "input_0", "sin", "cos")


def test_in_place_write_through_a_view() -> None:
    class Poke(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = x * 1
            y[:, :2].add_(1)
            return y.relu()

    g = traced(Poke(), torch.ones(2, 4))
    cg = g.collapse("ops")
    relu = next(n for n in cg.nodes if n.label == "aten::relu")
    assert "add_" in names(cg.predecessors(relu))
    assert_acyclic(cg)


def test_coolcnn_model_is_the_seed() -> None:
    assert isinstance(CoolCNN()(torch.randn(1, 3, 32, 32)), torch.Tensor)


def test_batch_norm_bookkeeping_is_hidden_in_training() -> None:
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU()).train()
    g = traced(model, torch.randn(2, 3, 8, 8))
    counters = [op for op in g.ops if op.mutated and op.mutated[0].name == "1.num_batches_tracked"]
    assert len(counters) == 1
    shown = {n.op for n in g.collapse("ops").nodes if n.op is not None}
    assert counters[0] not in shown
    assert counters[0] in {n.op for n in g.collapse("ops", noise=True).nodes}
    bn = next(op for op in g.ops if op.target == "aten.native_batch_norm.default")
    assert bn in shown and {r.kind for r in bn.mutated} == {"buffer"}


def test_a_forward_that_raises_still_shows_the_failing_call() -> None:
    class Bad(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = nn.Linear(4, 4), nn.Linear(5, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.b(self.a(x))

    model, x = Bad(), torch.ones(1, 4)
    with pytest.raises(RuntimeError), dt.capture(model) as g:
        model(x)
    assert g.error is not None
    cg = g.collapse(1)
    chain(cg, "x", "a", "b")
    assert not any(n.kind == "output" for n in cg.nodes)


def test_two_inputs_two_outputs() -> None:
    class Two(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return self.lin(x), self.lin(y) * 2

    g = traced(Two(), torch.ones(1, 4), torch.zeros(1, 4))
    cg = g.collapse(1)
    chain(cg, "x", "lin#0", "output")
    chain(cg, "y", "lin#1", "mul", "output")
    assert [len(e.tensors) for e in cg.edges if e.dst.kind == "output"] == [1, 1]


ZOO = ["googlenet", "mobilenet_v3_small", "efficientnet_b0", "convnext_tiny", "vit_b_16", "swin_t", "densenet121",
       "inception_v3", "shufflenet_v2_x0_5", "regnet_y_400mf"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ZOO)
def test_model_zoo_collapses_to_dags(name: str) -> None:
    kwargs = {"aux_logits": False, "init_weights": False} if name in ("googlenet", "inception_v3") else {}
    model = torchvision.models.get_model(name, weights=None, **kwargs).eval()
    size = 299 if name == "inception_v3" else 224
    g = traced(model, torch.randn(1, 3, size, size), grad=False)
    for depth in (0, 1, 2, 3, "all", "ops"):
        for fold in (False, True):
            cg = g.collapse(depth, fold=fold)
            assert_acyclic(cg)
            assert all(e.src is not e.dst for e in cg.edges)
    assert len(g.collapse(0)) == 3
    assert len(collapse(g, "auto", fold=True)) <= 150
