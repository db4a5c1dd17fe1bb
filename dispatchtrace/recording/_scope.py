"""Module scope: which forward module calls are running, through global forward hooks, one thread only."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Literal

import torch
import torch.nn as nn
from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

from .._torch import graph_task_id

Enter = Callable[[nn.Module, tuple[Any, ...]], None]
Exit = Callable[[nn.Module, Any], None]
Hidden = Literal["script", "compiled"]
Note = Callable[[nn.Module, Hidden], None]



def hidden_kind(module: nn.Module) -> Hidden | None:
    """What module hooks cannot see about a call of ``module``: ``"script"`` (a ``torch.jit.script``
    module runs its submodules inside TorchScript, no hook fires for them), ``"compiled"`` (the
    ``OptimizedModule`` that ``torch.compile`` wraps around ``_orig_mod``), else ``None``.

    >>> import torch.nn as nn
    >>> hidden_kind(nn.ReLU()) is None, hidden_kind(torch.compile(nn.ReLU(), backend="eager"))
    (True, 'compiled')
    """
    if isinstance(module, torch.jit.ScriptModule):
        return "script"
    cls = type(module)
    if cls.__name__ == "OptimizedModule" and cls.__module__.startswith("torch._dynamo"):
        return "compiled"
    return None


def hidden_note(kind: Hidden, path: str, module: nn.Module) -> str:
    """The graph's note about a call of ``module`` (at ``path``) that the hooks see only in part.

    >>> m = torch.jit.script(nn.Sequential(nn.ReLU()))
    >>> hidden_note("script", "encoder", m)
    'encoder is a torch.jit.script module: module hooks cannot see the calls inside it, so its ops are all labelled with its own call'
    >>> hidden_note("script", "", m).split(" is ")[0]
    'Sequential'
    """
    if kind == "script":
        name = path or str(getattr(module, "original_name", type(module).__name__))
        return (f"{name} is a torch.jit.script module: module hooks cannot see the calls inside it, "
                f"so its ops are all labelled with its own call")
    name = path or type(getattr(module, "_orig_mod", module)).__name__
    return (f"{name} is torch.compile'd: TorchDynamo does not compile under a dispatch mode, so the capture saw "
            f"the original module's eager ATen ops and calls (paths without '_orig_mod.'), not compiled kernels")


class Scope:
    """Installs a global forward pre-hook and an always-called forward hook, removed on ``close``.

    Both hooks ignore every thread but the one that created the scope, and every call made while
    autograd runs backward (``torch._C._current_graph_task_id() != -1``: activation checkpointing
    recomputing a forward), so ``enter``/``exit`` see the forward's calls only. The exit hook runs
    also when the forward raises (``always_call=True``), with ``output=None``. The ``OptimizedModule``
    of ``torch.compile`` is transparent (its ``_orig_mod``'s call is the one reported); ``note`` hears,
    once per module, of each call the hooks see only in part (``hidden_kind``). ``recompute``, an
    ``(enter, exit)`` pair, hears of the calls made while autograd runs backward, on any thread
    (``training.Phases``): one pair of global hooks serves both, so a forward call pays for one.
    """

    def __init__(self, enter: Enter, exit: Exit, note: Note | None = None, *,
                 recompute: tuple[Enter, Exit] | None = None) -> None:
        self._enter = enter
        self._exit = exit
        self._note = note
        self._recompute = recompute
        self._kinds: dict[type, Hidden | None] = {}
        self._noted: set[int] = set()
        self._thread = threading.get_ident()
        self._handles = [
            register_module_forward_pre_hook(self._pre),
            register_module_forward_hook(self._post, always_call=True),
        ]

    def _kind(self, module: nn.Module) -> Hidden | None:
        cls = type(module)
        try:
            return self._kinds[cls]
        except KeyError:
            kind = self._kinds[cls] = hidden_kind(module)
            return kind

    def _pre(self, module: nn.Module, args: tuple[Any, ...]) -> None:
        if graph_task_id() != -1:
            if self._recompute is not None:
                self._recompute[0](module, args)
            return
        if threading.get_ident() != self._thread:
            return
        try:
            kind = self._kinds[type(module)]
        except KeyError:
            kind = self._kind(module)
        if kind is None:
            self._enter(module, args)
            return
        if kind != "compiled":
            self._enter(module, args)
        if id(module) not in self._noted:
            self._noted.add(id(module))
            if self._note is not None:
                self._note(module, kind)

    def _post(self, module: nn.Module, args: tuple[Any, ...], output: Any) -> None:
        if graph_task_id() != -1:
            if self._recompute is not None:
                self._recompute[1](module, output)
            return
        if threading.get_ident() == self._thread:
            try:
                kind = self._kinds[type(module)]
            except KeyError:
                kind = self._kind(module)
            if kind != "compiled":
                self._exit(module, output)

    def close(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
