"""``capture``: the public context manager, composing a private dispatch mode and the module scope."""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any

import torch
import torch.nn as nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.hooks import RemovableHandle

from .graph import Graph
from .literals import LIMIT
from .dtensor import RUNNING, dtensor_type, faking
from .recorder import Recorder
from .scope import Scope

_graph_task_id = torch._C._current_graph_task_id


ForwardHook = Callable[[Any, tuple[Any, ...], dict[str, Any], Any], None]
"""``(func, args, kwargs, out)``: one forward op, after it ran."""
DTensorHooks = tuple[Callable[[], int], Callable[[int, Any, tuple[Any, ...], dict[str, Any], Any, type], None]]
"""``(begin() -> start, end(start, func, args, kwargs, out, DTensor))`` around one DTensor-level op."""


class OpMode(TorchDispatchMode):
    """Runs every op unchanged, then hands it to ``forward`` (``backward(func)`` while autograd runs backward).

    The one dispatch mode of the package: ``capture`` records through it, ``verify`` probes eager
    runs with it.
    """

    def __init__(self, forward: ForwardHook, backward: Callable[[Any], None] | None = None,
                 dtensor: DTensorHooks | None = None) -> None:
        super().__init__()
        self._forward = forward
        self._backward = backward
        self._dtensor = dtensor
        self._dt = dtensor_type() if dtensor is not None else None  # None: DTensor ops are recorded as ops
        self._inside = False  # this mode is running a DTensor op's local ops

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None) -> Any:
        kwargs = kwargs or {}
        if types and self._dt is not None and self._dt in types and _graph_task_id() == -1:
            return self._dtensor_op(func, args, kwargs)
        out = func(*args, **kwargs)
        if _graph_task_id() == -1:
            if not (RUNNING.depth and faking()):  # DTensor's sharding propagation runs on fake tensors
                self._forward(func, args, kwargs, out)
        elif self._backward is not None:
            self._backward(func)
        return out

    def _dtensor_op(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Runs a DTensor-level op with this mode pushed again: the op comes back, is answered
        ``NotImplemented`` and DTensor runs it, its local ops and redistributions reaching this mode."""
        if self._inside:
            return NotImplemented
        assert self._dtensor is not None
        begin, end = self._dtensor
        start = begin()
        self._inside = True
        RUNNING.depth += 1
        out: Any = ()
        try:
            with self:
                out = func(*args, **kwargs)
        finally:
            self._inside = False
            RUNNING.depth -= 1
            end(start, func, args, kwargs, out, self._dt)
        return out


class capture:  # noqa: N801 - used like a function: ``with capture(model) as g``
    """Record every ATen op run inside the block, and the module call that issued it.

    ``model`` (optional) gives modules their dotted names as ``model.named_modules()`` does
    (the model itself is ``""``); it may also be a plain function, or ``None``. ``source``
    records, for each op, the user-code line that issued it (``op.source``).

    Tensors passed to the first module call of the block (the top-level call) are its inputs
    (``g.inputs``), named by the forward's parameters; keyword tensors (``m(input_ids=ids)``) are
    inputs named by their keyword when ``model`` is that module (a ``with_kwargs`` pre-hook on it
    sees them; without ``model``, they are constants ``_tensor_constantN``). ``constants`` is the
    byte limit per tensor for keeping the values of literal constants, tensors the forward builds
    from Python data (``torch.tensor(0.5)``, ``mask[a:b] = 3``), in ``g.constants`` so that replay
    needs nothing else; 0 keeps none.

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

    def __init__(self, model: Any = None, *, source: bool = True, constants: int = LIMIT) -> None:
        self._model = model
        self._source = source
        self._constants = constants
        self._active: tuple[Recorder, Scope, OpMode, RemovableHandle | None] | None = None

    def __enter__(self) -> Graph:
        if self._active is not None:
            raise RuntimeError(
                "this dispatchtrace.capture is already recording; nest a new one instead: "
                "`with dt.capture(model) as inner:`"
            )
        recorder = Recorder(self._model, source=self._source, constants=self._constants)
        scope = Scope(recorder.enter, recorder.exit, recorder.note)
        keywords = None
        mode = OpMode(recorder.op, recorder.backward_op, (recorder.dtensor_begin, recorder.dtensor_end))
        try:
            keywords = self._watch_keywords(recorder)
            mode.__enter__()
        except BaseException:
            scope.close()
            if keywords is not None:
                keywords.remove()
            raise
        self._active = (recorder, scope, mode, keywords)
        return recorder.graph

    def _watch_keywords(self, recorder: Recorder) -> RemovableHandle | None:
        """The global pre-hook gets no keyword arguments: the model's own ``with_kwargs`` pre-hook does."""
        model = self._model
        if not isinstance(model, nn.Module):
            return None
        thread = threading.get_ident()

        def keywords(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            if kwargs and threading.get_ident() == thread and _graph_task_id() == -1:  # not a recomputation in backward
                recorder.keywords(module, kwargs)

        try:
            return model.register_forward_pre_hook(keywords, with_kwargs=True)
        except RuntimeError:  # a torch.jit.script module takes no Python hooks (nor keyword tensors)
            return None

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        assert self._active is not None
        recorder, scope, mode, keywords = self._active
        self._active = None
        try:
            mode.__exit__(exc_type, exc, tb)
        finally:
            scope.close()
            if keywords is not None:
                keywords.remove()
            recorder.finish(exc)
