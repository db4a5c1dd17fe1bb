"""``capture``: the public context manager, composing a private dispatch mode and the module scope."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Any, Literal, get_args

import torch.nn as nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.hooks import RemovableHandle

from .._collector import Paused
from .._torch import DETACH, DETACH_TWICE, NODE_CREATION_HOOK, graph_task_id
from ..graph import Graph
from ._dtensor import RUNNING, dtensor_type, faking
from ._keep import KEEP_BYTES, Keep, check_keep
from ._literals import CONSTANTS_LIMIT
from ._recorder import Recorder
from ._saved import SavedHooks
from ._scope import Scope
from ._stats import Extra, extras
from ._timing import Timer
from ._training import Phases

_NO_KWARGS: dict[str, Any] = {}  # the kwargs of every op called without any: one dict, read only, not one per op


Values = Literal["none", "stats"]
"""What ``capture(values=...)`` takes of each op's results: nothing, or their statistics (``Stats``, in ``g.stats``)."""
VALUES: tuple[Values, ...] = get_args(Values)

OpHook = Callable[[Any, tuple[Any, ...], dict[str, Any], Any], Any]
"""``(func, args, kwargs, out)``: one op, after it ran (what it returns is ignored)."""


_NOT_SAVED = ("saved-tensor hooks are disabled where the capture began (inside torch.func.grad?): "
              "what autograd saved for backward was not recorded (g.saved is empty)")


_REFUSED_HOOKS = "support saved tensor hooks"
"""What torch.func's transforms say when saved-tensor hooks are set (``torch._functorch.vmap``)."""
_PASS_SAVED_FALSE = ("dispatchtrace: the capture's saved-tensor hooks (which record g.saved) are set; "
                     "capture with dt.capture(model, saved=False) to run torch.func.grad, vjp, jacrev or hessian inside it")

DTensorHooks = tuple[Callable[[], int], Callable[[int, Any, tuple[Any, ...], dict[str, Any], Any, type], None]]
"""``(begin() -> start, end(start, func, args, kwargs, out, DTensor))`` around one DTensor-level op."""


