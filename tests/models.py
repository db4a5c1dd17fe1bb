"""Small models and helpers shared by the tests (``from models import CoolCNN, traced``)."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn as nn

import dispatchtrace as dt


class CoolCNN(nn.Module):
    """The first seed's model, verbatim: two parallel conv -> relu -> max_pool paths, averaged."""

    def __init__(self) -> None:
        super().__init__()
        self.initial_conv = nn.Conv2d(in_channels=3, out_channels=16, kernel_size=3, padding=1)
        self.parallel_conv = nn.Conv2d(in_channels=3, out_channels=16, kernel_size=3, padding=1)
        self.secondary_conv = nn.Conv2d(in_channels=16, out_channels=32, kernel_size=3, padding=1)
        self.max_pool = nn.MaxPool2d(kernel_size=2, stride=2, padding=0)
        self.fully_connected1 = nn.Linear(32 * 8 * 8, 128)
        self.output_layer = nn.Linear(128, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        main_path = self.max_pool(torch.relu(self.initial_conv(x)))
        parallel_path = self.max_pool(torch.relu(self.parallel_conv(x)))
        x = (main_path + parallel_path) / 2
        x = self.max_pool(torch.relu(self.secondary_conv(x)))
        x = x.view(-1, 32 * 8 * 8)
        x = torch.relu(self.fully_connected1(x))
        x = self.output_layer(x)
        return x


def traced(model: Any, *inputs: Any, grad: bool = True) -> dt.Graph:
    """Capture one call of ``model`` on ``inputs`` (made outside the block, as users do)."""
    with torch.set_grad_enabled(grad), dt.capture(model) as g:
        model(*inputs)
    return g


def coolcnn() -> dt.Graph:
    """A capture of CoolCNN on one 1x3x32x32 image, seeded so that it is the same every time."""
    torch.manual_seed(0)
    model = CoolCNN()
    return traced(model, torch.randn(1, 3, 32, 32))
