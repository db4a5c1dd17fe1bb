"""The captured graph: ops linked by data dependencies, and the tree of module calls."""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Union, get_args

from .depth import AUTO_BUDGET
from .shorten import items, shapes
from .source import Source
from .tensors import TensorRef
from .users import Users

if TYPE_CHECKING:
    import os
    from collections.abc import Iterable
    from pathlib import Path

    import graphviz
    import torch.fx as fx
    import torch.nn as nn

    from .depth import Depth
    from .dtensor import DTensorOp
    from .literals import Literal
    from .render.dot import Layout, Rankdir
    from .replay import Constants
    from .views.collapse import CollapsedGraph, Predicate
    from .views.collectives import Collectives
    from .views.costs import Costs
    from .views.memory import Memory
    from .views.query import CallRef
    from .views.summary import Summary
    from .views.tree import Tree


Phase = Literal["forward", "backward", "recompute", "optimizer"]
"""When an op ran: in the forward (and any code outside the phases below), in autograd's backward
(``loss.backward()``, ``torch.autograd.grad``), recomputing a checkpointed forward inside backward,
or inside a ``torch.optim`` optimizer's ``step``."""

PHASES: tuple[Phase, ...] = get_args(Phase)

PhaseView = Literal["forward", "backward", "all"]
"""What a view (tree, diagrams, summary, viewer) shows of a training step: the forward ops where they
ran, the backward ops (and recompute ops) under the forward call they belong to, or both; the default
``"forward"`` draws a forward-only capture as always. See ``views.phases``."""

PHASE_VIEWS: tuple[PhaseView, ...] = get_args(PhaseView)


@dataclass(slots=True, eq=False)
class Op:
    """One ATen op as it ran. Read-only once the capture block has exited.

    ``call`` is the module call running when it ran (a record of time); ``phase`` when it ran;
    ``origin`` the forward call a backward op differentiates or a recompute op recomputes
    (``None`` otherwise), ``grad_of`` the forward op whose autograd node ran it, where it can be
    told, ``param`` the parameter whose ``.grad`` a gradient-accumulation op writes.
    """

    index: int
    name: str
    target: str
    call: Call
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    inputs: tuple[TensorRef, ...]
    outputs: tuple[TensorRef, ...] = ()
    mutated: tuple[TensorRef, ...] = ()
    is_view: bool = False
    producers: tuple[Op, ...] = ()
    _users: tuple[Op, ...] | Users = ()  # ``users``: the graph's ``Users`` until assigned
    phase: Phase = "forward"
    source: Source | None = None
    origin: Call | None = None
    grad_of: Op | None = None
    param: str | None = None
    dtensor: DTensorOp | None = None  # the DTensor-level op this local op ran for (``dispatchtrace.dtensor``)

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
    autograd first saved it. Which kind of tensor it holds is its refs' kind (``views.memory``).
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


