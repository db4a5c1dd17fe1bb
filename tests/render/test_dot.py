"""render.dot: DOT source (golden files), clusters, labels, determinism, and real ``dot`` runs."""

from __future__ import annotations

import re
import shutil
import xml.etree.ElementTree as ET

import graphviz
import pytest
import torch
import torch.nn as nn
from golden_text import golden
from models import coolcnn, traced
from vision import torchvision

import dispatchtrace as dt
from dispatchtrace.render import to_dot
from dispatchtrace.render._diagram import run_dot
from dispatchtrace.render._dot import digraph, edge_label, text

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz's dot program is not installed")
SVG = "{http://www.w3.org/2000/svg}"


def svg_nodes(svg: bytes) -> list[ET.Element]:
    root = ET.fromstring(svg)
    return [g for g in root.iter(f"{SVG}g") if g.get("class") == "node"]


@pytest.fixture(scope="module")
def resnet() -> dt.Graph:
    torch.manual_seed(0)
    return traced(torchvision.models.resnet50(weights=None).eval(), torch.randn(1, 3, 64, 64), grad=False)


# ---- golden DOT source ---------------------------------------------------------------------------


def test_golden_coolcnn_depth1(cool: dt.Graph) -> None:
    golden("dot_coolcnn_depth1.gv", to_dot(cool, 1, source=False).source)


def test_golden_coolcnn_ops(cool: dt.Graph) -> None:
    golden("dot_coolcnn_ops.gv", to_dot(cool, "ops", source=False).source)


def test_same_capture_twice_gives_identical_dot() -> None:
    a, b = coolcnn(), coolcnn()
    for depth in (0, 1, "ops", "all", "auto"):
        assert to_dot(a, depth).source == to_dot(b, depth).source
    assert "0x" not in to_dot(a, "ops").source  # no id()s or addresses


# ---- what the diagram shows -------------------------------------------------------------------


def test_collapsed_calls_are_boxes_and_ops_show_short_names(cool: dt.Graph) -> None:
    src = to_dot(cool, 1).source
    assert re.search(r'n\d+ \[label="max_pool#0 \(MaxPool2d\)" [^\]]*shape=box style="rounded,filled"', src)
    assert 'label="aten::relu"' in src and 'label="aten::add"' in src
    assert 'label="x\\nf32[1, 3, 32, 32]"' in src and 'label="output\\nf32[1, 10]"' in src
    assert src.count("subgraph cluster_") == 1 and "label=CoolCNN" in src


def test_expanded_calls_are_clusters_with_call_index(cool: dt.Graph) -> None:
    src = to_dot(cool, "ops").source
    for label in ("initial_conv (Conv2d)", "max_pool#0 (MaxPool2d)", "max_pool#2 (MaxPool2d)", "output_layer (Linear)"):
        assert f'label="{label}"' in src
    assert src.count("subgraph cluster_") == 1 + len(cool.calls) - 1


def test_edges_carry_tensor_labels(cool: dt.Graph) -> None:
    src = to_dot(cool, 1).source
    assert re.search(r'n\d+ -> n\d+ \[label="f32\[1, 16, 16, 16\]" tooltip="%max_pool2d_with_indices\[0\]: ', src)
    assert 'label="f32[1, 2048]"' in src
    assert 'label="f32' not in to_dot(cool, 1, edge_labels=False).source.split("->", 1)[1]


def test_tooltips_give_the_op_line_and_its_source(cool: dt.Graph) -> None:
    src = to_dot(cool, "ops").source
    op = cool.op("addmm_1")
    assert f'tooltip="{str(op)}' in src
    where = getattr(op, "source", None)
    if where is not None:
        assert str(where).split(":")[0] in src
        assert str(where).split(":")[0] not in to_dot(cool, "ops", source=False).source


def test_params_adds_parameter_nodes(cool: dt.Graph) -> None:
    src = to_dot(cool, 1, params=True).source
    assert 'label="initial_conv.weight\\nf32[16, 3, 3, 3]"' in src and "shape=note" in src


def test_rankdir_and_title(cool: dt.Graph) -> None:
    src = to_dot(cool, 0, rankdir="LR", title="CoolCNN <seed 1>").source
    assert "rankdir=LR" in src and 'label="CoolCNN <seed 1>"' in src


def test_text_escapes_backslashes_and_html() -> None:
    dot = graphviz.Digraph()
    dot.node("a", label=text("<lambda>", "C:\\tmp"))
    assert 'label="<lambda>\\nC:\\\\tmp"' in dot.source


def test_edge_label_lists_two_shapes_then_a_count(cool: dt.Graph) -> None:
    edge = cool.collapse(1).edges[0]
    assert edge_label(edge) == "f32[1, 3, 32, 32]"
    refs = tuple(cool.op(name).outputs[0] for name in ("convolution", "add", "convolution_2", "view"))
    wide = type(edge)(edge.src, edge.dst, refs)
    assert edge_label(wide) == "f32[1, 16, 32, 32], f32[1, 16, 16, 16] +2"


