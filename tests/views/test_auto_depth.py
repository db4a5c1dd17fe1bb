"""depth="auto": ops for a model without submodules, parts for a detection model, width weighed with node count."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from vision import torchvision

import dispatchtrace as dt
from dispatchtrace.views import layering
from dispatchtrace.views._auto import AUTO_MAX_WIDTH, auto_depth, shape


def test_multihead_attention_alone_shows_its_ops() -> None:
    attention = nn.MultiheadAttention(16, 2, batch_first=True)
    q = torch.randn(1, 5, 16)
    with dt.capture(attention) as g:  # gradients on: the composite path, many ops
        attention(q, q, q)
    assert auto_depth(g) == "ops"
    cg = g.collapse("auto")
    ops = [n for n in cg.nodes if n.kind == "op"]
    assert len(ops) >= 5 and not [n for n in cg.nodes if n.kind == "call"]
    assert "aten::softmax" in g.to_dot().source or "aten::_softmax" in g.to_dot().source
    lines = str(g.tree()).splitlines()
    assert lines[0].startswith("MultiheadAttention") and len(lines) > 5 and any("aten::" in line for line in lines)
    assert len(str(g.tree(0)).splitlines()) == 1  # an explicit depth is still honoured


def test_a_function_shows_its_ops() -> None:
    q = torch.randn(1, 2, 5, 8)
    with dt.capture() as g:
        F.scaled_dot_product_attention(q, q, q)
    assert auto_depth(g) == "ops"
    assert any(n.kind == "op" and "attention" in n.label for n in g.collapse("auto").nodes)


class _Wide(nn.Module):
    """Thirty independent Linear calls summed: one rank, thirty wide."""

    def __init__(self) -> None:
        super().__init__()
        self.heads = nn.ModuleList(nn.Linear(4, 4) for _ in range(30))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.stack([h(x) for h in self.heads]).sum(0)


def test_width_counts_as_well_as_nodes() -> None:
    model = nn.Sequential(_Wide(), _Wide(), _Wide())
    with dt.capture(model) as g:
        model(torch.randn(1, 4))
    wide = g.collapse(2)
    assert len(wide) <= 150 and shape(wide).width >= 30  # within the node budget, far too wide
    assert auto_depth(g) == 1
    assert shape(g.collapse("auto")).width <= AUTO_MAX_WIDTH


def test_detection_model_shows_its_parts() -> None:
    torch.manual_seed(0)
    model = torchvision.models.detection.fasterrcnn_mobilenet_v3_large_320_fpn(weights=None, weights_backbone=None).eval()
    with torch.no_grad(), dt.capture(model) as g:
        model([torch.rand(3, 96, 128)])
    depth = auto_depth(g, fold=True)
    assert isinstance(depth, int) and depth >= 1
    cg = g.collapse(depth, fold=True)
    calls = {n.call.path.split(".")[0] for n in cg.nodes if n.kind == "call" and n.call is not None}
    assert {"transform", "backbone", "rpn", "roi_heads"} <= calls
    assert shape(cg).width <= AUTO_MAX_WIDTH and len(cg) <= 150


def test_layering_ranks_a_weight_read_late_next_to_its_reader() -> None:
    # n0 -> n1 -> n2 -> n3, and n4 (a weight's transpose, no inputs) read by n3
    lay = layering(["n0", "n1", "n2", "n4", "n3"], [("n0", "n1"), ("n1", "n2"), ("n2", "n3"), ("n4", "n3")])
    assert (lay.ranks, lay.width, lay.span) == (4, 2, 4)


class _PostProcessed(nn.Module):
    """Two parts, then 400 ops in the model's own forward (as a detector's post-processing method)."""

    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Linear(4, 8)
        self.head = nn.Linear(8, 400)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scores = self.head(self.backbone(x))
        return torch.stack([s.sigmoid() for s in scores.unbind(1)])


def test_loose_ops_are_bundled_so_the_parts_show() -> None:
    model = _PostProcessed()
    with dt.capture(model) as g:
        model(torch.randn(1, 4))
    assert len(g.collapse(1)) > 150 and shape(g.collapse(1)).width > AUTO_MAX_WIDTH  # no plain depth fits
    assert auto_depth(g) == 1
    cg = g.collapse("auto")
    labels = [n.label for n in cg.nodes]
    assert "backbone (Linear)" in labels and "head (Linear)" in labels
    bundle = cg.node("_PostProcessed.ops#2")
    assert bundle.label.startswith("402 ops: aten::sigmoid ×400") and len(cg) == 5
    assert [n.name for n in cg.predecessors(bundle)] == ["head"] and [n.name for n in cg.successors(bundle)] == ["output"]
    assert 'label="402 ops: aten::sigmoid ×400' in g.to_dot().source


@pytest.mark.slow
def test_mask_rcnn_shows_its_parts() -> None:
    torch.manual_seed(0)
    model = torchvision.models.detection.maskrcnn_resnet50_fpn(weights=None, weights_backbone=None).eval()
    with torch.no_grad(), dt.capture(model) as g:
        model([torch.rand(3, 128, 160)])
    assert shape(g.collapse(1, fold=True)).width > 1000  # the 5,000 post-processing ops side by side
    cg = g.collapse("auto", fold=True)
    parts = {n.call.path.split(".")[0] for n in cg.nodes if n.call is not None}
    assert {"transform", "backbone", "rpn", "roi_heads"} <= parts
    assert len(cg) <= 150 and shape(cg).width <= AUTO_MAX_WIDTH
