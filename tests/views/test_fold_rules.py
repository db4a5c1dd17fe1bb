"""Folding (×N) merges only calls that are really the same: types, ops, and every tensor's shape and dtype."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from models import traced
from vision import torchvision

import dispatchtrace as dt
from dispatchtrace.views import foldable_runs
from dispatchtrace.views._fold import signature


def folded(g: dt.Graph, depth: int) -> list[str]:
    return [n.label for n in g.collapse(depth, fold=True).nodes if n.fold > 1]


def test_linears_of_different_widths_do_not_fold() -> None:
    model = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 16), nn.Linear(16, 2))
    g = traced(model, torch.ones(1, 4))
    assert foldable_runs(g, lambda c: True) == []
    assert [n.label for n in g.collapse(1, fold=True).nodes if n.kind == "call"] == [
        "0 (Linear)", "1 (Linear)", "2 (Linear)"]
    assert "×" not in g.to_dot(1).source


def test_linears_of_one_width_still_fold() -> None:
    model = nn.Sequential(nn.Linear(4, 8), *[nn.Linear(8, 8) for _ in range(3)], nn.Linear(8, 2))
    g = traced(model, torch.ones(1, 4))
    assert folded(g, 1) == ["1–3 (Linear) ×3"]


def test_same_shapes_but_another_dtype_do_not_fold() -> None:
    class Cast(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.double()

    model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4), Cast(), nn.Linear(4, 4).double(), nn.Linear(4, 4).double())
    g = traced(model, torch.ones(1, 4))
    lin = [c for c in g.calls if c.type == "Linear"]
    assert signature(lin[1]) != signature(lin[2])
    assert folded(g, 1) == ["0–1 (Linear) ×2", "3–4 (Linear) ×2"]


def test_same_output_shape_but_other_parameter_shapes_do_not_fold() -> None:
    # a 1x1 conv and a 3x3 conv (padding 1) give the same output shape: their weights differ
    model = nn.Sequential(nn.Conv2d(8, 8, 1), nn.Conv2d(8, 8, 3, padding=1))
    g = traced(model, torch.randn(1, 8, 6, 6))
    assert [c.outputs[0].shape for c in g.calls[1:]] == [(1, 8, 6, 6)] * 2
    assert foldable_runs(g, lambda c: True) == []


@pytest.fixture(scope="module")
def resnet18() -> dt.Graph:
    torch.manual_seed(0)
    return traced(torchvision.models.resnet18(weights=None).eval(), torch.randn(1, 3, 64, 64), grad=False)


def test_resnet18_stages_of_different_widths_do_not_fold(resnet18: dt.Graph) -> None:
    assert folded(resnet18, 1) == []
    labels = [n.label for n in resnet18.collapse(1, fold=True).nodes if n.kind == "call"]
    assert [lab for lab in labels if lab.startswith("layer")] == [f"layer{i} (Sequential)" for i in range(1, 5)]


def test_resnet18_identical_blocks_inside_a_stage_still_fold(resnet18: dt.Graph) -> None:
    # layer1's two BasicBlocks are the same; every later stage opens with a downsampling block
    assert folded(resnet18, 2) == ["layer1.0–1 (BasicBlock) ×2"]


def test_every_run_found_has_one_shape_per_op(resnet18: dt.Graph) -> None:
    for run in foldable_runs(resnet18, lambda c: True):
        shapes = [[(o.target, [r.shape_text for r in (*o.inputs, *o.outputs)]) for o in c.all_ops()] for c in run.calls]
        assert all(s == shapes[0] for s in shapes), run
