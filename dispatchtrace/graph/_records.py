"""The records a capture is made of: ops, module calls, the storages autograd saved, and the phases."""

from __future__ import annotations

import weakref
from collections.abc import Iterator
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


@dataclass(slots=True, eq=False)
class Op:
    """One ATen op as it ran. Read-only once the capture block has exited.

    ``call`` is the module call running when it ran (a record of time); ``phase`` when it ran;
    ``origin`` the forward call a backward op differentiates or a recompute op recomputes
    (``None`` otherwise), ``grad_of`` the forward op whose autograd node ran it, where it can be
    told, ``param`` the parameter whose ``.grad`` a gradient-accumulation op writes, ``mutated``
    the refs it wrote in place, ``dtensor`` the DTensor-level op it ran for
    (``graph/_dtensor.py``). Those five are empty for most ops and share one slot.
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

    def set_rare(self, **values: Any) -> None:
        """Set some of the five rare fields (``GraphBuilder`` sets them): a new record, as a copy of this
        op (``dataclasses.replace``) may share the old one; ``None`` again when all are empty."""
        old = self.rare or _EMPTY
        get = values.get
        rare = Rare(get("mutated", old.mutated), get("origin", old.origin), get("grad_of", old.grad_of),
                     get("param", old.param), get("dtensor", old.dtensor))
        self.rare = None if rare == _EMPTY else rare

    @property
    def mutated(self) -> tuple[TensorRef, ...]:
        rare = self.rare
        return () if rare is None else rare.mutated

    @mutated.setter
    def mutated(self, value: tuple[TensorRef, ...]) -> None:
        if self.rare is None:  # the one rare field capture sets often (in-place ops): no merge to do
            self.rare = Rare(value) if value else None
        else:
            self.set_rare(mutated=value)

    @property
    def origin(self) -> Call | None:
        rare = self.rare
        return None if rare is None else rare.origin

    @origin.setter
    def origin(self, value: Call | None) -> None:
        if value is not None or self.rare is not None:
            self.set_rare(origin=value)

    @property
    def grad_of(self) -> Op | None:
        rare = self.rare
        return None if rare is None else rare.grad_of

    @grad_of.setter
    def grad_of(self, value: Op | None) -> None:
        if value is not None or self.rare is not None:
            self.set_rare(grad_of=value)

    @property
    def param(self) -> str | None:
        rare = self.rare
        return None if rare is None else rare.param

    @param.setter
    def param(self, value: str | None) -> None:
        if value is not None or self.rare is not None:
            self.set_rare(param=value)

    @property
    def dtensor(self) -> DTensorOp | None:
        rare = self.rare
        return None if rare is None else rare.dtensor

    @dtensor.setter
    def dtensor(self, value: DTensorOp | None) -> None:
        if value is not None or self.rare is not None:
            self.set_rare(dtensor=value)

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
        outs = shapes([o.label for o in self.outputs]) or "()"
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

    def __repr__(self) -> str:
        return f"<Call {self.label} ({self.type})>"


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
