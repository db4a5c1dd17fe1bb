"""Seed question 2: every layer call of ResNet-50 in the order it ran, reused modules included.

Each Bottleneck owns one ``self.relu`` and calls it three times; ``named_modules()`` lists it
once, a capture lists each call: ``layer1.0.relu#0``, ``#1``, ``#2``.

Run: python examples/resnet_calls.py
"""

import torch
import torchvision

import dispatchtrace as dt


def main() -> None:
    model = torchvision.models.resnet50(weights=None).eval()
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad(), dt.capture(model) as g:
        model(x)

    relu_modules = [name for name, m in model.named_modules() if isinstance(m, torch.nn.ReLU)]
    relu_calls = [c for c in g.calls if c.type == "ReLU"]
    print(f"named_modules() has {len(relu_modules)} ReLU modules; the forward pass made {len(relu_calls)} ReLU calls:")
    for i, call in enumerate(relu_calls):
        shape = ", ".join(t.label for t in call.outputs)
        print(f"{i:>3}  {call.path} #{call.index}  {shape}")

    leaves = [c for c in g.calls if not any(isinstance(k, dt.Call) for k in c.children)]
    print(f"\n{len(g.calls)} module calls in all, {len(leaves)} of them leaf layers; the first ten leaf layers:")
    for call in leaves[:10]:
        print(f"     {call.label} ({call.type})")


if __name__ == "__main__":
    main()
