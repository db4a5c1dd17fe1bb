"""Replay of models that hold tensors outside their parameters and buffers: plain tensor attributes (Faster
R-CNN's and RetinaNet's cached anchors) replay from the values the capture recorded (``constants=`` bytes each)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn as nn

import dispatchtrace as dt
from dispatchtrace import ReplayError

torchvision = pytest.importorskip("torchvision")


class Anchored(nn.Module):
    """Holds its anchors as a list of plain tensors, as torchvision's AnchorGenerator does."""

    def __init__(self) -> None:
        super().__init__()
        self.cell_anchors = [torch.tensor([[-1.0, -1.0, 1.0, 1.0]]), torch.tensor([[-2.0, -2.0, 2.0, 2.0]])]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.cell_anchors[0].T + x @ self.cell_anchors[1].T


def test_a_plain_tensor_attribute_replays_from_its_recorded_value(tmp_path: Path) -> None:
    m, x = Anchored(), torch.randn(3, 4)
    with torch.no_grad(), dt.capture(m) as g:
        y = m(x)
    assert [g.constants[n].values for n in sorted(g.constants)] == [(-1.0, -1.0, 1.0, 1.0), (-2.0, -2.0, 2.0, 2.0)]
    gm = g.to_fx(m)
    torch.testing.assert_close(gm(x), y, rtol=0, atol=0)
    x2 = torch.randn(3, 4)
    torch.testing.assert_close(gm(x2), m(x2), rtol=0, atol=0)
    g.save(tmp_path / "a.json")  # the values travel with the file
    torch.testing.assert_close(dt.load(tmp_path / "a.json").to_fx(m)(x2), m(x2), rtol=0, atol=0)


def test_one_over_the_byte_limit_is_named_with_what_to_do() -> None:
    m, x = Anchored(), torch.randn(3, 4)
    with torch.no_grad(), dt.capture(m, constants=8) as g:  # each anchor is 16 bytes
        m(x)
    with pytest.raises(ReplayError, match=r"constant _tensor_constant0 \(f32\[1, 4\], first read by .*it is 16 bytes, "
                                          r"over the capture limit of 8 \(dt.capture\(model, constants=16\) keeps it\); "
                                          r"or register cell_anchors\[0\], a plain tensor attribute of Anchored, as a "
                                          r"buffer, which replay reads from the model\)"):
        g.to_fx(m)


def test_a_constant_written_by_its_first_read_has_no_value_recorded() -> None:
    class Accumulates(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.kv = (torch.zeros(2),)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.kv[0].add_(x) * 2

    m = Accumulates()
    with torch.no_grad(), dt.capture(m) as g:
        m(torch.ones(2))
    assert g.constants["_tensor_constant0"].why == "the op that first read it wrote it"


def _same(a: Any, b: Any) -> None:
    if isinstance(a, torch.Tensor):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            _same(a[k], b[k])
    else:
        assert isinstance(a, (list, tuple)) and len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _same(x, y)


def _replays(model: nn.Module, make: Any) -> None:
    torch.manual_seed(0)
    model = model.eval()
    x = make()
    with torch.no_grad(), dt.capture(model) as g:
        y = model(x)
    gm = g.to_fx(model)
    with torch.no_grad():
        _same(gm(x), y)
        x2 = make()
        _same(gm(x2), model(x2))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["fasterrcnn_mobilenet_v3_large_320_fpn", "retinanet_resnet50_fpn"])
def test_detection_models_replay_on_the_captured_input_and_a_fresh_one(name: str) -> None:
    model = getattr(torchvision.models.detection, name)(weights=None, weights_backbone=None, num_classes=5)
    _replays(model, lambda: [torch.rand(3, 96, 128)])


@pytest.mark.slow
def test_a_segmentation_model_replays_on_the_captured_input_and_a_fresh_one() -> None:
    model = torchvision.models.segmentation.fcn_resnet50(weights=None, weights_backbone=None, num_classes=3)
    _replays(model, lambda: torch.rand(1, 3, 64, 64))
