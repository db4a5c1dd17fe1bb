"""The records a capture is made of: ops, module calls, the storages autograd saved, and the phases."""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Union, get_args

from .._text import items, shapes
from ._source import Source
from ._tensors import TensorRef
from ._users import Users

if TYPE_CHECKING:
    import torch.nn as nn

    from ._dtensor import DTensorOp


Phase = Literal["forward", "backward", "recompute", "optimizer"]
"""When an op ran: in the forward (and any code outside the phases below), in autograd's backward
(``loss.backward()``, ``torch.autograd.grad``), recomputing a checkpointed forward inside backward,
or inside a ``torch.optim`` optimizer's ``step``."""

PHASES: tuple[Phase, ...] = get_args(Phase)

PhaseView = Literal["forward", "backward", "all"]
"""What a view (tree, diagrams, summary, viewer) shows of a training step: the forward ops where they
ran, the backward ops (and recompute ops) under the forward call they belong to, or both; the default
``"forward"`` draws a forward-only capture as always. See ``views/_phases.py``."""

PHASE_VIEWS: tuple[PhaseView, ...] = get_args(PhaseView)


@dataclass(frozen=True, slots=True)
class Rare:
    """The fields most ops leave empty, held in one slot of ``Op`` (``None`` when all are empty)."""

    mutated: tuple[TensorRef, ...] = ()
    origin: Call | None = None
    grad_of: Op | None = None
    param: str | None = None
    dtensor: DTensorOp | None = None


_EMPTY = Rare()


def _rare_with(old: Rare, values: dict[str, Any]) -> Rare | None:
    """``old`` with ``values`` set, ``None`` when all five are empty."""
    get = values.get
    rare = Rare(get("mutated", old.mutated), get("origin", old.origin), get("grad_of", old.grad_of),
                get("param", old.param), get("dtensor", old.dtensor))
    return None if rare == _EMPTY else rare


class _RareField:
    """One of ``Op``'s five rare fields, read from (and written as a new) ``op.rare``: its default while
    ``rare`` is ``None``, as most ops have it.

    >>> op = Op(0, "relu", "aten.relu.default", None, (), {}, ())
    >>> op.param, op.rare
    (None, None)
    >>> op.param = "fc.weight"
    >>> op.param, op.rare
    ('fc.weight', Rare(mutated=(), origin=None, grad_of=None, param='fc.weight', dtensor=None))
    >>> op.param = None
    >>> op.rare is None
    True
    """

    __slots__ = ("name", "default")

    def __init__(self, name: str, default: Any) -> None:
        self.name, self.default = name, default

    def __get__(self, op: Op | None, owner: type | None = None) -> Any:
        if op is None:
            return self
        rare = op.rare
        return self.default if rare is None else getattr(rare, self.name)

    def __set__(self, op: Op, value: Any) -> None:
        rare = op.rare
        if rare is None:  # most assignments: nothing to merge (the in-place ops' mutated, above all)
            if value is not None and value != ():
                op.rare = Rare(**{self.name: value})
        else:
            op.rare = _rare_with(rare, {self.name: value})


@dataclass(slots=True, eq=False)
class Op:
    """One ATen op as it ran. Read-only once the capture block has exited.

    ``call`` is the module call running when it ran (a record of time); ``phase`` when it ran;
    ``origin`` the forward call a backward op differentiates or a recompute op recomputes
    (``None`` otherwise), ``grad_of`` the forward op whose autograd node ran it, where it can be
    told, ``param`` the parameter whose ``.grad`` a gradient-accumulation op writes, ``mutated``
    the refs it wrote in place, ``dtensor`` the DTensor-level op it ran for
    (``graph/_dtensor.py``). Those five are empty for most ops and share one slot. ``time``: the seconds
    it took, in a capture with ``timing=True``.
    """

    index: int
    name: str
    target: str
    call: Call
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    inputs: tuple[TensorRef, ...]
    outputs: tuple[TensorRef, ...] = ()
    is_view: bool = False
    producers: tuple[Op, ...] = ()
    _users: tuple[Op, ...] | Users = ()  # ``users``: the graph's ``Users`` until assigned
    phase: Phase = "forward"
    source: Source | None = None
    rare: Rare | None = None
    """``mutated``, ``origin``, ``grad_of``, ``param`` and ``dtensor`` in one record, ``None`` while all are
    empty (read those five by name; ``rare is None`` says at a glance that none is set)."""
    time: float | None = None
    """Seconds the op itself took (``capture(timing=True)``: ``recording/_timing.py``), ``None`` where it was
    not timed (an untimed capture, meta or fake tensors)."""

    mutated = _RareField("mutated", ())
    origin = _RareField("origin", None)
    grad_of = _RareField("grad_of", None)
    param = _RareField("param", None)
    dtensor = _RareField("dtensor", None)

    def _set_rare(self, **values: Any) -> None:
        """Set some of the five rare fields at once (``GraphBuilder`` sets three in one record): a new record,
        as a copy of this op (``dataclasses.replace``) may share the old one; ``None`` again when all are empty."""
        self.rare = _rare_with(self.rare or _EMPTY, values)

    @property
    def users(self) -> tuple[Op, ...]:
        """The ops that list this one as a producer, in the order they ran (found when first read)."""
        users = self._users
        return users if type(users) is tuple else users.of(self)  # type: ignore[union-attr]

    @users.setter
    def users(self, users: tuple[Op, ...]) -> None:
        self._users = users

    @property
    def short(self) -> str:
        """``aten::convolution`` (the overload packet, as profilers print it)."""
        ns, _, rest = self.target.partition(".")
        return f"{ns}::{rest.partition('.')[0]}"

    def __str__(self) -> str:
        args = [_fmt(a) for a in self.args]
        args += [f"{k}={_fmt(v)}" for k, v in self.kwargs.items()]
        outs = shapes([o.shape_text for o in self.outputs]) or "()"
        if len(self.outputs) > 1:
            outs = f"({outs})"
        where = self.call.label
        if self.phase != "forward":
            of = self.origin.label if self.origin is not None else self.param
            where += f" [{self.phase}{f' of {of}' if of else ''}]"
        return f"%{self.name} = {self.target}({', '.join(args)}) -> {outs}  # {where}"

    def __repr__(self) -> str:
        return f"<Op {self.name}: {self.target} in {self.call.label}>"


