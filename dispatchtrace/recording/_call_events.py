"""The module-call side of ``Recorder``: a call begins, takes keyword tensors, returns (global module hooks)."""

from __future__ import annotations

import inspect
import threading
from typing import TYPE_CHECKING, Any

import torch
import torch.nn as nn
from torch.utils.hooks import RemovableHandle

from .._structure import leaves, template, tensors_in
from .._torch import CUDA_GRAPH, cuda_graph_capturing, pytree_node
from ..graph import Call, TensorRef
from ._scope import Hidden, hidden_note
from ._source import user_site

if TYPE_CHECKING:
    from ..graph import Graph, GraphBuilder
    from ._keep import Keeper
    from ._names import Names
    from ._source import Site
    from ._tracker import Tracker

Tensor = torch.Tensor


class CallEvents:
    """``Recorder``'s handlers of module-call events; the state they use is made by ``Recorder.__init__``."""

    stack: list[Call]
    builder: GraphBuilder
    graph: Graph
    names: Names
    tracker: Tracker
    _root: Call
    _counts: dict[int, int]
    _call_keys: list[int]
    _call_sites: list[Site | None] | None
    _live: Any
    _paths: Any
    _pending: dict[int, str]
    _starts: dict[Call, int]
    _ops: list[Any]
    _late_hooks: list[RemovableHandle]
    _keeper: Keeper | None

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
            if self._keeper is not None:
                self._keeper.call(call, [s.ref], [output])
        else:
            ref_of = self.tracker.ref_of
            tensors = tensors_in(output)
            refs = self.tracker.refs(tensors)
            self.builder.set_call_result(call, refs, template(output, ref_of, pytree_node))
            if self._keeper is not None:
                self._keeper.call(call, refs, tensors)

