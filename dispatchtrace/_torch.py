"""The one module that wraps torch's private calls: every use of ``torch._C`` and of torch's private
Python helpers the package makes at capture time goes through a name defined here, and every newer
torch API is found here by feature detection (never by comparing version strings), so that
``import dispatchtrace`` works on every torch from the floor in pyproject.toml up.

>>> graph_task_id()  # outside autograd's backward
-1
>>> running_node() is None, fake_mode_running()
(True, False)
>>> NODE_CREATION_HOOK in (True, False)
True
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import torch
from torch._subclasses.fake_tensor import is_fake
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes
from torch.utils._pytree import SUPPORTED_NODES

graph_task_id = torch._C._current_graph_task_id
"""``-1`` outside autograd's backward, else the id of the backward (graph task) running on this thread."""

disable_current_modes = _disable_current_modes
"""A context manager that sets every dispatch mode aside (dispatchtrace's own reads of a tensor are no ops)."""

_NO_MODES = contextlib.nullcontext()
_modes_on_stack = torch._C._len_torch_dispatch_stack


def modes_set_aside() -> Any:
    """``disable_current_modes()`` where a dispatch mode is on the stack, else a context that does nothing (the
    common case inside the capture's own mode, which torch has popped while it runs: 40 µs saved per use)."""
    return _disable_current_modes() if _modes_on_stack() else _NO_MODES

_FAKE = torch._C._TorchDispatchModeKey.FAKE


def running_node() -> Any:
    """The autograd node whose backward runs on this thread now (``None`` outside backward)."""
    return torch._C._current_autograd_node()


def fake_mode_running() -> bool:
    """Whether a ``FakeTensorMode`` is running the op (DTensor's sharding propagation)."""
    return torch._C._get_dispatch_mode(_FAKE) is not None


_node_creation_hook: Any = getattr(torch.autograd.graph, "node_creation_hook", None)
NODE_CREATION_HOOK = _node_creation_hook is not None
"""Whether this torch announces each autograd node it makes (``torch.autograd.graph.node_creation_hook``,
torch 2.14 and newer): what training-step attribution (``origin``, ``grad_of``) and ``g.saved`` stand on."""

NO_NODE_CREATION_HOOK = (f"torch {torch.__version__.split('+')[0]} has no torch.autograd.graph.node_creation_hook "
                         "(torch 2.14+): backward ops carry no forward call (origin, grad_of are None) and g.saved is empty")
"""The note of a capture whose backward ops could not be attributed (one line, in ``g.notes``)."""


def node_creation_hook(fn: Callable[[Any], None]) -> AbstractContextManager[Any] | None:
    """``torch.autograd.graph.node_creation_hook(fn)`` (not entered), or ``None`` on a torch without it."""
    return _node_creation_hook(fn) if _node_creation_hook is not None else None


_hooks_disabled_message: Any = getattr(torch._C._autograd, "_saved_tensors_hooks_get_disabled_error_message", None)
_top_saved: Any = getattr(torch._C._autograd, "_top_saved_tensors_default_hooks", None)


def saved_hooks_disabled() -> bool:
    """Whether saved-tensor hooks are disabled here (inside ``torch.func.grad`` and the other transforms)."""
    return _hooks_disabled_message is not None and _hooks_disabled_message() is not None


def top_saved_hooks() -> Any:
    """The saved-tensor hooks in place now (an enclosing capture's, ``save_on_cpu``), or ``None``
    (also on a torch that cannot say)."""
    return _top_saved(False) if _top_saved is not None else None


CUDA_GRAPH = ("a module was called while a CUDA graph was being captured (torch.cuda.graph): its ops are "
              "recorded as they were captured, and graph.replay() runs no op a capture can see")
"""The note of a capture in which a top-level call ran inside ``torch.cuda.graph``."""


def cuda_graph_capturing() -> bool:
    """Whether the current CUDA stream is capturing a CUDA graph (``False`` before CUDA is initialized)."""
    return torch.cuda.is_initialized() and torch.cuda.is_current_stream_capturing()


def collective_result(t: torch.Tensor) -> torch.Tensor | None:
    """The tensor a functional collective's ``AsyncCollectiveTensor`` wraps (its ``elem``, the collective's
    output), else ``None``. Newer torch wraps it through an op a dispatch mode sees
    (``_c10d_functional._wrap_tensor_autograd``, torch 2.11 and newer); torch 2.10 and older make the
    wrapper in Python (``AsyncCollectiveTensor(elem)``), so a capture first meets it at its first user.
    Not an import of ``torch.distributed``: without that module loaded there is no such tensor."""
    fc = sys.modules.get("torch.distributed._functional_collectives")
    cls = getattr(fc, "AsyncCollectiveTensor", None) if fc is not None else None
    if cls is None or not isinstance(t, cls):
        return None
    elem = getattr(t, "elem", None)
    return elem if isinstance(elem, torch.Tensor) else None


def reduce_op_code(obj: Any) -> int | None:
    """The ``RedOpType`` number of a c10d ``ReduceOp`` as a dispatch mode sees it (a ``torch.ScriptObject``),
    or ``None`` where that object has no ``op()`` to read it (torch 2.8: the reduce op of a c10d
    collective cannot be known from its op; a functional collective names it)."""
    return int(obj.op()) if obj._has_method("op") else None


def reduce_op_readable() -> bool:
    """Whether this torch's c10d ``ReduceOp`` script objects say which reduce op they are (``reduce_op_code``)."""
    try:
        return torch.classes.c10d.ReduceOp()._has_method("op")
    except (RuntimeError, AttributeError):  # a torch built without distributed
        return False


def _detaches_twice() -> bool:
    """Whether a detach run under a dispatch mode reaches it twice (torch 2.8): once as the detach,
    then as a detach of that detach's result, which is what the caller gets; a mode that calls
    ``func`` for a detach hands the mode outside it the same two. Found by running one."""
    seen: list[Any] = []

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
            seen.append(func)
            return func(*args, **(kwargs or {}))

    try:
        t = torch.zeros(())
        with Count():
            t.detach()
    except Exception:  # noqa: BLE001 - a probe that fails must not break ``import dispatchtrace``
        return False
    return seen.count(torch.ops.aten.detach.default) > 1


DETACH = torch.ops.aten.detach.default
DETACH_TWICE = _detaches_twice()
"""Whether this torch sends a dispatch mode each detach twice (``_detaches_twice``): ``OpMode`` records
the second as the first (a detach of a detach's result, met right after it, is one detach)."""


def has_values(t: torch.Tensor) -> bool:
    """False for meta and fake tensors (``FakeTensorMode``): they have shapes, dtypes and strides, no data."""
    return t.device.type != "meta" and not is_fake(t)


def pytree_node(cls: type) -> tuple[Any, Any] | None:
    """``(flatten_fn, unflatten_fn)`` of a type registered with torch's pytree
    (``torch.utils._pytree.register_pytree_node``: Hugging Face's ``ModelOutput``), else ``None``."""
    node = SUPPORTED_NODES.get(cls)
    return None if node is None else (node.flatten_fn, node.unflatten_fn)
