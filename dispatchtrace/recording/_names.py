"""Names for modules, parameters and buffers: dotted paths as ``named_modules()`` gives them."""

from __future__ import annotations

import sys
from types import BuiltinFunctionType, FunctionType
from typing import Any

import torch
import torch.nn as nn

from ._scope import hidden_kind
from ._source import is_internal


class Names:
    """Paths of modules and names of their parameters and buffers, learned as modules appear.

    With a root model, paths are those of ``model.named_modules()`` (root ``""``). A module
    seen that the model does not own is named after what it wraps, else where it is called
    (``outside_name``), its children below it; without a root model every module is named as
    ``torch.utils.module_tracker.ModuleTracker`` names it: its class name, its children below it
    (``ResNet.layer1``). A ``torch.compile``
    wrapper (``OptimizedModule``) and its ``_orig_mod`` share one path: ``_orig_mod.`` is no part
    of any path (``torch.compile(model)`` gives the paths of ``model``).
    """

    def __init__(self, model: Any = None) -> None:
        self._modules: dict[int, tuple[nn.Module, str]] = {}
        self._tensors: dict[int, tuple[torch.Tensor, str, str]] = {}
        self.paths = self._modules
        """``id -> (module, path)`` of the modules learned so far (check ``is``; else ask ``path``)."""
        self.by_id = self._tensors
        """``id -> (tensor, kind, name)`` of the parameters and buffers learned so far (check ``is``)."""
        self._rooted = isinstance(model, nn.Module)
        if self._rooted:
            self._learn(model, "")

    def clear(self) -> None:
        self._modules.clear()
        self._tensors.clear()

    def _learn(self, module: nn.Module, prefix: str) -> None:
        """Every module below ``module`` (``prefix`` its path) and its parameters and buffers, first
        path first, in the order of ``module.named_modules(prefix=prefix, remove_duplicate=False)``;
        the ``_orig_mod`` of a ``torch.compile`` wrapper at the wrapper's own path. One walk, no
        generator per level (a model's tree is walked once per capture)."""
        modules, tensors = self._modules, self._tensors
        compiled: dict[type, bool] = {}
        sharded = _SHARDED
        todo = [(prefix, module)]
        pop, push = todo.pop, todo.append
        while todo:
            path, mod = pop()
            if id(mod) in modules:  # met before under another path: so was everything below it
                continue
            modules[id(mod)] = (mod, path)
            dot = f"{path}." if path else ""
            for name, p in mod._parameters.items():
                if p is not None and id(p) not in tensors:
                    tensors[id(p)] = (p, "parameter", dot + name)
                    cls = type(p)
                    shards = sharded.get(cls)
                    if shards is None:
                        shards = sharded[cls] = cls.__name__ in ("DTensor", "Parameter") and hasattr(cls, "to_local")
                    if shards:  # a DTensor parameter: its local ops read this rank's shard
                        local = getattr(p, "_local_tensor", None)
                        if isinstance(local, torch.Tensor):
                            tensors.setdefault(id(local), (local, "parameter", dot + name))
            for name, b in mod._buffers.items():
                if b is not None and id(b) not in tensors:
                    tensors[id(b)] = (b, "buffer", dot + name)
            children = mod._modules
            if children:
                cls = type(mod)
                wrapper = compiled.get(cls)
                if wrapper is None:
                    wrapper = compiled[cls] = hidden_kind(mod) == "compiled"
                if len(children) == 1:
                    for name, child in children.items():
                        if child is not None:
                            push((path if wrapper and name == "_orig_mod" else dot + name, child))
                else:
                    below = [(path if wrapper and name == "_orig_mod" else dot + name, child)
                             for name, child in children.items() if child is not None]
                    below.reverse()  # popped in order
                    todo += below

    def path(self, module: nn.Module) -> str:
        entry = self._modules.get(id(module))
        if entry is None or entry[0] is not module:
            orig = module._modules.get("_orig_mod") if hidden_kind(module) == "compiled" else None
            if orig is not None:  # a torch.compile wrapper of a module: its path is its module's
                self._modules[id(module)] = (module, self.path(orig))
                return self._modules[id(module)][1]
            self._learn(module, outside_name(module, sys._getframe(1)) if self._rooted else type(module).__name__)
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