class Graph:
    """What one ``capture`` block recorded.

    ``ops`` in execution order, every phase (``op.phase``), ``calls`` in entry order (the root excluded), ``root`` the
    synthetic call that encloses the block, ``inputs`` / ``outputs`` of the block,
    ``error`` the exception that ended the block early, if any. ``constants`` holds the
    values of literal constants by name (``literals.Literal``); ``saved`` the storages autograd saved
    for backward (``Saved``, one each, in the order first saved); ``notes`` what the capture could
    not see (a ``torch.jit.script`` module's inner calls, a ``torch.compile``'d model run eagerly),
    one sentence each.
    """

    def __init__(self) -> None:
        self.root: Call = new_call("", "<capture>", 0, None)
        self.ops: list[Op] = []
        self.calls: list[Call] = []
        self.inputs: list[TensorRef] = []
        self.outputs: list[TensorRef] = []
        self.saved: list[Saved] = []
        self.constants: dict[str, Literal] = {}
        self.error: BaseException | None = None
        self.complete: bool = False
        self.notes: list[str] = []

    def __str__(self) -> str:
        return "\n".join(str(op) for op in self.ops)

    def __repr__(self) -> str:
        state = "complete" if self.complete else "recording"
        err = f", error={type(self.error).__name__}" if self.error is not None else ""
        return f"<dispatchtrace.Graph {len(self.ops)} ops, {len(self.calls)} calls, {state}{err}>"

    def __len__(self) -> int:
        return len(self.ops)

    def lint(self) -> None:
        """Check every invariant ``docs/semantics.md`` promises; raise ``LintError`` naming the first broken one."""
        from .lint import lint

        lint(self)

    # ---- views and exports: thin doors to the modules that implement them -----------------
    # (imports are local: graph is the data model, the layers above it import graph, not back)

    # Depth: one type and one meaning for every method below; see ``dispatchtrace.depth``.

    def collapse(self, depth: Depth = "ops", *, predicate: Predicate | None = None, fold: bool = False,
                 params: bool = False, noise: bool = False, phase: PhaseView = "forward") -> CollapsedGraph:
        """Smaller DAG with every module call at ``depth`` as one node; see ``views.collapse``
        (``phase``: what of a training step, ``views.phases``)."""
        from .views.collapse import collapse
        from .views.phases import phase_graph

        return collapse(phase_graph(self, phase), depth, predicate=predicate, fold=fold, params=params, noise=noise)

    def tree(self, depth: Depth = "all", *, ops: bool = False, noise: bool = False, at: str | Call | None = None,
             statements: bool = False, phase: PhaseView = "forward") -> Tree:
        """Nested box-drawing tree of calls, ops and parallel branches; see ``views.tree``."""
        from .views.tree import tree

        return tree(self, depth, ops=ops, noise=noise, at=at, statements=statements, phase=phase)

    def to_dot(self, depth: Depth = "auto", *, predicate: Predicate | None = None, fold: bool = True,
               params: bool = False, noise: bool = False, rankdir: Rankdir = "TB", edge_labels: bool = True,
               max_nodes: int = AUTO_BUDGET, title: str | None = None, source: bool = True,
               layout: Layout = "auto", phase: PhaseView = "forward") -> graphviz.Digraph:
        """A ``graphviz.Digraph`` of the collapsed graph; see ``render.dot``."""
        from .render.dot import to_dot

        return to_dot(self, depth, predicate=predicate, fold=fold, params=params, noise=noise, rankdir=rankdir,
                      edge_labels=edge_labels, max_nodes=max_nodes, title=title, source=source, layout=layout,
                      phase=phase)

    def render(
        self,
        path: str | os.PathLike[str],
        *,
        format: str | None = None,  # noqa: A002 - the public keyword
        depth: Depth = "auto",
        ops: bool = False,
        noise: bool = False,
        at: str | Call | None = None,
        statements: bool = False,
        predicate: Predicate | None = None,
        fold: bool = True,
        params: bool = False,
        rankdir: Rankdir = "TB",
        edge_labels: bool = True,
        max_nodes: int = AUTO_BUDGET,
        title: str | None = None,
        source: bool = True,
        layout: Layout = "auto",
        force: bool = False,
        phase: PhaseView = "forward",
    ) -> Path:
        """Write a diagram, the tree or the capture to ``path``, the format from its suffix or ``format=``;
        returns the path written. See ``render.files.render`` for the formats and which options each takes
        (``force`` draws a diagram ``dot`` would take over a minute to lay out)."""
        from .render.files import render

        return render(self, path, format=format, depth=depth, ops=ops, noise=noise, at=at, statements=statements,
                      predicate=predicate, fold=fold, params=params, rankdir=rankdir, edge_labels=edge_labels,
                      max_nodes=max_nodes, title=title, source=source, layout=layout, force=force, phase=phase)

    def _repr_mimebundle_(self, include: Iterable[str] | None = None, exclude: Iterable[str] | None = None) -> dict[str, str]:
        """Jupyter display: the default-depth diagram as SVG (text only when ``dot`` is missing)."""
        from .render.notebook import mimebundle

        return mimebundle(self, include, exclude)

    def to_fx(self, model: nn.Module | None = None, *, constants: Constants = "error") -> fx.GraphModule:
        """A ``torch.fx.GraphModule`` that re-runs the captured ATen ops; see ``replay.to_fx``."""
        from .replay import to_fx

        return to_fx(self, model, constants=constants)

    def costs(self) -> Costs:
        """Per-op FLOPs and bytes, per-call totals and parameters (cached); see ``views.costs``."""
        from .views.costs import costs

        return costs(self)

    def memory(self) -> Memory:
        """Bytes saved for backward per call, live bytes per op and the peak (cached); see ``views.memory``."""
        from .views.memory import memory

        return memory(self)

    def collectives(self) -> Collectives:
        """The collective ops (c10d and functional), in order, with group and bytes; see ``views.collectives``."""
        from .views.collectives import collectives

        return collectives(self)

    def summary(self, depth: Depth = "all", *, phase: PhaseView = "forward") -> Summary:
        """Table of module calls with output shape, parameters, FLOPs, bytes; see ``views.summary``."""
        from .views.summary import summary

        return summary(self, depth, phase=phase)

    def find_ops(self, target: str = "*", *, path: str | None = None, type: str | None = None,
                 direct: bool = False) -> list[Op]:
        """Ops by target pattern (``aten.add*``), module ``path=`` / ``type=`` pattern; see ``views.query``."""
        from .views.query import find_ops

        return find_ops(self, target, path=path, type=type, direct=direct)

    def find_calls(self, path: str | None = None, *, type: str | None = None) -> list[Call]:
        """Calls by path pattern (``layer1.*``) and ``type=`` pattern; see ``views.query``."""
        from .views.query import find_calls

        return find_calls(self, path, type=type)

    def calls_of(self, module: nn.Module | str) -> list[Call]:
        """Every call of a module instance (or of a path), in order; see ``views.query``."""
        from .views.query import calls_of

        return calls_of(self, module)

    def ops_between(self, first: CallRef, second: CallRef, *, inclusive: bool = False) -> list[Op]:
        """Ops run after call ``first`` returned and before ``second`` began; see ``views.query``."""
        from .views.query import ops_between

        return ops_between(self, first, second, inclusive=inclusive)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write this capture as versioned JSON; ``dispatchtrace.load`` reads it back. See ``serialize``."""
        from .serialize import save

        save(self, path)

    def op(self, name: str) -> Op:
        """The op with this unique name (``convolution_3``)."""
        for op in self.ops:
            if op.name == name:
                return op
        raise KeyError(f"no op named {name!r}; op names look like {self.ops[0].name!r}" if self.ops else f"no op named {name!r}: the capture recorded no ops")
