"""Names for modules, parameters and buffers: dotted paths as ``named_modules()`` gives them."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn as nn


class Names:
    """Paths of modules and names of their parameters and buffers, learned as modules appear.

    With a root model, paths are those of ``model.named_modules()`` (root ``""``). A module
    seen that the model does not own is named as ``torch.utils.module_tracker.ModuleTracker``
    names it: its class name, its children below it (``ResNet.layer1``).
    """

    def __init__(self, model: Any = None) -> None:
        self._modules: dict[int, tuple[nn.Module, str]] = {}
        self._tensors: dict[int, tuple[torch.Tensor, str, str]] = {}
        if isinstance(model, nn.Module):
            self._learn(model, "")

    def clear(self) -> None:
        self._modules.clear()
        self._tensors.clear()

    def _learn(self, module: nn.Module, prefix: str) -> None:
        for path, mod in module.named_modules(prefix=prefix, remove_duplicate=False):
            if id(mod) in self._modules:
                continue
            self._modules[id(mod)] = (mod, path)
            dot = f"{path}." if path else ""
            for name, p in mod._parameters.items():
                if p is not None and id(p) not in self._tensors:
                    self._tensors[id(p)] = (p, "parameter", dot + name)
            for name, b in mod._buffers.items():
                if b is not None and id(b) not in self._tensors:
                    self._tensors[id(b)] = (b, "buffer", dot + name)

    def path(self, module: nn.Module) -> str:
        entry = self._modules.get(id(module))
        if entry is None or entry[0] is not module:
            self._learn(module, type(module).__name__)
            entry = self._modules[id(module)]
        return entry[1]

    def tensor(self, t: torch.Tensor) -> tuple[str, str] | None:
        """``("parameter", "layer1.0.conv1.weight")`` for a known parameter or buffer."""
        entry = self._tensors.get(id(t))
        if entry is None or entry[0] is not t:
            return None
        return entry[1], entry[2]
