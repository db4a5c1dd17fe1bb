"""Seed question 1: recover CoolCNN's branches and merge from the forward pass alone.

Run: python examples/coolcnn.py [OUT.svg]   (writes the diagram, default coolcnn.svg)
"""

import sys

import torch
import torch.nn as nn

import dispatchtrace as dt


class CoolCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.initial_conv = nn.Conv2d(in_channels=3, out_channels=16, kernel_size=3, padding=1)
        self.parallel_conv = nn.Conv2d(in_channels=3, out_channels=16, kernel_size=3, padding=1)
        self.secondary_conv = nn.Conv2d(in_channels=16, out_channels=32, kernel_size=3, padding=1)
        self.max_pool = nn.MaxPool2d(kernel_size=2, stride=2, padding=0)
        self.fully_connected1 = nn.Linear(32 * 8 * 8, 128)
        self.output_layer = nn.Linear(128, 10)

    def forward(self, x):
        main_path = self.max_pool(torch.relu(self.initial_conv(x)))
        parallel_path = self.max_pool(torch.relu(self.parallel_conv(x)))
        x = (main_path + parallel_path) / 2
        x = self.max_pool(torch.relu(self.secondary_conv(x)))
        x = x.view(-1, 32 * 8 * 8)
        x = torch.relu(self.fully_connected1(x))
        x = self.output_layer(x)
        return x


def main(out: str = "coolcnn.svg") -> None:
    model = CoolCNN().eval()
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad(), dt.capture(model) as g:  # forward only: no autograd graph, no backward
        model(x)

    # the tree: two parallel branches, the node that joins them, then the rest in order
    print(g.tree(depth=1))

    # the same answer as data: the add op reads the outputs of both max_pool calls
    add = next(op for op in g.ops if op.short == "aten::add")
    print("\naten::add reads:", ", ".join(p.call.label for p in add.producers))

    try:
        g.render(out, depth=1)
    except RuntimeError as e:  # graphviz's dot is missing: the DOT source still works
        print(f"\n{e}", file=sys.stderr)
        out = g.render(out.rsplit(".", 1)[0] + ".dot", depth=1)
    print(f"wrote {out}")


if __name__ == "__main__":
    main(*sys.argv[1:2])
