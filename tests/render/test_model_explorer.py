"""render.model_explorer: the ``.mx.json`` file validates against Model Explorer's graph structure.

The validator below is written from Model Explorer's own source (google-ai-edge/model-explorer):
the dataclasses of ``src/server/package/src/model_explorer/graph_builder.py`` (``GraphCollection``,
``Graph``, ``GraphNode``, ``IncomingEdge``, ``KeyValue``, ``MetadataItem``, ``GroupNodeAttributes``),
the UI's loader ``loadGraphsJson`` in ``src/ui/src/common/utils.ts`` (a collection needs ``label`` and
``graphs``, else a list of graphs), and the UI's graph processor, which splits a namespace on ``/``
(``\\/`` escapes one), keeps only the part after the last ``;``, names group nodes
``<namespace>___group___``, looks ``groupNodeAttributes`` up by a group's full namespace (``""``: the
graph) and reads ``tensor_shape`` from output metadata as a string.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import torch
from models import coolcnn, traced
from vision import torchvision

import dispatchtrace as dt
from dispatchtrace.cli import main
from dispatchtrace.render import _formats as formats
from dispatchtrace.views import noise_ops


def _strings(value: Any, where: str) -> None:
    assert isinstance(value, str), f"{where}: expected a string, got {value!r}"


def _key_values(items: Any, where: str) -> None:
    assert isinstance(items, list), f"{where}: expected a list of key/value pairs"
    for kv in items:
        assert isinstance(kv, dict) and set(kv) == {"key", "value"}, f"{where}: {kv!r} is not a KeyValue"
        _strings(kv["key"], where)
        value = kv["value"]
        if isinstance(value, dict):  # NodeIdsNodeAttributeValue
            assert value.get("type") == "node_ids" and isinstance(value.get("nodeIds"), list), where
        else:
            _strings(value, f"{where}.{kv['key']}")


def _metadata(items: Any, where: str) -> set[str]:
    assert isinstance(items, list), where
    ids = set()
    for m in items:
        assert isinstance(m, dict) and set(m) <= {"id", "attrs"} and "attrs" in m, f"{where}: {m!r}"
        _strings(m["id"], where)
        assert m["id"] not in ids, f"{where}: metadata id {m['id']} twice"
        ids.add(m["id"])
        _key_values(m["attrs"], f"{where}[{m['id']}]")
    return ids


def _components(namespace: str) -> list[str]:
    """Model Explorer's ``splitNamespace``, with the checks that it would otherwise paper over."""
    assert ";" not in namespace, f"namespace {namespace!r}: Model Explorer keeps only the part after the last ';'"
    assert "___group___" not in namespace, namespace
    parts = re.split(r"(?<!\\)/", namespace) if namespace else []
    assert all(parts), f"namespace {namespace!r} has an empty component"
    return parts


NODE_KEYS = {"id", "label", "namespace", "subgraphIds", "attrs", "incomingEdges", "outputsMetadata",
             "inputsMetadata", "style", "config"}
GRAPH_KEYS = {"id", "nodes", "groupNodeAttributes", "groupNodeConfigs", "nodeLabelsToHide", "tasksData", "layoutConfigs"}
EDGE_KEYS = {"sourceNodeId", "sourceNodeOutputId", "targetNodeInputId"}


