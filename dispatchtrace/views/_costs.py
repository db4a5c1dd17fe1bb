"""Costs of a capture: FLOPs and bytes per op, per-call totals and parameter counts, computed lazily.

FLOPs come from PyTorch's own formulas (``torch.utils.flop_counter.flop_registry``), evaluated
after the capture on shape-only stand-ins (meta tensors), so the total equals
``FlopCounterMode``'s for the same block, every phase counted (a training step's backward and
optimizer ops too). An op without a formula has ``flops=None``.

>>> import torch, dispatchtrace as dt
>>> lin, x = torch.nn.Linear(4, 2), torch.ones(3, 4)
>>> with dt.capture(lin) as g:
...     y = lin(x)
>>> c = costs(g)
>>> [(op.name, c.op(op).flops, c.op(op).bytes) for op in g.ops]
[('t', None, 32), ('addmm', 48, 24)]
>>> call = c.call(g.calls[0])
>>> call.flops, call.params, call.output_bytes
(48, 10, 24)
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from .._structure import map_leaves
from .._text import human
from ..graph import Call, Op, TensorRef, itemsize, overload_of
from ._labels import call_label

if TYPE_CHECKING:
    from ..graph import Graph

def tensor_bytes(ref: TensorRef) -> int | None:
    """``numel * itemsize`` of a tensor ref; ``None`` when the shape is symbolic or dtype unknown."""
    n, size = ref.numel, itemsize(ref.dtype)
    return None if n is None or size is None else n * size


@dataclass(frozen=True, slots=True)
class OpCost:
    """What one op costs: ``flops`` (``None``: no formula), ``bytes`` of its outputs, per output too."""

    flops: int | None
    bytes: int | None
    output_bytes: tuple[int | None, ...]


@dataclass(frozen=True, slots=True)
class CallCost:
    """What one module call costs.

    ``flops`` / ``bytes`` include every op inside the call (sub-calls too), ``self_flops`` /
    ``self_bytes`` only its direct ops; ``bytes`` counts the outputs of ops that are not views.
    ``flops`` is ``None`` when no op inside has a FLOP formula. ``output_bytes`` is the size of
    the tensors the call returned. ``params`` counts the module's parameters with its children's
    (each tensor once, tied weights included once), ``self_params`` its own only; both ``None``
    when the module is gone and the counts were not saved.
    """

    flops: int | None
    self_flops: int | None
    bytes: int
    self_bytes: int
    output_bytes: int | None
    params: int | None
    self_params: int | None


def _registry() -> dict[Any, Any]:
    from torch.utils.flop_counter import flop_registry  # 0.1 s to import: only when a cost is asked for

    return flop_registry


def _decomposable(overload: Any) -> bool:
    try:
        return bool(overload.has_kernel_for_dispatch_key(torch._C.DispatchKey.CompositeImplicitAutograd))
    except (AttributeError, RuntimeError):
        return False


def _standin(value: Any, device: str | None = None) -> Any:
    """Shape-only copy of a recorded argument: every ``TensorRef`` becomes a meta tensor.

    With ``device`` set (inside a ``FakeTensorMode``), tensors are made on the recorded device
    instead, so kernels that pick their path by device decompose as they did when captured.
    """
    def leaf(v: Any) -> Any:
        if not isinstance(v, TensorRef):
            return v
        if any(not isinstance(s, int) for s in v.shape):
            raise _Symbolic
        dtype = getattr(torch, v.dtype, None)
        if not isinstance(dtype, torch.dtype):
            raise _Symbolic
        return torch.empty(v.shape, dtype=dtype, device=v.device if device else "meta")

    return map_leaves(value, leaf)


class _Symbolic(Exception):
    """A shape or dtype that cannot be rebuilt: no FLOP count."""


def op_flops(op: Op) -> int | None:
    """FLOPs of one op by ``torch.utils.flop_counter``'s formula for its overload packet.

    Ops without a formula that ``FlopCounterMode`` would decompose (a CompositeImplicitAutograd
    kernel) are counted through that decomposition, as it does; any other op gives ``None``.
    """
    overload = overload_of(op.target)
    if overload is None:
        return None
    registry = _registry()
    formula = registry.get(overload.overloadpacket)
    try:
        args = _standin(op.args)
        kwargs = _standin(op.kwargs)
        if formula is not None:
            outs = _masked(overload, op, tuple(_standin(o) for o in op.outputs))
            out = outs[0] if len(outs) == 1 else (outs or None)
            try:
                return int(formula(*args, **kwargs, out_val=out))
            except Exception:  # arguments the formula cannot read (e.g. from an older file): unknown
                return None
        if _decomposable(overload):
            return _decomposed_flops(overload, op)
    except _Symbolic:
        return None
    return None


def _masked(overload: Any, op: Op, outs: tuple[Any, ...]) -> tuple[Any, ...]:
    """The results in their schema positions: a backward op with ``output_mask``
    (``convolution_backward``) returns no tensor where the mask is false, and ``op.outputs`` holds
    only the tensors, so the formula would read grad_weight's shape where it wants grad_input's."""
    returns = overload._schema.returns
    if len(outs) >= len(returns):
        return outs
    names = [a.name for a in overload._schema.arguments]
    if "output_mask" not in names:
        return outs
    i = names.index("output_mask")
    mask = op.args[i] if i < len(op.args) else op.kwargs.get("output_mask")
    if not isinstance(mask, (list, tuple)) or len(mask) != len(returns) or sum(map(bool, mask)) != len(outs):
        return outs
    it = iter(outs)
    return tuple(next(it) if m else None for m in mask)


def _decomposed_flops(overload: Any, op: Op) -> int | None:
    from torch.utils.flop_counter import FlopCounterMode  # 0.1 s to import: only when a cost is asked for

    try:
        with FakeTensorMode():
            args = _standin(op.args, "fake")
            kwargs = _standin(op.kwargs, "fake")
            with FlopCounterMode(display=False) as counter:
                if overload.decompose(*args, **kwargs) is NotImplemented:
                    return None
    except _Symbolic:
        raise
    except Exception:  # a decomposition that cannot run on fake tensors: unknown, not zero
        return None
    counts = counter.get_flop_counts().get("Global", {})
    return counter.get_total_flops() if counts else None


def op_cost(op: Op) -> OpCost:
    """FLOPs and output bytes of one op."""
    sizes = tuple(tensor_bytes(r) for r in op.outputs)
    total = None if any(s is None for s in sizes) else sum(sizes)  # type: ignore[misc]
    return OpCost(op_flops(op), total, sizes)


def _no_flops(target: str) -> bool:
    """Whether ``op_flops`` gives ``None`` for every op of ``target``, whatever its arguments: torch
    does not know it, or it has no formula (in the registry now) and no decomposition."""
    overload = overload_of(target)
    return overload is None or (_registry().get(overload.overloadpacket) is None and not _decomposable(overload))


def cost_key(op: Op) -> Any:
    """Everything ``op_cost`` reads of ``op``: its target, every argument (tensors by shape, dtype
    and device; other values by type and value, floats by ``repr`` so ``-0.0`` is not ``0.0``) and
    its outputs' shapes, dtypes and devices. Ops with equal keys cost the same (a decoder repeats
    each layer's ops); a key may hold an unhashable value, then it cannot be looked up.

    >>> import torch, dispatchtrace as dt
    >>> lin, x = torch.nn.Linear(4, 2), torch.ones(3, 4)
    >>> with dt.capture(lin) as g:
    ...     _ = lin(x), lin(x)
    >>> [cost_key(op) == cost_key(g.ops[1]) for op in g.ops]
    [False, True, False, True]
    """
    args, kwargs = op.args, op.kwargs
    if type(args) is tuple:  # _arg_key(args), its first level inline
        args = (tuple, *[(_REF, x.shape, x.dtype, x.device) if type(x) is TensorRef else x if type(x) is int
                         else _arg_key(x) for x in args])
    else:
        args = _arg_key(args)
    return (op.target, args, _arg_key(kwargs) if kwargs else None,
            tuple([(_REF, r.shape, r.dtype, r.device) for r in op.outputs]))


_REF = object()  # tags a tensor's key: no other value's key equals it
_UNSEEN: Any = object()  # a size not yet in ``Costs._sizes``


def _arg_key(v: Any) -> Any:
    t = type(v)
    if t is TensorRef:
        return (_REF, v.shape, v.dtype, v.device)
    if t is int or t is str or v is None:  # no other key is an int, a str or None
        return v
    if t is tuple or t is list:
        return (t, *[x if type(x) is int else _arg_key(x) for x in v])
    if t is dict:
        return (t, *[(k, _arg_key(x)) for k, x in v.items()])
    if t is float:
        return (t, repr(v))
    if isinstance(v, TensorRef):
        return (_REF, v.shape, v.dtype, v.device)
    return (t, v)


def _add(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return a + b


class Costs:
    """Per-op and per-call costs of one graph, computed on first use and kept (once per distinct ``cost_key``)."""

    def __init__(self, graph: Graph, shared: Costs | None = None) -> None:
        # the root call and the outputs, not the graph: the per-graph cache below holds Costs
        # weakly keyed by the graph, and a value that held its key would keep it alive forever
        self._root = graph.root
        self._outputs = graph.outputs
        self._ops: dict[Op, OpCost] = {}  # (ops hash by identity)
        self._calls: dict[int, CallCost] = {}
        self._by_key: dict[Any, OpCost] = {}
        self._plain: dict[str, bool] = {}  # target -> its ops have no FLOP formula and no decomposition
        self._by_sizes: dict[tuple[int | None, ...], OpCost] = {}  # their costs, by output sizes
        self._sizes: dict[tuple[Any, str], int | None] = {}  # (shape, dtype) -> tensor_bytes
        self._unsized: set[int] = set()  # ids of the calls an unsized write is inside (``sized``)
        # a phase view (``views/_phases.py``) asks its capture's costs for each op it copies
        self._shared, self._source = shared, getattr(graph, "source_op", None)

    def op(self, op: Op) -> OpCost:
        """The cost of one op."""
        return self._ops.get(op) or self._cost(op)

    def _cost(self, op: Op) -> OpCost:
        """``op_cost(op)``, computed once per distinct ``cost_key`` and kept for ``op``; an op whose
        target has no FLOP formula and no decomposition costs its output bytes only, found by their
        sizes without a key."""
        if self._shared is not None and self._source is not None:
            cost = self._ops[op] = self._shared.op(self._source[op])
            return cost
        plain = self._plain.get(op.target)
        if plain is None:
            plain = self._plain[op.target] = _no_flops(op.target)
        if plain:
            known = self._sizes.get  # tensor_bytes, once per distinct shape and dtype
            sizes = tuple([known((r.shape, r.dtype), _UNSEEN) if type(r) is TensorRef else tensor_bytes(r)
                           for r in op.outputs])
            if _UNSEEN in sizes:
                sizes = tuple([self._size(r) if s is _UNSEEN else s for r, s in zip(op.outputs, sizes, strict=True)])
            cost = self._by_sizes.get(sizes)
            if cost is None:
                cost = self._by_sizes[sizes] = OpCost(None, None if None in sizes else sum(sizes), sizes)  # type: ignore[arg-type]
        else:
            key = cost_key(op)
            try:
                cost = self._by_key.get(key)
            except TypeError:  # an unhashable argument
                cost = op_cost(op)
            else:
                if cost is None:
                    cost = self._by_key[key] = op_cost(op)
        self._ops[op] = cost
        return cost

    def _size(self, ref: TensorRef) -> int | None:
        size = self._sizes[(ref.shape, ref.dtype)] = tensor_bytes(ref)
        return size

    def call(self, call: Call) -> CallCost:
        """The cost of one call (``graph.root`` gives the whole capture)."""
        cost = self._calls.get(id(call))
        if cost is None:
            cost = self._calls[id(call)] = self._call(call)
        return cost

    def _call(self, call: Call) -> CallCost:
        flops = self_flops = None
        nbytes = self_bytes = 0
        unsized, known, seen = self._unsized, self._ops.get, False
        for child in call.children:
            if type(child) is not Op and isinstance(child, Call):  # (an op: no call)
                sub = self.call(child)
                if sub.flops is not None:
                    flops = sub.flops if flops is None else flops + sub.flops
                nbytes += sub.bytes
                seen = seen or id(child) in unsized
            else:
                c = known(child) or self._cost(child)
                if c.flops is not None:
                    self_flops = c.flops if self_flops is None else self_flops + c.flops
                if not child.is_view:
                    if c.bytes is not None:
                        self_bytes += c.bytes
                    else:
                        self_bytes += sum(s for s in c.output_bytes if s is not None)
                        seen = True
        if seen:
            unsized.add(id(call))
        outs = [tensor_bytes(r) for r in (self._outputs if call.parent is None else call.outputs)]
        out_bytes = None if any(s is None for s in outs) else sum(outs)  # type: ignore[misc]
        params, own = call.params, call.self_params
        return CallCost(_add(flops, self_flops), self_flops, nbytes + self_bytes, self_bytes, out_bytes, params, own)

    def sized(self, call: Call) -> bool:
        """Whether every tensor an op (not a view) inside ``call`` wrote has a known size, so that
        ``call(call).bytes`` is exact (a symbolic shape makes it unknown)."""
        self.call(call)
        return id(call) not in self._unsized

    @property
    def total(self) -> CallCost:
        """The whole capture: ``params`` counts every called module's parameters once."""
        return self.call(self._root)

    def __str__(self) -> str:
        """The whole capture's FLOPs, bytes written and parameters, then the same for each call one
        level below the top-level calls (the top-level calls themselves when they have none), largest first."""
        def line(label: str, c: CallCost) -> str:
            return (f"{human(c.flops, 'FLOPs'):>12}  {human(c.bytes, 'B'):>8} written  "
                    f"{human(c.params):>7} params  {label}")

        tops = [c for c in self._root.children if isinstance(c, Call)]
        below = [c for t in tops for c in t.children if isinstance(c, Call)] or tops
        rows = sorted(below, key=lambda c: -(self.call(c).flops or 0))
        lines = [line("(the whole capture)", self.total)]
        lines += [line(call_label(c), self.call(c)) for c in rows[:12]]
        if len(rows) > 12:
            lines.append(f"  ... {len(rows) - 12} more calls")
        return "\n".join(lines)

    def __repr__(self) -> str:
        t = self.total
        return f"<Costs {t.flops} FLOPs, {t.bytes} bytes written, {t.params} params>"


def costs(graph: Graph) -> Costs:
    """The (cached) ``Costs`` of a finished capture; a capture still recording is not cached.

    The cache is keyed weakly by the graph, so it goes when the graph goes.
    """
    cached = _CACHE.get(graph)
    if cached is None:
        base = getattr(graph, "base", None)  # a phase view's capture
        cached = Costs(graph, costs(base) if base is not None else None)
        if graph.complete:
            _CACHE[graph] = cached
    return cached


_CACHE: weakref.WeakKeyDictionary[Graph, Costs] = weakref.WeakKeyDictionary()


def total_flops(graph: Graph) -> int:
    """Sum of every op's FLOPs (ops without a formula count nothing): ``FlopCounterMode``'s total."""
    c = costs(graph)
    return sum(f for op in graph.ops if (f := c.op(op).flops) is not None)
