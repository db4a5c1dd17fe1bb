"""Replay: rebuild a capture as an executable ``torch.fx.GraphModule`` of the ATen ops it recorded."""

from __future__ import annotations

import keyword
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

import torch
import torch.fx as fx
import torch.nn as nn

from .._structure import iter_leaves
from ..errors import ReplayError
from ..graph import Call, Op, TensorRef, input_construction
from ._emit import _PRINTABLE, _Emitter, _refuse_collectives
from ._forward import output_structure, replayed_ops

if TYPE_CHECKING:
    from ..graph import Graph

Constants = Mapping[str, torch.Tensor] | Literal["error", "inputs"]


def to_fx(graph: Graph, model: nn.Module | None = None, *, constants: Constants = "error") -> fx.GraphModule:
    """A ``GraphModule`` that re-runs the captured ATen ops, in order, on new inputs.

    It takes the forward's arguments as they were passed (``Call.arguments``: ``mha(x, x, x)``
    gives ``gm(x, x, x)``, keyword tensors stay keywords), else ``graph.inputs``; it reads
    parameters and buffers from ``model`` by their dotted names (``get_attr``: it shares them). In-place ops,
    views and ``out=`` ops run as they ran, on the replayed tensors.

    It returns what the forward returned, in its structure (``output_structure``): when the
    capture holds exactly one top-level module call and that call's ``returned`` is known, a
    tensor stays a tensor and lists, tuples and dicts keep their nesting (namedtuples and
    dataclasses come back as dicts of their fields; ints, strings and ``None`` as they were; pytree
    nodes such as ``ModelOutput`` through torch's pytree, other objects holding tensors, such as a
    ``DynamicCache``, made again with the replayed tensors: ``structure.rebuild``).
    Otherwise (several top-level calls, none) it returns ``graph.outputs`` as a flat tuple.

    It replays the forward function only (``replayed_ops``): every op that ran inside a top-level
    module call, whatever its phase (a ``torch.autograd.grad`` inside ``forward`` is part of what
    the forward computes), and the forward ops at the root; a training step's top-level backward,
    recomputation and optimizer ops, and root ops that read what those produced, are left out.

    Literal constants replay from ``graph.constants``. Other tensors from outside the capture
    that are no input, parameter or buffer of ``model`` (``kind == "constant"``) raise
    ``ReplayError`` naming each one; ``constants={name: tensor}`` supplies values,
    ``constants="inputs"`` makes extra placeholders of them (``gm.meta["dispatchtrace_inputs"]``).

    >>> import torch, dispatchtrace as dt
    >>> lin, x = torch.nn.Linear(4, 2), torch.randn(3, 4)
    >>> with dt.capture(lin) as g:
    ...     y = lin(x).relu_()
    >>> gm = g.to_fx(lin)
    >>> torch.equal(gm(x), y)
    True
    >>> gm.meta["dispatchtrace_inputs"]
    ['input']
    """
    return _Replayer(graph, model, constants).build()


_IDENT = re.compile(r"[^0-9a-zA-Z_]+")


def _ident(name: str) -> str:
    ident = _IDENT.sub("_", name).strip("_") or "t"
    if ident[0].isdigit() or keyword.iskeyword(ident):
        ident = "_" + ident
    return ident


