"""``capture``: the public context manager, composing a private dispatch mode and the module scope."""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .graph import Graph
from .recorder import Recorder
from .scope import Scope

_graph_task_id = torch._C._current_graph_task_id


ForwardHook = Callable[[Any, tuple[Any, ...], dict[str, Any], Any], None]
"""``(func, args, kwargs, out)``: one forward op, after it ran."""


class OpMode(TorchDispatchMode):
    """Runs every op unchanged, then hands it to ``forward`` (``backward(func)`` while autograd runs backward).

    The one dispatch mode of the package: ``capture`` records through it, ``verify`` probes eager
    runs with it.
    """

    def __init__(self, forward: ForwardHook, backward: Callable[[Any], None] | None = None) -> None:
        super().__init__()
        self._forward = forward
        self._backward = backward

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if _graph_task_id() == -1:
            self._forward(func, args, kwargs, out)
        elif self._backward is not None:
            self._backward(func)
        return out


class capture:  # noqa: N801 - used like a function: ``with capture(model) as g``
    """Record every ATen op run inside the block, and the module call that issued it.

    ``model`` (optional) gives modules their dotted names as ``model.named_modules()`` does
    (the model itself is ``""``); it may also be a plain function, or ``None``. ``source``
    records, for each op, the user-code line that issued it (``op.source``).

    >>> import torch, dispatchtrace as dt
    >>> lin, x = torch.nn.Linear(4, 2), torch.ones(1, 4)
    >>> with dt.capture(lin) as g:
    ...     y = lin(x)
    >>> print(g)
    %t = aten.t.default(weight) -> f32[4, 2]  # Linear
    %addmm = aten.addmm.default(bias, input, %t) -> f32[1, 2]  # Linear
    >>> [c.type for c in g.calls]
    ['Linear']
    """

    def __init__(self, model: Any = None, *, source: bool = True) -> None:
        self._model = model
        self._source = source
        self._active: tuple[Recorder, Scope, OpMode] | None = None

    def __enter__(self) -> Graph:
        if self._active is not None:
            raise RuntimeError(
                "this dispatchtrace.capture is already recording; nest a new one instead: "
                "`with dt.capture(model) as inner:`"
            )
        recorder = Recorder(self._model, source=self._source)
        scope = Scope(recorder.enter, recorder.exit, recorder.note)
        mode = OpMode(recorder.op, recorder.backward_op)
        try:
            mode.__enter__()
        except BaseException:
            scope.close()
            raise
        self._active = (recorder, scope, mode)
        return recorder.graph

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        assert self._active is not None
        recorder, scope, mode = self._active
        self._active = None
        try:
            mode.__exit__(exc_type, exc, tb)
        finally:
            scope.close()
            recorder.finish(exc)