def _fmt(value: Any) -> str:
    if isinstance(value, TensorRef):
        return value.text
    if isinstance(value, list):
        return "[" + items([_fmt(v) for v in value], limit=8) + "]"
    if isinstance(value, tuple):
        return "(" + items([_fmt(v) for v in value], limit=8) + ("," if len(value) == 1 else "") + ")"
    return repr(value) if isinstance(value, str) else str(value)


Child = Union["Call", Op]


@dataclass(slots=True, eq=False)
class Call:
    """One call of one module instance. A module called three times gives three calls."""

    path: str
    type: str
    index: int
    depth: int
    parent: Call | None
    children: list[Child] = field(default_factory=list)
    ops: list[Op] = field(default_factory=list)
    inputs: tuple[TensorRef, ...] = ()
    outputs: tuple[TensorRef, ...] = ()
    repeat: int = 1
    params: int | None = None
    self_params: int | None = None
    source: Source | None = None
    returned: Any = None
    arguments: Any = None
    """A top-level call's arguments as passed, refs for tensors: ``(((name, value), ...), {keyword: value})``."""
    _module: Any = None

    @property
    def module(self) -> nn.Module | None:
        """The module instance, while it is alive (the graph holds it weakly)."""
        return self._module() if self._module is not None else None

    @property
    def label(self) -> str:
        """``layer1.0.relu#2`` (the call index appears when the module ran more than once)."""
        if self.parent is None:
            return "<capture>"
        name = self.path or self.type
        return f"{name}#{self.index}" if self.repeat > 1 else name

    def walk(self) -> Iterator[Child]:
        """Every call and op below this call, depth first, in the order they ran."""
        for child in self.children:
            yield child
            if isinstance(child, Call):
                yield from child.walk()

    def all_ops(self) -> Iterator[Op]:
        """Every op issued inside this call, including in sub-calls."""
        for child in self.walk():
            if isinstance(child, Op):
                yield child

    @property
    def time(self) -> float | None:
        """Measured seconds of this call's ops and its sub-calls' (``capture(timing=True)``); ``None`` when
        none of them was timed. In a phase view (``views/_phases.py``) the ops the view puts under it. Its own
        ops' sum, then each sub-call's added in order (as ``views/_time_metrics.py`` adds them: the same float)."""
        total = times_sum(self.ops)
        for child in self.children:
            if isinstance(child, Call):
                sub = child.time
                if sub is not None:
                    total = sub if total is None else total + sub
        return total

    @property
    def self_time(self) -> float | None:
        """Measured seconds of the ops this call issued itself, its sub-calls' left out (``None``: none timed)."""
        return times_sum(self.ops)

    def __repr__(self) -> str:
        return f"<Call {self.label} ({self.type})>"


def times_sum(ops: Iterable[Op]) -> float | None:
    """The sum of ``op.time`` over ``ops`` that were timed; ``None`` when none was.

    >>> times_sum([]) is None
    True
    """
    total = 0.0
    timed = False
    for op in ops:
        t = op.time
        if t is not None:
            total += t
            timed = True
    return total if timed else None


@dataclass(frozen=True, slots=True)
class Saved:
    """One storage autograd saved for backward during the capture (``graph.saved``), counted once.

    ``storage`` is the ``TensorRef.storage`` number (``None``: a storage no op of the capture read or
    made), ``bytes`` its byte size (``None`` when symbolic), ``call`` the innermost call running when
    autograd first saved it. Which kind of tensor it holds is its refs' kind (``views/_memory.py``).
    """

    storage: int | None
    bytes: int | None
    call: Call


def op_ranges(root: Call) -> dict[int, range]:
    """``{id(call): range of op indices}`` for ``root`` and every call below it.

    Ops run one at a time, so a call's ops (sub-calls included) are one contiguous range; a call
    that ran no op gets the empty range at the point where it ran.
    """
    out: dict[int, range] = {}
    n = 0

    def visit(call: Call) -> None:
        nonlocal n
        start = n
        for child in call.children:
            if isinstance(child, Call):
                visit(child)
            else:
                n += 1
        out[id(call)] = range(start, n)

    visit(root)
    return out


def new_call(path: str, type_: str, index: int, parent: Call | None, module: Any = None,
             inputs: tuple[TensorRef, ...] = ()) -> Call:
    """A call with no children yet, ``depth`` one below ``parent``'s (every field passed by position:
    the fastest way to build one, as the capture does for each module call)."""
    return Call(path, type_, index, -1 if parent is None else parent.depth + 1, parent, [], [], inputs, (), 1,
                None, None, None, None, None, None if module is None else weakref.ref(module))


def within(call: Call | None, ancestor: Call | None) -> bool:
    """Whether ``call`` is ``ancestor`` or runs inside it (``ancestor`` among its parents).

    >>> root = new_call("", "<capture>", 0, None)
    >>> block = new_call("block", "Block", 0, root)
    >>> within(block, root), within(root, block), within(None, root)
    (True, False, False)
    """
    while call is not None:
        if call is ancestor:
            return True
        call = call.parent
    return False