def validate(doc: Any) -> list[dict[str, Any]]:
    """Raise ``AssertionError`` where ``doc`` breaks Model Explorer's structure; returns the graphs."""
    assert isinstance(doc, dict) and doc.get("label") is not None and doc.get("graphs") is not None, \
        "loadGraphsJson takes a collection only with 'label' and 'graphs'"
    assert set(doc) <= {"label", "graphs", "graphSorting"}, set(doc)
    _strings(doc["label"], "label")
    assert isinstance(doc["graphs"], list) and doc["graphs"], "graphs: a non-empty list"
    for graph in doc["graphs"]:
        assert isinstance(graph, dict) and set(graph) <= GRAPH_KEYS and {"id", "nodes"} <= set(graph), set(graph)
        _strings(graph["id"], "graph.id")
        nodes = graph["nodes"]
        assert isinstance(nodes, list) and nodes
        outputs: dict[str, set[str]] = {}
        position: dict[str, int] = {}
        groups = {""}
        for i, node in enumerate(nodes):
            assert isinstance(node, dict) and set(node) <= NODE_KEYS and {"id", "label", "namespace"} <= set(node), node
            for key in ("id", "label", "namespace"):
                _strings(node[key], f"node.{key}")
            assert node["id"] not in position, f"node id {node['id']} twice"
            position[node["id"]] = i
            _key_values(node.get("attrs", []), f"{node['id']}.attrs")
            outputs[node["id"]] = _metadata(node.get("outputsMetadata", []), f"{node['id']}.outputsMetadata")
            parts = _components(node["namespace"])
            groups.update("/".join(parts[:k]) for k in range(1, len(parts) + 1))
        for node in nodes:
            inputs = _metadata(node.get("inputsMetadata", []), f"{node['id']}.inputsMetadata")
            edges = node.get("incomingEdges", [])
            assert isinstance(edges, list)
            for e in edges:
                assert isinstance(e, dict) and set(e) <= EDGE_KEYS and "sourceNodeId" in e, e
                for key in e:
                    _strings(e[key], f"{node['id']} edge {key}")
                src = e["sourceNodeId"]
                assert src in position, f"{node['id']}: edge from unknown node {src!r}"
                assert position[src] < position[node["id"]], f"edge {src} -> {node['id']} goes backwards"
                assert e.get("sourceNodeOutputId", "0") in outputs[src], f"{src} has no output {e.get('sourceNodeOutputId')}"
                assert e.get("targetNodeInputId", "0") in inputs, f"{node['id']} has no input {e.get('targetNodeInputId')}"
        attributes = graph.get("groupNodeAttributes", {})
        assert isinstance(attributes, dict)
        for ns, attrs in attributes.items():
            assert ns in groups, f"groupNodeAttributes names {ns!r}, which no node's namespace contains"
            assert isinstance(attrs, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in attrs.items()), ns
        for item in (o for n in nodes for o in n.get("outputsMetadata", [])):
            shapes = [kv["value"] for kv in item["attrs"] if kv["key"] == "tensor_shape"]
            assert len(shapes) == 1 and re.fullmatch(r"\w+\[[^\]]*\]", shapes[0]), item
    return doc["graphs"]


