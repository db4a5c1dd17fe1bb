"""Turns dispatched ops and module-call events into a ``Graph``: the capture's bookkeeping."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from typing import Any

import torch
from torch.utils.hooks import RemovableHandle

from .._structure import map_leaves, tensor_leaves
from ..graph import (
    Call,
    Graph,
    GraphBuilder,
    Kind,
    Op,
    Phase,
    TensorRef,
    input_construction,
    overload_of,
    shares_storage,
)
from ._call_events import CallEvents
from ._collectives import recorded_object, with_groups
from ._dataflow import add_dataflow_inputs
from ._dtensor import dtensor_record
from ._keep import KEEP_BYTES, Keep, Keeper
from ._literals import CONSTANTS_LIMIT, literal_of
from ._names import Names, tensor_attribute
from ._params import add_params
from ._schema import SCHEMAS as _schemas
from ._schema import schema_of
from ._source import Site, SourceTable, user_site
from ._stats_taker import StatsTaker
from ._tracker import Tracker

Tensor = torch.Tensor
_PLAIN = frozenset({int, float, bool, str, type(None), torch.dtype, torch.device, torch.layout, torch.memory_format})
_SYM = (torch.SymInt, torch.SymFloat, torch.SymBool)
_NO_KWARGS: dict[str, Any] = {}  # the kwargs of every op called without any: one dict, not one each (ops are read-only)
INLINE = True
"""``Recorder.op`` reads the common arguments and results inline; off (tests only), every one goes through the
helpers (``_read``, ``_record_writes``, ``_record_outputs``), which must record the same graph."""


class Recorder(CallEvents):
    """Owns the graph being built, the call stack and tensor identity for one capture block (the module-call
    events are ``CallEvents``', this class records the ops)."""

    def __init__(self, model: Any, *, source: bool = True, constants: int = CONSTANTS_LIMIT, values: str = "none",
                 keep: Keep = None, keep_bytes: int = KEEP_BYTES, stats: frozenset[str] = frozenset()) -> None:
        self._limit = constants
        self.builder = GraphBuilder()
        self.graph = self.builder.graph
        self._sites: list[Site | None] | None = [] if source else None
        self._call_sites: list[Site | None] | None = [] if source else None
        self.names = Names(model)
        self._paths = self.names.paths
        self.tracker = Tracker(self._classify, self.names.by_id)
        self._live = self.tracker.live
        self._produced = self.tracker.produced
        self._known = self.tracker.known
        self._inputs: list[TensorRef] = []  # the op being recorded: what its arguments read
        self._producers: dict[Op, None] = {}
        self._view: Any = None
        self._root = self.graph.root
        self._ops = self.graph.ops
        self.stack: list[Call] = [self._root]
        self._counts: dict[int, int] = {}
        self._call_keys: list[int] = []
        self._starts: dict[Call, int] = {}  # each call's first op index (the ops issued inside it come next)
        self._name_counts: defaultdict[str, int] = defaultdict(int)  # read by subscript: no call per op
        self._pending: dict[int, str] = {}
        self._int_lists: dict[tuple[int, ...], list[int]] = {}  # each distinct int list argument, once
        self._late_hooks: list[RemovableHandle] = []
        self._n_inputs = 0
        self._n_constants = 0
        self._fresh: list[tuple[str, Tensor]] = []  # constants classified during the op being recorded
        self._read_constants: list[str] = []  # every constant whose value (or why not) was recorded when first seen
        self.phase: Phase = "forward"
        """The phase of the ops recorded now (``training.Phases`` sets it around backward and optimizer steps)."""
        self.state_names: dict[int, str] = {}
        """Names of tensors from before the block an optimizer step reads (``0.weight.exp_avg``), by ``id``."""
        self._n_dtensor = 0
        self.graph.values = values
        self._stats = StatsTaker(self.graph.stats, self.tracker.live, stats) if values == "stats" else None
        self.before = self._stats.before if self._stats is not None else None
        """``(func, args, kwargs)``, called before each op runs, or ``None``: what the values need to see first."""
        self._keeper = Keeper(keep, keep_bytes, self.graph.kept) if keep is not None else None
        self._values = self._stats is not None or self._keeper is not None  # one test per op when both are off

    # ---- tensors seen for the first time -------------------------------------------------
    def _classify(self, t: Tensor) -> tuple[Kind, str | None]:
        known = self.names.tensor(t) or self.names.swapped(self.stack[-1].module, t)
        if known is not None:
            return known  # type: ignore[return-value]
        state = self.state_names.get(id(t))
        if state is not None:
            return "constant", state
        pending = self._pending.get(id(t))
        if pending is not None or (len(self.stack) == 1 and self.phase == "forward"):
            name = pending or f"input_{self._n_inputs}"
            self._n_inputs += 1
            return "input", name
        self._n_constants += 1
        name = f"_tensor_constant{self._n_constants - 1}"
        # its value within the constants= limit (a plain tensor attribute: Faster R-CNN's anchors), so replay needs
        # nothing else; else why not (meta, fake, too large), which replay says
        literal = literal_of(t, self._limit)
        if literal.values is None and literal.why is not None and literal.why.startswith("it is "):  # over the limit
            call = self.stack[-1]
            where = tensor_attribute(call.module, call.path, t)
            if where is not None:
                literal = replace(literal, why=f"{literal.why}; or register {where}, a plain tensor attribute of "
                                               f"{call.type}, as a buffer, which replay reads from the model")
        self.builder.set_constant(name, literal)
        self._fresh.append((name, t))  # op() forgets the value if the op reading it first wrote it (its value is after)
        self._read_constants.append(name)
        return "constant", name

    def _forget_written(self, info: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """A constant first read by an op that wrote it was seen after the write: no recorded value (replay says so,
        ``verify`` takes the value from its eager run)."""
        written = {id(t) for t in info.written(args, kwargs)} if info.writes else ()
        for name, t in self._fresh:
            literal = self.graph.constants.get(name)
            if id(t) in written and literal is not None and literal.values is not None:
                self.builder.set_constant(name, replace(literal, values=None, why="the op that first read it wrote it"))
        self._fresh.clear()

    # ---- ops ---------------------------------------------------------------------------------
    def op(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> Op:
        """Record one dispatched op: its arguments as refs (``_arguments``, noting the ops they came
        from), the op itself, then the tensors it wrote and what it returned (``_results``). Runs once
        per op: keep it lean (three calls of this class per op, the halves included)."""
        try:  # a subscript, not a call: an op met before (schemas are kept across captures)
            info = _schemas[id(func)]
        except KeyError:
            info = schema_of(func)
        recorded, rkwargs, inputs, shared, producers = self._arguments(info, args, kwargs, out)
        if self._fresh:
            self._forget_written(info, args, kwargs)
        base = info.base  # named per overload packet in execution order: relu, relu_1, relu_2
        counts = self._name_counts
        n = counts[base]
        counts[base] = n + 1
        op = self.builder.add_op(self.stack[-1], f"{base}_{n}" if n else base, info.target, recorded, rkwargs,
                                 shared, producers, phase=self.phase)
        if info.lift and inputs and inputs[0].kind == "constant" and inputs[0].name not in self.graph.constants:
            self.builder.set_constant(inputs[0].name, literal_of(args[0], self._limit))  # type: ignore[arg-type]
        self._results(op, info, args, kwargs, out, inputs)
        if self._sites is not None:
            self._sites.append(user_site(3))
        if self._values:
            if self._stats is not None:
                self._stats.after(op, info, args, kwargs, out)
            if self._keeper is not None:
                self._keeper.op(op, out)
        return op

    def _arguments(self, info: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any
                   ) -> tuple[tuple[Any, ...], dict[str, Any], list[TensorRef], tuple[TensorRef, ...], tuple[Op, ...]]:
        """The first half of ``op``: ``(args, kwargs, inputs, inputs as a tuple, producers)`` as recorded,
        tensors replaced by their refs. A tensor argument whose bytes nobody wrote since it was made is
        read here, inline, and so is an int list; ``_read`` does every other leaf (every leaf when
        ``INLINE`` is off)."""
        self._inputs = inputs = []
        self._producers = producers = {}
        self._view = out if info.views else None
        read = self._read
        rargs = list(args)  # plain values stay where they are; the others are replaced
        if INLINE:
            live = self._live
            known = self._known
            int_lists = self._int_lists
            i = -1
            for a in args:
                i += 1
                if type(a) in _PLAIN:
                    continue
                if type(a) is Tensor or isinstance(a, Tensor):
                    s = live.get(id(a))
                    if s is None:  # first sighting (a parameter, a buffer): no producer, no write since
                        s = known(a)
                    elif s.storage.version != s.born or s.ref.version != s.born or s() is not a:
                        rargs[i] = read(a)
                        continue
                    ref = s.ref
                    inputs.append(ref)
                    if ref.producer is not None:
                        producers[ref.producer] = None
                    rargs[i] = ref
                elif type(a) is list:  # int[] sizes and strides (nothing to read, inline) or a tensor list
                    ints = True
                    for v in a:
                        t = type(v)
                        if t is not int:
                            if t not in _PLAIN:
                                rargs[i] = map_leaves(a, read)
                                break
                            ints = False
                    else:
                        if ints:  # equal int lists are one list per capture (ops are read-only); no call made
                            key = (*a,)
                            try:
                                rargs[i] = int_lists[key]
                            except KeyError:
                                rargs[i] = int_lists[key] = a[:]
                        else:
                            rargs[i] = a[:]
                else:
                    rargs[i] = map_leaves(a, read)
        else:
            rargs = [map_leaves(a, read) for a in args]
        rkwargs = {k: map_leaves(v, read) for k, v in kwargs.items()} if kwargs else _NO_KWARGS
        self._view = None  # never hold a result past its op
        recorded = tuple(rargs)
        if info.group is not None:  # a functional collective names its group: record the group
            recorded, rkwargs = with_groups(recorded, rkwargs, *info.group)
        # Tuples shared, not made again (ops are read-only): args that are all tensors are the inputs; one
        # input read as its producer returned it is that producer's outputs (a comparison, not a call).
        shared = recorded if inputs == rargs else None
        if len(inputs) == 1:
            p = inputs[0].producer
            if p is not None:
                outs = p.outputs
                if outs and outs[0] is inputs[0] and outs[-1] is inputs[0]:  # just this ref (outputs are distinct)
                    if shared is not None:
                        recorded = outs
                    shared = outs
        if shared is None:
            shared = tuple(inputs)
        return recorded, rkwargs, inputs, shared, tuple(producers)

    def _results(self, op: Op, info: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any,
                 inputs: list[TensorRef]) -> None:
        """The second half of ``op``: the tensors ``op`` wrote get a new version, what it returned its refs.
        An op that wrote and returned its first argument (``relu_``) and one returning one new tensor are
        done here, inline; ``_record_writes`` and ``_record_outputs`` do the others (all when ``INLINE``
        is off)."""
        if INLINE and info.self_only and args and out is args[0] and isinstance(out, Tensor):
            self.tracker.write(out, op)  # relu_, add_: wrote itself, returned
            ref = self._produced(out, op, True)
            self.builder.set_outputs(op, (ref,), mutated=(ref,))
        elif info.writes:
            written = self._record_writes(op, info.written(args, kwargs))
            outputs = self._record_outputs(op, out, written)
            if written:
                ref_of = self.tracker.ref_of
                self.builder.set_outputs(op, outputs, mutated=tuple([ref_of(t) for t in written]))
            else:
                self.builder.set_outputs(op, outputs, is_view=shares_storage(outputs, inputs))
        elif INLINE and (type(out) is Tensor or isinstance(out, Tensor)):  # the common case, inline
            ref = self._produced(out, op, False)
            sid = ref.storage
            is_view = False
            for r in inputs:
                if r.storage == sid:
                    is_view = True
                    break
            self.builder.set_outputs(op, (ref,), is_view=is_view)
        else:
            outputs = self._record_outputs(op, out, ())
            self.builder.set_outputs(op, outputs, is_view=shares_storage(outputs, inputs))

    def _read(self, a: Any) -> Any:
        """How one argument leaf of the op being recorded is recorded: a tensor as its current ref,
        appended to the op's inputs, its producer and the last writers of its bytes (when they wrote
        after it) to its producers; a known symbolic size as its value; anything else as it is.
        The result of a view op (``_view``) says which bytes it reads of its base."""
        if type(a) in _PLAIN:
            return a
        if isinstance(a, Tensor):
            s = self.tracker.refreshed(a)
            ref = s.ref
            self._inputs.append(ref)
            producers = self._producers
            if ref.producer is not None:
                producers[ref.producer] = None
            if s.storage.version > s.born:  # written since: the last writers of the bytes it covers
                for w in self.tracker.writers(a, s, self._view):
                    producers[w] = None
            return ref
        if isinstance(a, _SYM):
            return _sym_value(a)
        return recorded_object(a)  # a process group, a reduce op: what it means, never the object

    def _record_writes(self, op: Op, values: list[Any]) -> list[Tensor]:
        """The tensors ``op`` writes get a new storage version, with ``op`` as their last writer."""
        written = tensor_leaves(values)
        for t in written:
            self.tracker.write(t, op)
        return written

    def _record_outputs(self, op: Op, out: Any, written: list[Tensor] | tuple[()]) -> tuple[TensorRef, ...]:
        """Refs for what ``op`` returned, in ``tensor_leaves`` order; a written tensor returned
        (``relu_``, ``out=``) keeps its kind and name."""
        produced = self._produced
        if isinstance(out, Tensor):
            return (produced(out, op, bool(written) and any(t is out for t in written)),)
        if isinstance(out, (tuple, list)):
            ids = {id(t) for t in written}
            return tuple([produced(t, op, id(t) in ids, i) for i, t in enumerate(tensor_leaves(out))])
        return ()

    def dtensor_begin(self) -> int:
        return len(self.graph.ops)

    def dtensor_end(self, start: int, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any,
                    dtensor: type) -> None:
        """The ops recorded since ``start`` ran for one DTensor-level op: each points to its record."""
        record = dtensor_record(self._n_dtensor, func, args, kwargs, out, dtensor)
        self._n_dtensor += 1
        for op in self.graph.ops[start:]:
            self.builder.set_dtensor(op, record)

    # ---- end of the block ----------------------------------------------------------------------
    def finish(self, error: BaseException | None) -> Graph:
        graph = self.graph
        for handle in self._late_hooks:  # those a KeyboardInterrupt skipped
            handle.remove()
        self._late_hooks.clear()
        del self.stack[1:]
        counts = self._counts
        for call, key in zip(graph.calls, self._call_keys, strict=True):
            n = counts[key]
            if n != 1:  # 1 by default
                call.repeat = n
        add_params(graph)
        tops = [c for c in graph.root.children if isinstance(c, Call)]
        _name_root_inputs(graph, self.tracker.inputs)
        self.builder.set_graph_io(self.tracker.inputs, [r for c in tops for r in c.outputs])
        add_dataflow_inputs(graph, self._starts)
        construction = input_construction(graph)
        if construction:
            self.builder.add_note(construction.note())
        if self._sites is not None and self._call_sites is not None:
            table = SourceTable()
            table.assign(graph.ops, self._sites)
            table.assign(graph.calls, self._call_sites)
        if self._stats is not None:
            self._stats.finish()  # the stats still on a device, to the host: once
        if self._keeper is not None:
            for note in self._keeper.notes():
                self.builder.add_note(note)
        if self._read_constants:
            _drop_unread(graph, self._read_constants)
        self.tracker.close()
        self.names.clear()
        self._pending.clear()
        self._int_lists.clear()
        return self.builder.finish(error)


def _drop_unread(graph: Graph, names: list[str]) -> None:
    """Forget the values of constants seen but read by no op or call of the graph (a DTensor's local tensor
    seen at the DTensor level): ``graph.constants`` holds the constants of the graph only (``lint``)."""
    read = {r.name for op in graph.ops for r in op.inputs if r.kind == "constant"}
    read.update(r.name for c in graph.calls for r in c.inputs if r.kind == "constant")
    for name in names:
        if name not in read:
            graph.constants.pop(name, None)


_GENERIC = frozenset({"self", "input", "other", "tensor", "tensors", "a", "b", "x", "out"})
"""Schema argument names that say nothing about a tensor (``aten.cos(self)``): such an input keeps ``input_N``."""


def _name_root_inputs(graph: Graph, inputs: list[TensorRef]) -> None:
    """An input first read outside any module call and passed to none (a loss's target) is named by the
    argument of the op that first read it (``target`` of ``nll_loss_forward``), not ``input_1``, where
    that argument has a telling name (not ``self``, ``input``, ``other``, ...)."""
    unnamed = {id(r): r for r in inputs if r.name is not None and r.name.startswith("input_")
               and r.name[6:].isdigit() and r.producer is None}
    if not unnamed:
        return
    passed = {id(r) for c in graph.root.children if isinstance(c, Call) for r in c.inputs}
    taken = {r.name for r in inputs}
    for op in graph.ops:
        if not unnamed:
            break
        for i, a in enumerate(op.args):
            ref = unnamed.get(id(a))
            if ref is None or id(ref) in passed or op.call is not graph.root:
                continue
            del unnamed[id(ref)]
            overload = overload_of(op.target)
            arguments = overload._schema.arguments if overload is not None else []
            name = arguments[i].name if i < len(arguments) else None
            if not name or not name.isidentifier() or name in _GENERIC:
                continue
            while name in taken:
                name += "_"
            taken.add(name)
            ref.name = name


def _sym_value(a: Any) -> Any:
    """A symbolic int/float/bool as a plain value when it is known, else its text."""
    if isinstance(a, torch.SymInt):
        known = a.node.maybe_as_int()
        if known is not None:
            return known
    return str(a)