class _Replayer(_Emitter):
    """One ``to_fx`` call: walks the ops once, mapping every tensor ref to the node that holds it."""

    def __init__(self, graph: Graph, model: nn.Module | None, constants: Constants) -> None:
        self.g = graph
        self.model = model
        self.constants = constants
        self.fx = fx.Graph()
        self.env: dict[int, fx.Node] = {}
        self.external: dict[tuple[str, str | None], fx.Node] = {}
        self.root = nn.Module()
        self.input_names: list[str] = []
        self.attrs: dict[str, torch.Tensor] = {}
        self.construction = input_construction(graph)
        built = {op.index for op in self.construction.ops}
        self.ops = [op for op in replayed_ops(graph) if op.index not in built]
        self.made = {ref.id for ref in self.construction.made}
        self.left = {op.index for op in graph.ops} - {op.index for op in self.ops}
        if model is not None:
            self.attrs.update(dict(model.named_parameters(remove_duplicate=False)))
            self.attrs.update(dict(model.named_buffers(remove_duplicate=False)))

    def build(self) -> fx.GraphModule:
        g = self.g
        if not g.complete:
            raise ReplayError("the capture is still recording; call to_fx after the `with dt.capture(...)` block")
        self._check_externals()
        _refuse_collectives(self.ops)
        signature = self._arguments()
        if not signature:
            for ref in g.inputs:
                self._placeholder(ref)
        if self.constants == "inputs":
            for ref in self._refs_of_kind("constant"):
                if not self._has_value(ref):
                    self._placeholder(ref)
        self.leaf_storages = {ref.storage for op in self.ops for ref in op.inputs
                              if ref.producer is None and ref.kind in ("parameter", "input")}
        for op in self.ops:
            self._emit(op)
        self.fx.output(self._result(output_structure(g)))
        gm = fx.GraphModule(self.root, self.fx, class_name="Replay")
        gm.meta["dispatchtrace_inputs"] = list(self.input_names)
        gm.meta["dispatchtrace_signature"] = "arguments" if signature else "inputs"
        return gm

    # ---- the forward's own arguments -----------------------------------------------------------
    def _arguments(self) -> bool:
        """One placeholder per argument of the only top-level call, as it was passed (positional,
        then keywords); the input tensors inside each are picked out of it. False (placeholders are
        ``graph.inputs``) when there are several top-level calls, none, or inputs outside them."""
        top = [c for c in self.g.root.children if isinstance(c, Call)]
        if len(top) != 1 or top[0].arguments is None:
            return False
        positional, keywords = top[0].arguments
        pairs = [*positional, *keywords.items()]
        passed = {ref.name for _, value in pairs for ref in iter_leaves(value) if isinstance(ref, TensorRef)}
        # an input only input construction reads (the Python data of ``torch.tensor(ids)``) is no replay input
        read = {r.name for op in self.ops for r in op.inputs if r.kind == "input"}
        read.update(r.name for r in self.g.outputs if r.kind == "input")
        if any(ref.name not in passed and (ref.name in read or not self.construction) for ref in self.g.inputs):
            return False
        # keywords that hold no tensor go last, with what was passed as their default (the replay
        # ran with those values: its ops hold them), so gm(x, x, x) works for mha(x, x, x, need_weights=False)
        plain = [(k, v) for k, v in keywords.items() if type(v) in _PRINTABLE]
        pairs = [*positional, *[(k, v) for k, v in keywords.items() if type(v) not in _PRINTABLE]]
        used = {"self"}
        for i, (name, value) in enumerate([*pairs, *plain]):
            ident = _ident(name)
            while ident in used:
                ident += "_"
            used.add(ident)
            if i < len(pairs):
                self._bind(value, self.fx.placeholder(ident))
            else:
                self.fx.placeholder(ident, default_value=value)
            self.input_names.append(ident)
        return True

    def _bind(self, value: Any, node: fx.Node) -> None:
        """Map each input ref inside ``value`` (what ``node`` holds) to ``node`` or an item of it."""
        if isinstance(value, TensorRef):
            key = (value.kind, value.name)
            if value.id in self.made and value.producer is not None:  # built inside the block: an input all the same
                if value.id not in self.env:
                    self.env[value.id] = node
                    node.meta.setdefault("dispatchtrace_ref", value)
            elif (value.kind == "input" or value.id in self.made) and key not in self.external:
                self.external[key] = node
                node.meta.setdefault("dispatchtrace_ref", value)
            return
        items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, (list, tuple)) else ()
        for key, item in items:
            if any(isinstance(r, TensorRef) and (r.kind, r.name) not in self.external and r.id not in self.env
                   for r in iter_leaves(item)):
                self._bind(item, self.fx.call_function(_pick, (node, key)))

    # ---- externals ---------------------------------------------------------------------------
    def _refs_of_kind(self, kind: str) -> list[TensorRef]:
        seen: dict[str | None, TensorRef] = {}
        for op in self.ops:
            for ref in op.inputs:
                if ref.producer is None and ref.kind == kind and ref.name not in seen:
                    seen[ref.name] = ref
        for ref in self.g.outputs:
            if ref.producer is None and ref.kind == kind and ref.name not in seen:
                seen[ref.name] = ref
        return list(seen.values())

    def _check_externals(self) -> None:
        missing: list[str] = []
        for kind in ("parameter", "buffer"):
            for ref in self._refs_of_kind(kind):
                if ref.name not in self.attrs:
                    missing.append(f"{kind} {ref.name} ({ref.shape_text}, not in the model passed to to_fx)")
        if self.constants != "inputs":
            given = self.constants if isinstance(self.constants, Mapping) else {}
            for ref in self._refs_of_kind("constant"):
                if ref.name in given or self._has_value(ref):
                    continue
                literal = self.g.constants.get(ref.name or "")
                if literal is not None:
                    why = f"no value recorded: {literal.why}"
                else:
                    why = ""
                if isinstance(self.constants, Mapping):
                    why = f"not in `constants`{'; ' * bool(why)}{why}"
                where = f"first read by {self._first_reader(ref)}"
                missing.append(f"constant {ref.name} ({ref.shape_text}, {where}{'; ' * bool(why)}{why})")
        if missing:
            raise ReplayError(
                "these tensors came from outside the capture and are not inputs, parameters or buffers of the "
                "model, so the record alone cannot replay them:\n  " + "\n  ".join(missing) + "\n"
                "pass their values with to_fx(model, constants={name: tensor}), or constants='inputs' to make them "
                "extra placeholders (see gm.meta['dispatchtrace_inputs']); pass the model that owns the parameters"
            )

    def _has_value(self, ref: TensorRef) -> bool:
        literal = self.g.constants.get(ref.name or "")
        return literal is not None and literal.values is not None

    def _first_reader(self, ref: TensorRef) -> str:
        for op in self.ops:
            if any(r.producer is None and r.kind == ref.kind and r.name == ref.name for r in op.inputs):
                return f"%{op.name} = {op.target} in {op.call.label}"
        return "the capture's outputs"

    def _placeholder(self, ref: TensorRef) -> fx.Node:
        key = (ref.kind, ref.name)
        node = self.external.get(key)
        if node is None:
            node = self.fx.placeholder(_ident(ref.name or f"t{ref.id}"))
            node.meta["dispatchtrace_ref"] = ref
            self.external[key] = node
            self.input_names.append(ref.name or node.name)
        return node

    def _attr(self, ref: TensorRef) -> fx.Node:
        key = (ref.kind, ref.name)
        node = self.external.get(key)
        if node is not None:
            return node
        if ref.kind == "constant":
            assert ref.name is not None
            target = _ident(ref.name)
            given = self.constants if isinstance(self.constants, Mapping) else {}
            value = given[ref.name] if ref.name in given else self.g.constants[ref.name].tensor(ref.device)
            self.root.register_buffer(target, value)
        else:
            assert ref.name is not None
            target = ref.name
            _set_attr(self.root, target, self.attrs[target])
        node = self.external[key] = self.fx.get_attr(target)
        node.meta["dispatchtrace_ref"] = ref
        return node

    # ---- tensors and ops ---------------------------------------------------------------------
    def _node(self, ref: TensorRef, reader: Op | None) -> fx.Node:
        node = self.env.get(ref.id)
        if node is not None:
            return node
        producer = ref.producer
        if producer is not None and producer.index in self.left:
            raise ReplayError(self._left_out(ref, producer, reader))
        if producer is not None:
            node = self._refreshed(ref, producer)
        elif ref.kind == "input" or (ref.kind == "constant" and self.constants == "inputs"):
            node = self.external.get((ref.kind, ref.name))
            if node is None:
                where = f"read by %{reader.name} in {reader.call.label}" if reader else "returned"
                raise ReplayError(
                    f"input {ref.name} ({ref.shape_text}, {where}) is not among graph.inputs; it was first seen "
                    f"outside any module call. Capture the model call alone: `with dt.capture(model) as g: model(x)`"
                )
        else:
            node = self._attr(ref)
        self.env[ref.id] = node
        return node

    def _left_out(self, ref: TensorRef, producer: Op, reader: Op | None) -> str:
        """Why a replayed op cannot read ``ref``: replay left its producer out (``replayed_ops``)."""
        first = producer
        while first.phase == "forward":  # a root op left out for reading what a left-out op produced
            first = next(r.producer for r in first.inputs if r.producer is not None and r.producer.index in self.left)
        why = "it is" if first is producer else "it reads what"
        where = f"%{reader.name} in {reader.call.label}" if reader else "the forward's result"
        return (f"{where} reads {ref.shape_text} %{producer.name}, which replay leaves out ({why} a {first.phase} op at the "
                f"top level of the block{' produced' if first is not producer else ''}): replay runs the forward function "
                f"only, the ops inside the top-level calls and the forward ops at the root; capture the forward alone")

    def _refreshed(self, ref: TensorRef, producer: Op) -> fx.Node:
        """A ref made again after its storage was written: the node of its producer's output ``ref.slot``."""
        outs = producer.outputs
        if ref.slot >= len(outs) or outs[ref.slot].storage != ref.storage:
            raise ReplayError(f"{ref!r} says it is output {ref.slot} of %{producer.name}, which has "
                              f"{len(outs)} outputs of other storage: the record is inconsistent (a capture bug)")
        return self.env[outs[ref.slot].id]

def _pick(value: Any, key: Any) -> Any:
    """``value[key]``; a field of a namedtuple or dataclass argument (recorded as a dict) by name."""
    if isinstance(value, (list, tuple, dict)) and not (isinstance(key, str) and hasattr(value, "_fields")):
        return value[key]
    return getattr(value, key)


def _set_attr(root: nn.Module, dotted: str, value: torch.Tensor) -> None:
    *path, leaf = dotted.split(".")
    mod = root
    for part in path:
        sub = getattr(mod, part, None)
        if not isinstance(sub, nn.Module):
            sub = nn.Module()
            mod.add_module(part, sub)
        mod = sub
    if isinstance(value, nn.Parameter):
        mod.register_parameter(leaf, value)
    else:
        mod.register_buffer(leaf, value)
