"""Queries on real captures: targets with wildcards, path and type patterns, calls of a module, ops between calls."""

from __future__ import annotations

import functools

import pytest
import torch
import torch.nn as nn
from vision import needs_torchvision, torchvision

import dispatchtrace as dt
from dispatchtrace.serialize import dumps, loads
from dispatchtrace.views._query import resolve, span


@functools.cache
def _model() -> torch.nn.Module:
    return torchvision.models.resnet50(weights=None).eval()


@pytest.fixture(scope="module")
def g() -> dt.Graph:
    x = torch.randn(1, 3, 64, 64)
    with dt.capture(_model()) as graph:
        _model()(x)
    return graph


def test_find_ops_by_target_pattern(g: dt.Graph) -> None:
    convs = g.find_ops("aten.convolution*")
    assert len(convs) == 53
    adds = g.find_ops("aten.add*")
    assert {op.target for op in adds} == {"aten.add_.Tensor", "aten.addmm.default"}
    assert len(g.find_ops("aten::add_")) == 16  # one residual add per bottleneck
    assert g.find_ops("aten.nothing*") == []


def test_find_ops_by_path_and_type(g: dt.Graph) -> None:
    in_layer1 = g.find_ops(path="layer1.*")
    assert in_layer1 and all(op.call.path.startswith("layer1.") for op in in_layer1)
    assert len(g.find_ops("aten.convolution*", path="layer1.*")) == 10
    assert len(g.find_ops("aten.convolution*", type="Bottleneck")) == 52
    assert len(g.find_ops("aten.convolution*", type="Bottleneck", direct=True)) == 0
    assert [op.call.path for op in g.find_ops(type="Linear")] == ["fc", "fc"]
    relu_2 = g.find_ops(path="layer1.0.relu#2")
    assert [op.target for op in relu_2] == ["aten.relu_.default", "aten.detach.default"]


def test_calls_of_module_and_path(g: dt.Graph) -> None:
    calls = g.calls_of(_model().layer1[0].relu)
    assert [(c.path, c.index) for c in calls] == [("layer1.0.relu", 0), ("layer1.0.relu", 1), ("layer1.0.relu", 2)]
    assert g.calls_of("layer1.0.relu") == calls
    assert g.calls_of(nn.ReLU()) == []
    with pytest.raises(KeyError, match="no call of a module at path 'layer9'"):
        g.calls_of("layer9")
    assert len(g.find_calls(type="ReLU")) == 49
    assert [c.path for c in g.find_calls("layer4.?")] == ["layer4.0", "layer4.1", "layer4.2"]
    assert len(g.find_calls("layer1.*", type="Conv2d")) == 10


def test_ops_between(g: dt.Graph) -> None:
    between = g.ops_between("layer1.0.relu#2", "layer1.1")
    assert between == []  # the bottleneck returns right after its last relu
    ops = g.ops_between("layer1.0.downsample", "layer1.0.relu#2")
    assert [op.target for op in ops] == ["aten.add_.Tensor"]  # the residual add, issued by the bottleneck
    assert ops[0].call.path == "layer1.0"
    both = g.ops_between("layer1.0.downsample", "layer1.0.relu#2", inclusive=True)
    assert [op.short for op in both] == ["aten::convolution", "aten::empty", "aten::native_batch_norm",
                                         "aten::add_", "aten::relu_", "aten::detach"]
    assert both[0].call.path == "layer1.0.downsample.0"
    whole = g.ops_between("conv1", "fc", inclusive=True)
    assert whole == g.ops[span(g, "conv1").start:]
    with pytest.raises(ValueError, match="give the earlier call first"):
        g.ops_between("layer2", "layer1")
    with pytest.raises(KeyError, match="called 3 times"):
        resolve(g, "layer1.0.relu")
    assert resolve(g, "layer1.0.relu#2") is g.calls_of("layer1.0.relu")[2]
    assert resolve(g, "layer1.0.relu#0").index == 0
    assert resolve(g, "layer1.0.conv1") is g.calls_of("layer1.0.conv1")[0]  # a path called once
    with pytest.raises(KeyError, match="no module call labelled 'layer1.0.relu#3'"):
        resolve(g, "layer1.0.relu#3")
    with pytest.raises(KeyError, match="write 'layer1.0.relu#2', with no space before #"):
        resolve(g, "layer1.0.relu #2")  # one spelling only: the label's
    with pytest.raises(KeyError, match="no module call labelled 'layer1.0.conv1#0'"):
        resolve(g, "layer1.0.conv1#0")  # called once: its label has no index


def test_queries_on_a_loaded_capture(g: dt.Graph) -> None:
    loaded = loads(dumps(g))
    assert [op.name for op in loaded.find_ops("aten.add*", path="layer2.*")] == [
        op.name for op in g.find_ops("aten.add*", path="layer2.*")]
    assert len(loaded.calls_of("layer1.0.relu")) == 3
    with pytest.raises(LookupError, match="ask by path instead"):
        loaded.calls_of(_model().layer1[0].relu)


@needs_torchvision
def test_docs_inspection_examples_run() -> None:
    import doctest
    from pathlib import Path

    path = Path(__file__).parents[2] / "docs" / "inspection.md"
    result = doctest.testfile(str(path), module_relative=False, optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    assert result.attempted > 15
    assert result.failed == 0


def test_search_is_the_viewers_rule_exact_names_first(g: dt.Graph) -> None:
    from dispatchtrace.views import matches, search

    names = [x.name for x in search(g, "convolution_3")]
    assert names[0] == "convolution_3" and sorted(names[1:]) == [f"convolution_3{k}" for k in range(10)]
    bottlenecks = search(g, "Bottleneck")
    assert len(bottlenecks) == 16 and all(isinstance(c, dt.Call) for c in bottlenecks)
    assert search(g, "bottleneck") == [] and search(g, "  ") == []  # case-sensitive, as find_calls is
    # a pattern matches a whole text, as find_ops does: the same ops, plus none a substring would add
    assert search(g, "aten.add*") == [*g.find_ops("aten.add*")]
    assert [c.label for c in search(g, "layer1.0.relu#?")] == [c.label for c in g.calls_of("layer1.0.relu")]
    assert matches("layer1.0.relu#2", "relu") and not matches("layer1.0.relu#2", "relu*")
