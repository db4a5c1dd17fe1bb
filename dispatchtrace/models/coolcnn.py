"""``CoolCNN``, the model of the first seed question, verbatim: two parallel conv paths, averaged."""

from __future__ import annotations

import torch
import torch.nn as nn


class CoolCNN(nn.Module):
    """Two parallel conv -> relu -> max_pool paths, averaged, then conv, flatten and two linears.

    Takes ``1x3x32x32`` images (the first linear expects ``32 * 8 * 8`` features).

    >>> CoolCNN()(torch.randn(2, 3, 32, 32)).shape
    torch.Size([2, 10])
    """

    input_shape = (1, 3, 32, 32)

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
