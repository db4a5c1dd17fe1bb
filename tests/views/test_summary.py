"""Summary table: rows in call order, depth filter, human-readable numbers, plain-dict rows."""

from __future__ import annotations

import functools
import gc

import pytest
import torch
import torch.nn as nn
from golden_text import golden
from vision import torchvision

import dispatchtrace as dt
from dispatchtrace.models import CoolCNN
from dispatchtrace.views._summary import human


def test_golden_coolcnn_summary() -> None:
    model = CoolCNN().eval()
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad(), dt.capture(model) as g:
        model(x)
    table = g.summary()
    golden("summary_coolcnn.txt", str(table))
    pools = [r for r in table.rows() if r["type"] == "MaxPool2d"]
    assert [r["label"] for r in pools] == ["max_pool#0", "max_pool#1", "max_pool#2"]


def test_golden_resnet18_summary_depth_2_markdown() -> None:
    model = torchvision.models.resnet18(weights=None).eval()
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad(), dt.capture(model) as g:
        model(x)
    golden("summary_resnet18_depth2.md", g.summary(depth=2).markdown())


@functools.cache
def _model() -> torch.nn.Module:  # alive: parameter counts need the module
    return torchvision.models.resnet50(weights=None).eval()


def _resnet50() -> dt.Graph:
    with dt.capture(_model()) as g:
        _model()(torch.randn(1, 3, 224, 224))
    return g


def test_resnet50_summary_depth_2() -> None:
    g = _resnet50()
    table = g.summary(depth=2)
    text = str(table).splitlines()
    assert text[0].split() == ["Call", "Type", "Input", "Output", "Params", "Trainable", "Frozen", "FLOPs", "Out", "bytes",
                               "Written", "Attributes"]
    assert text[1].split()[:8] == ["ResNet", "ResNet", "f32[1,", "3,", "224,", "224]", "f32[1,", "1000]"]
    assert "25.6 M" in text[1] and "8.2 GFLOPs" in text[1]
    assert text[-1].startswith("Total") and "8.2 GFLOPs" in text[-1] and "25.6 M" in text[-1]
    # the model, its 10 children, 16 bottlenecks
    assert len(table) == 1 + 10 + 16
    assert [r["label"] for r in table.rows()][:3] == ["ResNet", "conv1", "bn1"]
    layer1_0 = next(r for r in table.rows() if r["path"] == "layer1.0")
    assert layer1_0["type"] == "Bottleneck" and layer1_0["depth"] == 2
    assert layer1_0["output"] == "f32[1, 256, 56, 56]"
    assert layer1_0["output_bytes"] == 256 * 56 * 56 * 4
    assert sum(r["flops"] for r in table.rows() if r["depth"] == 1 and r["flops"]) == table.total.flops


def test_reused_relu_gets_one_row_per_call() -> None:
    g = _resnet50()
    rows = [r for r in g.summary().rows() if r["path"] == "layer1.0.relu"]
    assert [(r["label"], r["index"]) for r in rows] == [("layer1.0.relu#0", 0), ("layer1.0.relu#1", 1), ("layer1.0.relu#2", 2)]
    assert "    layer1.0.relu#1  " in str(g.summary())  # the full label, indented by depth
    relus = [r for r in g.summary().rows() if r["type"] == "ReLU"]
    assert len(relus) == 49
    assert all(r["flops"] is None and r["params"] == 0 for r in relus)


def test_markdown_and_pandas_shape() -> None:
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    with dt.capture(model) as g:
        model(torch.ones(1, 4))
    md = g.summary().markdown().splitlines()
    assert md[0] == "| Call | Type | Input | Output | Params | Trainable | Frozen | FLOPs | Out bytes | Written | Attributes |"
    assert md[2].startswith("| Sequential | Sequential | f32[1, 4] | f32[1, 4] | 20 | 20 | 0 | 32 FLOPs |")
    assert md[-1].startswith("| Total |")
    rows = g.summary().rows()
    assert set(rows[0]) == {"label", "path", "index", "type", "depth", "output", "params", "flops", "output_bytes", "bytes",
                            "input", "trainable", "frozen", "attrs"}
    assert all(isinstance(v, (int, str, type(None))) for r in rows for k, v in r.items() if k != "attrs")
    assert rows[1]["attrs"] == {"in_features": 4, "out_features": 4}


def test_params_known_after_the_module_is_gone() -> None:
    model = nn.Linear(4, 4)
    x = torch.ones(1, 4)
    with dt.capture(model) as g:
        model(x)
    del model
    gc.collect()
    assert g.calls[0].module is None
    row = g.summary().rows()[0]
    assert row["params"] == 20 and row["flops"] == 32


def test_human() -> None:
    assert human(0, "B") == "0 B"
    assert human(999, "B") == "999 B"
    assert human(1000, "B") == "1.0 kB"
    assert human(999_600, "B") == "1.0 MB"
    assert human(12_345_678_901, "FLOPs") == "12 GFLOPs"
    assert human(7_000_000_000) == "7.0 G"


def test_summary_depth_is_the_one_depth_type() -> None:
    model = nn.Sequential(nn.Sequential(nn.Linear(4, 4)), nn.ReLU())
    with dt.capture(model) as g:
        model(torch.ones(1, 4))
    assert [r.label for r in g.summary()] == ["Sequential", "0", "0.0", "1"]
    assert [r.label for r in g.summary(1)] == ["Sequential", "0", "1"]
    for named in ("all", "ops", "auto"):  # no op rows: every call, as documented in graph/_depth.py
        assert [r.label for r in g.summary(named)] == ["Sequential", "0", "0.0", "1"]
    for bad in (None, -1, "x", True, 1.5):
        with pytest.raises(ValueError, match="depth must be an int >= 0 .*'auto', 'ops' or 'all'"):
            g.summary(bad)  # type: ignore[arg-type]
