"""Names for modules, parameters and buffers: dotted paths as ``named_modules()`` gives them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
import torch.nn as nn

from .scope import hidden_kind


class Names:
    """Paths of modules and names of their parameters and buffers, learned as modules appear.

    With a root model, paths are those of ``model.named_modules()`` (root ``""``). A module
    seen that the model does not own is named as ``torch.utils.module_tracker.ModuleTracker``
    names it: its class name, its children below it (``ResNet.layer1``). A ``torch.compile``
    wrapper (``OptimizedModule``) and its ``_orig_mod`` share one path: ``_orig_mod.`` is no part
    of any path (``torch.compile(model)`` gives the paths of ``model``).
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
        for path, mod in _walk(module, prefix):
            if id(mod) in self._modules:
                continue
            self._modules[id(mod)] = (mod, path)
            dot = f"{path}." if path else ""
            for name, p in mod._parameters.items():
                if p is not None and id(p) not in self._tensors:
                    self._tensors[id(p)] = (p, "parameter", dot + name)
                    local = _local_shard(p)
                    if local is not None:  # a DTensor parameter: its local ops read this rank's shard
                        self._tensors.setdefault(id(local), (local, "parameter", dot + name))
            for name, b in mod._buffers.items():
                if b is not None and id(b) not in self._tensors:
                    self._tensors[id(b)] = (b, "buffer", dot + name)

    def path(self, module: nn.Module) -> str:
        entry = self._modules.get(id(module))
        if entry is None or entry[0] is not module:
            orig = module._modules.get("_orig_mod") if hidden_kind(module) == "compiled" else None
            if orig is not None:  # a torch.compile wrapper of a module: its path is its module's
                self._modules[id(module)] = (module, self.path(orig))
                return self._modules[id(module)][1]
            self._learn(module, type(module).__name__)
            entry = self._modules[id(module)]
        return entry[1]

    def swapped(self, module: nn.Module | None, t: torch.Tensor) -> tuple[str, str] | None:
        """A parameter or buffer ``module`` holds now that was not there when it was learned (FSDP2
        swaps its sharded parameters for unsharded ones around each forward): named, else ``None``."""
        entry = self._modules.get(id(module)) if module is not None else None
        if entry is None or entry[0] is not module:
            return None
        dot = f"{entry[1]}." if entry[1] else ""
        for kind, table in (("parameter", module._parameters), ("buffer", module._buffers)):
            for name, value in table.items():
                if value is t:
                    self._tensors[id(t)] = (t, kind, dot + name)
                    return kind, dot + name
        return None

    def tensor(self, t: torch.Tensor) -> tuple[str, str] | None:
        """``("parameter", "layer1.0.conv1.weight")`` for a known parameter or buffer."""
        entry = self._tensors.get(id(t))
        if entry is None or entry[0] is not t:
            return None
        return entry[1], entry[2]


def _local_shard(p: torch.Tensor) -> torch.Tensor | None:
    """This rank's shard of a DTensor parameter (``None`` for any other tensor)."""
    if type(p).__name__ not in ("DTensor", "Parameter") or not hasattr(type(p), "to_local"):
        return None
    local = getattr(p, "_local_tensor", None)
    return local if isinstance(local, torch.Tensor) else None


def _walk(module: nn.Module, prefix: str) -> Iterator[tuple[str, nn.Module]]:
    """``module.named_modules(prefix=prefix, remove_duplicate=False)``, with the ``_orig_mod`` of a
    ``torch.compile`` wrapper at the wrapper's own path."""
    yield prefix, module
    compiled = hidden_kind(module) == "compiled"
    for name, child in module._modules.items():
        if child is None:
            continue
        if compiled and name == "_orig_mod":
            yield from _walk(child, prefix)
        else:
            yield from _walk(child, f"{prefix}.{name}" if prefix else name)
