"""``capture``: the public context manager, composing a private dispatch mode and the module scope."""

from __future__ import annotations

from types import TracebackType
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .graph import Graph
from .recorder import Recorder
from .scope import Scope

_graph_task_id = torch._C._current_graph_task_id


class _CaptureMode(TorchDispatchMode):
    """Records every op that reaches it, then runs it unchanged."""

    def __init__(self, recorder: Recorder) -> None:
        super().__init__()
        self._recorder = recorder

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if _graph_task_id() == -1:
            self._recorder.op(func, args, kwargs, out)
        else:
            self._recorder.backward_op(func)
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
        self._active: tuple[Recorder, Scope, _CaptureMode] | None = None

    def __enter__(self) -> Graph:
        if self._active is not None:
            raise RuntimeError(
                "this dispatchtrace.capture is already recording; nest a new one instead: "
                "`with dt.capture(model) as inner:`"
            )
        recorder = Recorder(self._model, source=self._source)
        scope = Scope(recorder.enter, recorder.exit)
        mode = _CaptureMode(recorder)
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
