"""Module scope: which module calls are running, through global forward hooks, one thread only."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import torch.nn as nn
from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

Enter = Callable[[nn.Module, tuple[Any, ...]], None]
Exit = Callable[[nn.Module, Any], None]


class Scope:
    """Installs a global forward pre-hook and an always-called forward hook, removed on ``close``.

    Both hooks ignore every thread but the one that created the scope. The exit hook runs also
    when the forward raises (``always_call=True``), with ``output=None``.
    """

    def __init__(self, enter: Enter, exit: Exit) -> None:
        self._enter = enter
        self._exit = exit
        self._thread = threading.get_ident()
        self._handles = [
            register_module_forward_pre_hook(self._pre),
            register_module_forward_hook(self._post, always_call=True),
        ]

    def _pre(self, module: nn.Module, args: tuple[Any, ...]) -> None:
        if threading.get_ident() == self._thread:
            self._enter(module, args)

    def _post(self, module: nn.Module, args: tuple[Any, ...], output: Any) -> None:
        if threading.get_ident() == self._thread:
            self._exit(module, output)

    def close(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