def tensor_attribute(module: Any, path: str, t: torch.Tensor) -> str | None:
    """Where ``module`` (at ``path``) holds ``t`` as a plain attribute, directly or in a list, tuple or dict
    (``rpn.anchor_generator.cell_anchors[0]``); ``None`` if it does not.

    >>> m = torch.nn.Module()
    >>> m.anchors = [torch.zeros(1), torch.ones(1)]
    >>> tensor_attribute(m, "rpn", m.anchors[1]), tensor_attribute(m, "", torch.ones(1))
    ('rpn.anchors[1]', None)
    """
    dot = f"{path}." if path else ""
    for name, value in getattr(module, "__dict__", {}).items():
        if value is t:
            return dot + name
        items = enumerate(value) if isinstance(value, (list, tuple)) else value.items() if isinstance(value, dict) else ()
        for key, v in items:
            if v is t:
                return f"{dot}{name}[{key!r}]"
    return None


_HOLDERS = ("func", "fn", "function", "_func", "_fn", "__wrapped__")
"""Where a module that wraps one function holds it: an attribute, else a free variable of its ``forward``."""


def wrapped_function(module: nn.Module) -> str | None:
    """The name of the function ``module`` wraps, where it exposes one: an attribute holding it
    (``module.func``, ``__wrapped__``, ...), else a function its class's ``forward`` closes over
    (the ``kernels`` package's ``Func``, built around ``apply_rotary_pos_emb``); ``None`` otherwise."""
    found = []
    state = module.__dict__
    for attr in _HOLDERS:
        found.append((attr, state.get(attr)))
    forward = getattr(type(module), "forward", None)
    closure, code = getattr(forward, "__closure__", None), getattr(forward, "__code__", None)
    if closure and code is not None:
        cells = []
        for var, cell in zip(code.co_freevars, closure, strict=False):
            try:
                cells.append((var, cell.cell_contents))
            except ValueError:  # an empty cell
                continue
        found += sorted(cells, key=lambda c: (c[0] not in _HOLDERS, _HOLDERS.index(c[0]) if c[0] in _HOLDERS else 0))
    for _, value in found:
        name = getattr(value, "__name__", None) if isinstance(value, (FunctionType, BuiltinFunctionType)) else None
        if name is not None and name.isidentifier() and name != "forward":
            return name
    return None


def call_site_name(module: nn.Module, frame: Any) -> str | None:
    """The name ``module`` is called by in the first frame outside torch and dispatchtrace above ``frame``:
    a local or global variable holding it, else an attribute of the caller's ``self``; ``None`` if none."""
    while frame is not None and is_internal(frame.f_code.co_filename):
        frame = frame.f_back
    if frame is None:
        return None
    local = frame.f_locals
    for scope in (local, getattr(local.get("self"), "__dict__", {}), getattr(local.get("self"), "_modules", {}),
                  frame.f_globals):
        for name, value in scope.items():
            if value is module and name != "self" and isinstance(name, str) and name.isidentifier():
                return name
    return None


def outside_name(module: nn.Module, frame: Any = None) -> str:
    """How a module the model does not own is named: the function it wraps (``wrapped_function``), else
    the name it is called by (``call_site_name``, from ``frame`` up), else its class name.

    >>> import torch
    >>> def gelu_tanh(x):
    ...     return torch.nn.functional.gelu(x, approximate="tanh")
    >>> def as_module(fn):  # as the kernels package's use_kernel_forward_from_hub does
    ...     class Func(torch.nn.Module):
    ...         def forward(self, *args):
    ...             return fn(*args)
    ...     return Func()
    >>> outside_name(as_module(gelu_tanh)), outside_name(torch.nn.ReLU())
    ('gelu_tanh', 'ReLU')
    """
    return wrapped_function(module) or (call_site_name(module, frame) if frame is not None else None) or type(module).__name__


_SHARDED: dict[type, bool] = {}
"""Per parameter type: whether it is a DTensor (parameter), whose ``_local_tensor`` is this rank's shard."""
