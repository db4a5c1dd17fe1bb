"""``Recorder.op``'s inline reads of the common arguments and results record what its helpers record."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn as nn

import dispatchtrace as dt
from dispatchtrace.models import CoolCNN
from dispatchtrace.recording import _recorder
from dispatchtrace.serialize import dumps


def _cool() -> tuple[nn.Module, Callable[[nn.Module], object]]:
    return CoolCNN(), lambda m: m(torch.randn(1, 3, 32, 32))


def _resnet18() -> tuple[nn.Module, Callable[[nn.Module], object]]:
    from vision import torchvision

    return torchvision.models.resnet18(weights=None).eval(), lambda m: m(torch.randn(1, 3, 64, 64))


def _transformer() -> tuple[nn.Module, Callable[[nn.Module], object]]:
    layer = nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, dropout=0.0, batch_first=True)
    return nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval(), lambda m: m(torch.randn(2, 5, 32))


def _training_step() -> tuple[nn.Module, Callable[[nn.Module], object]]:
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.LayerNorm(16), nn.Linear(16, 1))
    opt = torch.optim.Adam(model.parameters(), lr=0.1)

    def step(m: nn.Module) -> None:
        opt.zero_grad()
        m(torch.randn(4, 8)).pow(2).mean().backward()
        opt.step()

    return model, step


def _json(make: Callable[[], tuple[nn.Module, Callable[[nn.Module], object]]]) -> str:
    torch.manual_seed(0)
    model, run = make()
    with torch.no_grad() if make is not _training_step else torch.enable_grad(), dt.capture(model) as g:
        run(model)
    g.lint()
    return dumps(g)


@pytest.mark.parametrize("make", [_cool, _resnet18, _transformer, _training_step],
                         ids=["coolcnn", "resnet18", "transformer", "training_step"])
def test_the_helper_path_saves_the_same_graph(make, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    inline = _json(make)
    monkeypatch.setattr(_recorder, "INLINE", False)
    helpers = _json(make)
    assert "\"ops\":[[" in inline and inline == helpers
