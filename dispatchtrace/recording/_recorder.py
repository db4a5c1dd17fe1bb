"""Turns dispatched ops and module-call events into a ``Graph``: the capture's bookkeeping."""

from __future__ import annotations

import inspect
import threading
from collections import defaultdict
from typing import Any

import torch
import torch.nn as nn
from torch.utils.hooks import RemovableHandle

from .._structure import leaves, map_leaves, template, tensor_leaves, tensors_in
from .._torch import CUDA_GRAPH, cuda_graph_capturing, has_values
from ..graph import SCHEMAS as _schemas
from ..graph import Call, Graph, GraphBuilder, Kind, Op, Phase, TensorRef, schema_of, shares_storage
from ._collectives import recorded_object, with_groups
from ._dataflow import add_dataflow_inputs
from ._dtensor import dtensor_record
from ._literals import LIMIT, literal_of
from ._names import Names
from ._params import add_params
from ._scope import Hidden, hidden_note
from ._source import Site, SourceTable, user_site
from ._tracker import Tracker

Tensor = torch.Tensor
_PLAIN = frozenset({int, float, bool, str, type(None), torch.dtype, torch.device, torch.layout, torch.memory_format})
_SYM = (torch.SymInt, torch.SymFloat, torch.SymBool)
_NO_KWARGS: dict[str, Any] = {}  # the kwargs of every op called without any: one dict, not one each (ops are read-only)