def _written(g: dt.Graph, path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    doc = json.loads(g.render(path).read_text())
    (graph,) = validate(doc)
    return doc, graph


def _op_nodes(g: dt.Graph, graph: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The node of every op the file shows: all but the noise ops (``views.noise``), which it leaves out."""
    by_id = {n["id"]: n for n in graph["nodes"]}
    shown = [op for op in g.ops if op not in noise_ops(g)]
    assert {op.name for op in shown} <= set(by_id) and not {op.name for op in noise_ops(g)} & set(by_id)
    return {op.name: by_id[op.name] for op in shown}


def test_the_validator_rejects_what_model_explorer_would_not_read() -> None:
    good = {"label": "m", "graphs": [{"id": "g", "nodes": [
        {"id": "a", "label": "a", "namespace": "x", "outputsMetadata": [{"id": "0", "attrs": [{"key": "tensor_shape", "value": "float32[1]"}]}]},
        {"id": "b", "label": "b", "namespace": "x/y", "inputsMetadata": [{"id": "0", "attrs": []}],
         "incomingEdges": [{"sourceNodeId": "a", "sourceNodeOutputId": "0", "targetNodeInputId": "0"}]}],
        "groupNodeAttributes": {"": {}, "x/y": {"flops": "1"}}}]}
    validate(good)
    bad = [{"graphs": []}, [good["graphs"][0]],
           {"label": "m", "graphs": [{"id": "g", "nodes": [{"id": "a", "label": "a"}]}]},
           json.loads(json.dumps(good).replace('"sourceNodeId": "a"', '"sourceNodeId": "z"')),
           json.loads(json.dumps(good).replace('"sourceNodeOutputId": "0"', '"sourceNodeOutputId": "1"')),
           json.loads(json.dumps(good).replace('"x/y"', '"x//y"')),
           json.loads(json.dumps(good).replace('"x/y": {"flops": "1"}', '"x/z": {"flops": "1"}')),
           json.loads(json.dumps(good).replace('"flops": "1"', '"flops": 1'))]
    for doc in bad:
        with pytest.raises(AssertionError):
            validate(doc)


def test_coolcnn_validates_with_every_op_and_edge(tmp_path: Path) -> None:
    g = coolcnn()
    doc, graph = _written(g, tmp_path / "cool.mx.json")
    assert doc["label"] == "CoolCNN"
    nodes = _op_nodes(g, graph)
    for op in g.ops:
        if op.name not in nodes:
            continue
        sources = {e["sourceNodeId"] for e in nodes[op.name]["incomingEdges"]}
        assert {p.name for p in op.producers if p not in noise_ops(g)} <= sources, op
        assert [m["id"] for m in nodes[op.name]["outputsMetadata"]] == [str(i) for i in range(len(op.outputs))]
        shapes = [kv["value"] for m in nodes[op.name]["outputsMetadata"] for kv in m["attrs"] if kv["key"] == "tensor_shape"]
        assert shapes == [f"{r.dtype}[{', '.join(map(str, r.shape))}]" for r in op.outputs]
    (x,) = g.inputs
    assert any(e["sourceNodeId"] == f"input:{x.text}" for n in nodes.values() for e in n["incomingEdges"])
    assert graph["groupNodeAttributes"][""]["flops"] == str(g.costs().total.flops)


def test_each_call_is_its_own_namespace_component_in_resnet18(tmp_path: Path) -> None:
    g = traced(torchvision.models.resnet18(weights=None).eval(), torch.randn(1, 3, 64, 64), grad=False)
    _, graph = _written(g, tmp_path / "r18.mx.json")
    nodes = _op_nodes(g, graph)
    relus = [c for c in g.calls if c.path == "layer1.0.relu"]
    assert len(relus) == 2
    spaces = {nodes[op.name]["namespace"] for c in relus for op in c.ops}
    assert spaces == {"ResNet/layer1/layer1.0/layer1.0.relu#0", "ResNet/layer1/layer1.0/layer1.0.relu#1"}
    attrs = graph["groupNodeAttributes"]
    for c in relus:
        ns = nodes[c.ops[0].name]["namespace"]
        assert attrs[ns]["label"] == c.label and attrs[ns]["type"] == "ReLU" and attrs[ns]["call"] == f"{c.index + 1} of 2"
    conv = attrs["ResNet/layer1/layer1.0/layer1.0.conv1"]
    assert conv["flops"] == str(g.costs().call(g.find_calls("layer1.0.conv1")[0]).flops)


class Shared(torch.nn.Module):
    """One block called three times, and two unnamed modules of one type (their labels collide)."""

    def __init__(self) -> None:
        super().__init__()
        self.block = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh())
        self.extra = [torch.nn.ReLU(), torch.nn.ReLU()]  # not registered: named by type

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(3):
            x = self.block(x)
        return self.extra[1](self.extra[0](x))


def test_a_module_called_three_times_gives_three_boxes_with_their_own_flops(tmp_path: Path) -> None:
    torch.manual_seed(0)
    g = traced(Shared(), torch.randn(2, 8))
    _, graph = _written(g, tmp_path / "shared.mx.json")
    nodes = _op_nodes(g, graph)
    attrs = graph["groupNodeAttributes"]
    blocks = g.calls_of("block")
    spaces = [nodes[next(blocks[i].all_ops()).name]["namespace"].rsplit("/", 1)[0] for i in range(3)]
    assert spaces == ["Shared/block#0", "Shared/block#1", "Shared/block#2"]
    assert [attrs[s]["flops"] for s in spaces] == [str(g.costs().call(c).flops) for c in blocks]
    top = {n["namespace"].split("/")[1] for n in nodes.values() if n["namespace"].count("/") == 1}
    relus = sorted(s for s in top if s.startswith("ReLU"))
    assert len(relus) == 2, relus


def test_a_loaded_capture_writes_the_same_file_and_the_cli_writes_it_too(tmp_path: Path) -> None:
    g = coolcnn()
    saved = g.render(tmp_path / "cool.json")
    loaded = dt.load(saved)
    _, graph = _written(loaded, tmp_path / "loaded.mx.json")
    assert len(_op_nodes(loaded, graph)) == len(g.ops) - len(noise_ops(g))
    direct = g.render(tmp_path / "direct.mx.json").read_bytes()
    assert (tmp_path / "loaded.mx.json").read_bytes() == direct
    assert main(["render", str(saved), "-o", str(tmp_path / "cli.mx.json")]) == 0
    assert (tmp_path / "cli.mx.json").read_bytes() == direct
    assert main(["coolcnn", "-o", str(tmp_path / "model.mx.json")]) == 0
    validate(json.loads((tmp_path / "model.mx.json").read_text()))


def test_the_file_is_deterministic_and_has_its_own_name_and_title(tmp_path: Path) -> None:
    first = coolcnn().render(tmp_path / "a.mx.json").read_bytes()
    assert coolcnn().render(tmp_path / "b.mx.json").read_bytes() == first
    assert formats.for_path("model.MX.JSON").name == "model-explorer" and formats.for_path("m.json").name == "capture"
    named = coolcnn().render(tmp_path / "named", format="model-explorer", title="cool")
    assert json.loads(named.read_text())["label"] == "cool"


class InPlace(torch.nn.Module):
    """Writes an input in place, reads it back, returns another input untouched."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
        y.add_(1)
        return x, y * 2, torch.relu(x)


def test_in_place_writes_and_returned_inputs_are_edges(tmp_path: Path) -> None:
    g = traced(InPlace(), torch.ones(2), torch.ones(2))
    _, graph = _written(g, tmp_path / "inplace.mx.json")
    by_id = {n["id"]: n for n in graph["nodes"]}
    def sources(node_id: str) -> list[tuple[str, str]]:
        return [(e["sourceNodeId"], e["targetNodeInputId"]) for e in by_id[node_id]["incomingEdges"]]
    assert sources("add_") == [("input:y", "0")] and sources("mul") == [("add_", "0")]
    assert sources("output") == [("input:x", "0"), ("mul", "1"), ("relu", "2")]
    assert {kv["key"]: kv["value"] for kv in by_id["add_"]["attrs"]}["writes"] == "y"


def test_parameters_and_buffers_are_input_nodes_in_their_modules_box(tmp_path: Path) -> None:
    g = traced(torchvision.models.resnet18(weights=None).eval(), torch.randn(1, 3, 64, 64), grad=False)
    _, graph = _written(g, tmp_path / "r18.mx.json")
    by_id = {n["id"]: n for n in graph["nodes"]}
    read = {r.name: r for op in g.ops for r in op.inputs if r.kind in ("parameter", "buffer") and r.producer is None}
    assert {"fc.weight", "fc.bias", "layer1.0.bn1.running_mean"} <= set(read)
    for name, ref in read.items():
        node = by_id[f"{ref.kind}:{name}"]
        owner = g.find_calls(name.rpartition(".")[0])[0]
        assert node["namespace"].rsplit("/", 1)[-1] == owner.label and node["label"] == name, node
    # every op reading one has its edge: fc's t and addmm read fc.weight and fc.bias
    t, addmm = g.find_calls("fc")[0].ops
    assert [e["sourceNodeId"] for e in by_id[t.name]["incomingEdges"]] == ["parameter:fc.weight"]
    assert "parameter:fc.bias" in [e["sourceNodeId"] for e in by_id[addmm.name]["incomingEdges"]]
    assert graph["id"] == "ResNet"  # named after the model, not "forward"


def test_noise_ops_follow_the_noise_rule_and_each_phase_names_its_graph(tmp_path: Path) -> None:
    m = torchvision.models.resnet18(weights=None)
    with dt.capture(m) as g:
        torch.nn.functional.cross_entropy(m(torch.randn(2, 3, 32, 32)), torch.tensor([1, 2])).backward()
    _, graph = _written(g, tmp_path / "f.mx.json")
    bn = [n for n in graph["nodes"] if n["namespace"].endswith("/bn1")]
    assert bn and not any(n["label"] == "aten::empty" for n in bn)  # batch norm's scratch empty is noise
    shown = json.loads(g.render(tmp_path / "n.mx.json", noise=True).read_text())["graphs"][0]
    assert any(n["label"] == "aten::empty" for n in shown["nodes"] if n["namespace"].endswith("/bn1"))
    back = json.loads(g.render(tmp_path / "b.mx.json", phase="backward").read_text())
    validate(back)
    assert (graph["id"], back["graphs"][0]["id"]) == ("ResNet", "ResNet (backward)")