class OpMode(TorchDispatchMode):
    """Runs every op unchanged, then hands it to ``forward``, or to ``backward`` while autograd's
    engine runs a backward (``torch._C._current_graph_task_id() != -1``) when one is given.

    The one dispatch mode of the package: ``capture`` records through it, ``verify`` probes eager
    runs with it. ``ours(func, args, out)`` says which backward op ran only because the capture's own
    saved-tensor hooks are set (``saved.SavedHooks.ours``): that one is not handed on.

    On a torch that sends each detach twice (``DETACH_TWICE``, torch 2.8) the second, a detach of the
    result of the detach met just before it, is not handed on: ``alias(result, first_result)`` makes
    its result the first's (one detach, as newer torch sends; so ``t.detach().detach()`` is one too).
    ``before(func, args, kwargs)``, when given, is called before each op runs (``values="stats"``: the values
    an op writes in place, as it reads them).
    """

    def __init__(self, forward: OpHook, backward: OpHook | None = None,
                 ours: Callable[[Any, tuple[Any, ...], Any], bool] | None = None,
                 dtensor: DTensorHooks | None = None,
                 alias: Callable[[Any, Any], None] | None = None, timer: Timer | None = None,
                 before: Callable[[Any, tuple[Any, ...], dict[str, Any]], None] | None = None) -> None:
        super().__init__()
        self._timer = timer  # capture(timing=True): runs each op and times it (the hooks' work is not in it)
        self._before = before  # called before each op runs (the stats of what it will write in place)
        self._alias = alias
        self._detached: Any = None  # DETACH_TWICE: the result of the op before, when it was a detach
        self._forward = forward
        self._backward = backward or forward
        self._ours = ours
        self._dtensor = dtensor
        self._dt = dtensor_type() if dtensor is not None else None  # None: DTensor ops are recorded as ops
        self._inside = False  # this mode is running a DTensor op's local ops

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None) -> Any:
        if not kwargs:
            kwargs = _NO_KWARGS
        if self._dt is not None and self._dt in types:  # in backward too: TP's backward is DTensor ops
            return self._dtensor_op(func, args, kwargs)
        if self._before is not None:  # before the timed span: the capture's bookkeeping is never in an op's time
            self._before(func, args, kwargs)
        timer = self._timer
        out = func(*args, **kwargs) if timer is None else timer.run(func, args, kwargs)
        if DETACH_TWICE:
            before, self._detached = self._detached, out if func is DETACH else None
            if before is not None and func is DETACH and args[0] is before:  # torch's second send of one detach
                if self._alias is not None:
                    self._alias(out, before)
                return out
        if RUNNING.depth and faking():  # DTensor's sharding propagation runs on fake tensors
            return out
        if graph_task_id() == -1:
            op = self._forward(func, args, kwargs, out)
        elif self._ours is None or not self._ours(func, args, out):
            op = self._backward(func, args, kwargs, out)
        else:
            return out
        if timer is not None:
            timer.took(op)
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
    byte limit per tensor for keeping the values of constants, tensors the forward builds from
    Python data (``torch.tensor(0.5)``, ``mask[a:b] = 3``) and other tensors from outside the block
    (a plain tensor attribute: cached anchors), in ``g.constants`` so that replay needs nothing else;
    0 keeps none. ``saved`` records what autograd saves for backward, per call
    (``g.saved``, ``g.memory()``), through ``torch.autograd.graph.saved_tensors_hooks``; pass
    ``saved=False`` to run ``torch.func.grad`` (and ``vjp``, ``jacrev``, ``hessian``) inside the
    block, which refuse to run while such hooks are set.

    ``values="stats"`` takes, for every tensor an op returns or writes (its value after the op), the
    counts of NaN, +Inf and -Inf, the min, max and L2 norm (``Stats``, in ``g.stats`` by ref
    id; ``g.first_nonfinite()`` finds the op that made a NaN), in the dispatch path, keeping no tensor;
    meta and fake tensors have none. ``stats`` adds what the default leaves out (``Extra``): ``"mean"``,
    ``"zeros"`` (exact zero counts) and ``"fingerprint"`` (a hash of each value's bits: ``Stats.bitwise_equal``). On a GPU the
    stats stay on the device until the block ends (no synchronisation per op). ``keep`` keeps full copies, detached and on the CPU, of the results
    of the ops and the outputs of the calls it matches (globs of op targets or names and call paths or
    labels, a list of them, or a predicate of the op or call): ``g.value(op)``; ``keep_bytes`` is their
    budget, and a copy that would pass it raises ``KeepBudgetError`` instead of being made.

    ``timing=True`` measures each op's own time, ``op.time`` in seconds (``call.time``, ``call.self_time``,
    ``g.time``): the wall clock around the op's kernel call on the CPU, CUDA events on the op's stream read
    once when the block ends; the capture's bookkeeping is never in it. Ops on meta or fake tensors run
    nothing: their time is ``None`` (a note says so). See ``docs/time.md``.

    Python's cyclic garbage collector is paused inside the block and restored as it was on exit,
    also when the block raises (``collector.Paused``): the graph's many long-lived records would
    make its full collections cost more with every op. Memory freed by reference counting (tensors,
    as usual) is freed meanwhile; reference cycles the model makes wait for the block's end.

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

    def __init__(self, model: Any = None, *, source: bool = True, constants: int = CONSTANTS_LIMIT, saved: bool = True,
                 values: Values = "none", keep: Keep = None, keep_bytes: int = KEEP_BYTES,
                 stats: Iterable[Extra] = (), timing: bool = False) -> None:
        if values not in VALUES:
            raise ValueError(f"values={values!r} is not one of {', '.join(map(repr, VALUES))}: \"stats\" takes the "
                             f"statistics of every op's results (g.stats), \"none\" keeps no value")
        check_keep(keep, keep_bytes)
        self._stats = extras(stats, values)
        self._values = values
        self._keep = keep
        self._keep_bytes = keep_bytes
        self._model = model
        self._saved = saved
        self._source = source
        self._constants = constants
        self._timer = Timer() if timing else None
        self._active: tuple[Recorder, Scope, Phases, OpMode, RemovableHandle | None, SavedHooks] | None = None
        self._collector = Paused()

    def __enter__(self) -> Graph:
        if self._active is not None:
            raise RuntimeError(
                "this dispatchtrace.capture is already recording; nest a new one instead: "
                "`with dt.capture(model) as inner:`"
            )
        self._collector.start()
        keywords = scope = phases = saved = None
        try:
            recorder = Recorder(self._model, source=self._source, constants=self._constants, values=self._values,
                                keep=self._keep, keep_bytes=self._keep_bytes, stats=self._stats)
            phases = Phases(recorder)
            scope = Scope(recorder.enter, recorder.exit, recorder.note,
                          recompute=(phases.recompute_enter, phases.recompute_exit))
            saved = SavedHooks(recorder.stack, recorder.tracker.storage_id, recorder.tracker.alias)
            mode = OpMode(recorder.op, phases.backward_op, saved.ours, (recorder.dtensor_begin, recorder.dtensor_end),
                          recorder.tracker.alias, self._timer, recorder.before)
            recorder.graph.timed = self._timer is not None
            phases.open()
            keywords = self._watch_keywords(recorder)
            if self._saved and not saved.open() and NODE_CREATION_HOOK:  # else noted at the first backward op
                recorder.builder.add_note(_NOT_SAVED)
            mode.__enter__()
        except BaseException:
            try:
                for part in (saved, scope, phases):
                    if part is not None:
                        part.close()
                if keywords is not None:
                    keywords.remove()
            finally:
                self._collector.stop()
            raise
        self._active = (recorder, scope, phases, mode, keywords, saved)
        return recorder.graph

    def _watch_keywords(self, recorder: Recorder) -> RemovableHandle | None:
        """The global pre-hook gets no keyword arguments: the model's own ``with_kwargs`` pre-hook does."""
        model = self._model
        if not isinstance(model, nn.Module):
            return None
        thread = threading.get_ident()

        def keywords(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            if kwargs and threading.get_ident() == thread and graph_task_id() == -1:  # not a recomputation in backward
                recorder.keywords(module, kwargs)

        try:
            return model.register_forward_pre_hook(keywords, with_kwargs=True)
        except RuntimeError:  # a torch.jit.script module takes no Python hooks (nor keyword tensors)
            return None

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        assert self._active is not None
        recorder, scope, phases, mode, keywords, saved = self._active
        self._active = None
        if exc is not None and self._saved and _REFUSED_HOOKS in str(exc):
            exc.add_note(_PASS_SAVED_FALSE)
        try:
            try:
                mode.__exit__(exc_type, exc, tb)
            finally:
                try:
                    saved.close()
                    scope.close()
                    phases.close()
                finally:
                    if keywords is not None:
                        keywords.remove()
                    recorder.builder.set_saved(saved.records())  # before finish, which forgets the storages
                    if self._timer is not None:
                        self._timer.finish(recorder.builder)
                    recorder.finish(exc)
        finally:
            self._collector.stop()