def test_default_depth_keeps_resnet50_readable(resnet: dt.Graph) -> None:
    auto = resnet.to_dot()
    n_auto = len(re.findall(r"^\s*n\d+ \[label=", auto.source, re.M))
    assert 20 <= n_auto <= 150
    assert resnet.to_dot("auto").source == auto.source == to_dot(resnet, "auto").source
    assert resnet.to_dot("all").source == to_dot(resnet, max(c.depth for c in resnet.calls)).source
    for bad in (None, -1, "foo", True, 1.5):
        with pytest.raises(ValueError, match="depth must be an int >= 0"):
            resnet.to_dot(bad)  # type: ignore[arg-type]
    ops = resnet.to_dot("ops", fold=False).source
    assert ops.count("label=\"aten::convolution\"") == 53


def test_folded_transformer_cluster() -> None:
    torch.manual_seed(0)
    model = nn.TransformerEncoder(nn.TransformerEncoderLayer(64, 4, batch_first=True), 12, enable_nested_tensor=False)
    g = traced(model, torch.randn(2, 10, 64))
    src = to_dot(g, 2).source
    assert 'label="layers.0–11 (TransformerEncoderLayer) ×12"' in src and "penwidth=2" in src
    assert "layers.1." not in src
    assert 'label="layers.0–11 (TransformerEncoderLayer) ×12" ' in to_dot(g, 1).source
    assert src != to_dot(g, 2, fold=False).source


def test_digraph_of_a_collapsed_graph(cool: dt.Graph) -> None:
    cg = cool.collapse(1)
    assert digraph(cg).source == to_dot(cg).source == to_dot(cool, 1).source


# ---- real dot runs ------------------------------------------------------------------------------


@needs_dot
@pytest.mark.parametrize("depth", [0, 1, "ops"])
def test_svg_node_count_matches_collapsed_graph(cool: dt.Graph, depth: object) -> None:
    svg = run_dot(to_dot(cool, depth), "svg")  # type: ignore[arg-type]
    nodes = svg_nodes(svg)
    assert len(nodes) == len(cool.collapse(depth))  # type: ignore[arg-type]
    titles = {n.find(f"{SVG}title").text for n in nodes}  # type: ignore[union-attr]
    assert titles == {n.id for n in cool.collapse(depth).nodes}  # type: ignore[arg-type]


@needs_dot
def test_svg_of_resnet50_default_and_ops(resnet: dt.Graph) -> None:
    for depth, fold in (("auto", True), ("ops", False), (2, True)):
        svg = run_dot(to_dot(resnet, depth, fold=fold), "svg")
        assert len(svg_nodes(svg)) == len(resnet.collapse(depth, fold=fold))
        assert b"layer4" in svg


@needs_dot
def test_pdf_and_png_are_real_files(cool: dt.Graph) -> None:
    assert run_dot(to_dot(cool, 1), "pdf").startswith(b"%PDF")
    assert run_dot(to_dot(cool, 1), "png").startswith(b"\x89PNG")


def test_fast_layout_for_dense_graphs(cool: dt.Graph) -> None:
    quality = to_dot(cool, 1).source
    fast = to_dot(cool, 1, layout="fast").source
    assert "nslimit" not in quality and 'label="f32[1, 2048]"' in quality
    assert "nslimit=0.2" in fast and 'xlabel="f32[1, 2048]"' in fast
    assert to_dot(cool, 1, layout="quality").source == quality


def test_call_tooltips_say_where_the_call_was_made(cool: dt.Graph) -> None:
    where = getattr(cool.calls[1], "source", None)
    if where is None:
        pytest.skip("this core records no call source")
    src = to_dot(cool, 1).source
    assert f"called at {where}".replace("\\", "\\\\") in src
    assert "called at" not in to_dot(cool, 1, source=False).source


@needs_dot
def test_resnet50_bottleneck_predicate_diagram(resnet: dt.Graph) -> None:
    folded = resnet.to_dot(predicate=lambda call: call.type == "Bottleneck").source
    assert 'label="layer3.1–5 (Bottleneck) ×5"' in folded
    dot = resnet.to_dot(predicate=lambda call: call.type == "Bottleneck", fold=False)
    boxes = re.findall(r'label="(layer\d\.\d) \(Bottleneck\)"', dot.source)
    assert boxes == [f"layer{i}.{j}" for i, n in enumerate((3, 4, 6, 3), 1) for j in range(n)]
    assert 'label="conv1 (Conv2d)"' in dot.source and 'label="fc (Linear)"' in dot.source
    assert len(svg_nodes(run_dot(dot, "svg"))) == len(re.findall(r"^\s*n\d+ \[label=", dot.source, re.M))