class Recorder:
    """Owns the graph being built, the call stack and tensor identity for one capture block."""

    def __init__(self, model: Any, *, source: bool = True, constants: int = LIMIT) -> None:
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
        self.phase: Phase = "forward"
        """The phase of the ops recorded now (``training.Phases`` sets it around backward and optimizer steps)."""
        self.state_names: dict[int, str] = {}
        """Names of tensors from before the block an optimizer step reads (``0.weight.exp_avg``), by ``id``."""
        self._n_dtensor = 0

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
        if not has_values(t):  # a meta or fake constant: replay will say why it has no value
            self.builder.set_constant(name, literal_of(t, self._limit))
        return "constant", name

    # ---- module calls ----------------------------------------------------------------------
    def enter(self, module: nn.Module, args: tuple[Any, ...]) -> None:
        """A module call begins (the global pre-hook): a new call inside the running one, reading
        the tensors passed to it. Runs once per call: keep it lean."""
        stack = self.stack
        parent = stack[-1]
        key = id(module)
        counts = self._counts
        index = counts.get(key, 0)
        counts[key] = index + 1
        self._call_keys.append(key)
        if self._call_sites is not None:
            self._call_sites.append(user_site(2))
        if parent is not self._root:
            if len(args) == 1 and isinstance(args[0], Tensor):  # the common case, inline
                a = args[0]
                s = self._live.get(id(a))
                if s is None or s.ref.version != s.storage.version or s() is not a:
                    s = self.tracker.refreshed(a)
                inputs: tuple[TensorRef, ...] = (s.ref,)
            else:
                refs = self.tracker.refs(tensors_in(args))
                inputs = tuple(refs) if len(refs) < 2 else tuple(dict.fromkeys(refs))
            entry = self._paths.get(key)  # after the refs: a module learned now names no tensor read before
            path = entry[1] if entry is not None and entry[0] is module else self.names.path(module)
            call = self.builder.add_call(parent, path, type(module).__name__, index, module=module, inputs=inputs)
        else:
            ref_of = self.tracker.ref_of
            named = list(leaves(args))
            names = self._name_inputs(module, named, len(args))
            refs = [ref_of(t) for _, t in named]
            positional = [(n, template(a, ref_of)) for n, a in zip(names, args, strict=True)]
            self._pending.clear()
            if cuda_graph_capturing():  # checked once per top-level call
                self.builder.add_note(CUDA_GRAPH)
            call = self.builder.add_call(parent, self.names.path(module), type(module).__name__, index, module=module)
            self.builder.set_call_inputs(call, refs)
            self.builder.set_call_arguments(call, positional, {})
        self._starts[call] = len(self._ops)
        stack.append(call)
        if module._forward_hooks:
            self._watch_user_hooks(module, call)

    def note(self, module: nn.Module, kind: Hidden) -> None:
        """A call the module hooks see only in part (``scope.hidden_kind``): the graph says so."""
        self.builder.add_note(hidden_note(kind, self.names.path(module), module))

    def _watch_user_hooks(self, module: nn.Module, call: Call) -> None:
        """The module's own forward hooks run after the global one and may replace its output:
        a temporary hook, last in line, reads what the call finally returned."""
        thread = threading.get_ident()
        handle: RemovableHandle | None = None

        def last(mod: nn.Module, args: Any, output: Any) -> None:
            if threading.get_ident() != thread:
                return
            assert handle is not None
            handle.remove()
            if output is not None:
                self._returned(call, output)

        handle = module.register_forward_hook(last, always_call=True)
        self._late_hooks.append(handle)

    def _name_inputs(self, module: nn.Module, tensors: list[tuple[str, Tensor]], n: int) -> list[str]:
        """Names the top-level call's positional tensors by the forward's parameters (``input_3``
        past them); returns the names of its ``n`` positional arguments."""
        try:
            params = list(inspect.signature(module.forward).parameters.values())
        except (TypeError, ValueError):
            params = []
        positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        names = [positional[i] if i < len(positional) else f"input_{i}" for i in range(n)]
        for path, t in tensors:
            # path looks like "[0]..." : the top index is the positional argument
            head, _, rest = path[1:].partition("]")
            self._pending.setdefault(id(t), names[int(head)] + rest)
        return names

    def keywords(self, module: nn.Module, kwargs: dict[str, Any]) -> None:
        """The keyword arguments of a call of the model (its own ``with_kwargs`` pre-hook, run after
        the global one): for a top-level call, its tensors are inputs named by their keyword."""
        call = self.stack[-1]
        if call.parent is not self.graph.root or call.module is not module or call.arguments is None:
            return
        ref_of = self.tracker.ref_of
        named = list(leaves(kwargs))
        for path, t in named:  # path looks like "['input_ids']..."
            key, _, rest = path[2:].partition("']")
            self._pending.setdefault(id(t), key + rest)
        refs = [ref_of(t) for _, t in named]
        self._pending.clear()
        self.builder.set_call_inputs(call, [*call.inputs, *refs])
        self.builder.set_call_arguments(call, call.arguments[0], {k: template(v, ref_of) for k, v in kwargs.items()})

    def exit(self, module: nn.Module, output: Any) -> None:
        """A module call ends (the global always-called forward hook; ``output`` is ``None`` when
        its forward raised): pop to its call; calls whose exit hook never ran are closed with it."""
        stack = self.stack
        call = stack[-1]
        weak = call._module  # the module property, inline: the innermost call is the one ending
        if weak is not None and weak() is module:
            stack.pop()
        else:
            for depth in range(len(stack) - 1, 0, -1):
                if stack[depth].module is module:
                    break
            else:
                return
            call = stack[depth]
            del stack[depth:]
        if output is not None:
            self._returned(call, output)

    def _returned(self, call: Call, output: Any) -> None:
        if isinstance(output, Tensor):
            s = self._live.get(id(output))
            if s is None or s.ref.version != s.storage.version or s() is not output:
                s = self.tracker.refreshed(output)
            self.builder.set_call_result(call, (s.ref,), s.ref)
        else:
            ref_of = self.tracker.ref_of
            self.builder.set_call_result(call, self.tracker.refs(tensors_in(output)), template(output, ref_of))

    # ---- ops ---------------------------------------------------------------------------------
    def op(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> Op:
        """Record one dispatched op: its arguments as refs (noting the ops they came from), the op
        itself, the tensors it wrote, then what it returned. Runs once per op: keep it lean (a
        tensor argument whose bytes nobody wrote since it was made is read here, inline; ``_read``
        does every other leaf)."""
        try:  # a subscript, not a call: an op met before (schemas are kept across captures)
            info = _schemas[id(func)]
        except KeyError:
            info = schema_of(func)
        self._inputs = inputs = []
        self._producers = producers = {}
        self._view = out if info.views else None
        live = self._live
        read = self._read
        known = self._known
        int_lists = self._int_lists
        rargs = list(args)  # plain values stay where they are; the others are replaced
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
        rkwargs = {k: map_leaves(v, read) for k, v in kwargs.items()} if kwargs else _NO_KWARGS
        self._view = None  # never hold a result past its op
        recorded = tuple(rargs)
        if info.group is not None:  # a functional collective names its group: record the group
            recorded, rkwargs = with_groups(recorded, rkwargs, *info.group)
        base = info.base  # named per overload packet in execution order: relu, relu_1, relu_2
        counts = self._name_counts
        n = counts[base]
        counts[base] = n + 1
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
        op = self.builder.add_op(self.stack[-1], f"{base}_{n}" if n else base, info.target, recorded, rkwargs,
                                 shared, tuple(producers), phase=self.phase)
        if info.lift and inputs and inputs[0].kind == "constant" and inputs[0].name not in self.graph.constants:
            self.builder.set_constant(inputs[0].name, literal_of(args[0], self._limit))  # type: ignore[arg-type]
        if info.self_only and args and out is args[0] and isinstance(out, Tensor):  # relu_, add_: wrote itself, returned
            self.tracker.write(out, op)
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
        elif type(out) is Tensor or isinstance(out, Tensor):  # the common case, inline
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
        if self._sites is not None:
            self._sites.append(user_site(3))
        return op

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
        self.builder.set_graph_io(self.tracker.inputs, [r for c in tops for r in c.outputs])
        add_dataflow_inputs(graph, self._starts)
        if self._sites is not None and self._call_sites is not None:
            table = SourceTable()
            table.assign(graph.ops, self._sites)
            table.assign(graph.calls, self._call_sites)
        self.tracker.close()
        self.names.clear()
        self._pending.clear()
        self._int_lists.clear()
        return self.builder.finish(error)


def _sym_value(a: Any) -> Any:
    """A symbolic int/float/bool as a plain value when it is known, else its text."""
    if isinstance(a, torch.SymInt):
        known = a.node.maybe_as_int()
        if known is not None:
            return known
    return str(a)
