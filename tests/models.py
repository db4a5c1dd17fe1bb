"""Small models and helpers shared by the tests (``from models import CoolCNN, traced``)."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import dispatchtrace as dt
from dispatchtrace._torch import NODE_CREATION_HOOK, reduce_op_readable
from dispatchtrace.models import CoolCNN  # the first seed's model, verbatim

__all__ = ["CoolCNN", "CountOps", "coolcnn", "example", "llama7b", "resnet50", "traced"]


class CountOps(TorchDispatchMode):
    """An independent, empty dispatch mode that only counts the ops it sees."""

    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        self.n += 1
        return func(*args, **(kwargs or {}))


def traced(model: Any, *inputs: Any, grad: bool = True) -> dt.Graph:
    """Capture one call of ``model`` on ``inputs`` (made outside the block, as users do); it must lint."""
    with torch.set_grad_enabled(grad), dt.capture(model) as g:
        model(*inputs)
    g.lint()
    return g


def coolcnn() -> dt.Graph:
    """A capture of CoolCNN on one 1x3x32x32 image, seeded so that it is the same every time."""
    torch.manual_seed(0)
    model = CoolCNN()
    return traced(model, torch.randn(1, 3, 32, 32))


def resnet50() -> dt.Graph:
    """A capture of torchvision's ResNet-50 (weights=None, eval, no_grad) on one seeded 224x224 image."""
    from vision import torchvision

    torch.manual_seed(0)
    return traced(torchvision.models.resnet50(weights=None).eval(), torch.randn(1, 3, 224, 224), grad=False)


@contextmanager
def example(name: str) -> Iterator[ModuleType]:
    """``examples/NAME.py`` imported as a module while the block runs (dataclasses look their module up)."""
    path = Path(__file__).resolve().parents[1] / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[name]


needs_node_hook = pytest.mark.skipif(
    not NODE_CREATION_HOOK,
    reason="needs torch.autograd.graph.node_creation_hook (torch 2.14+): training-step attribution "
           "(origin, grad_of, recomputed calls) and g.saved stand on it",
)
"""For a test of what a torch before 2.14 cannot do (``docs/compatibility.md``)."""

needs_reduce_op = pytest.mark.skipif(
    not reduce_op_readable(),
    reason="this torch's c10d ReduceOp script object has no op() (torch 2.8): a c10d collective's reduce op "
           "cannot be known, so ranks reducing with sum and with max look alike",
)
"""For a test that tells c10d collectives apart by their reduce op."""


def llama7b() -> dt.Graph:
    """A capture of examples/llama_meta.py's 7B Llama-style decoder (32 layers, hidden 4096) on meta, 1 x 2048 tokens."""
    with example("llama_meta") as module, torch.device("meta"):
        model = module.Llama(module.Config()).eval()
    with torch.no_grad(), dt.capture(model) as g:
        model(torch.zeros(1, 2048, dtype=torch.int64, device="meta"))
    return g
