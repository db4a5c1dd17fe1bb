"""Replay's nodes: each recorded op, and the forward's result, as ``torch.fx`` nodes."""

from __future__ import annotations

import operator
from typing import Any

import torch
import torch.fx as fx
import torch.nn as nn

from .._structure import Built, map_leaves, tensor_leaves
from ..errors import ReplayError
from ..graph import Group, Op, TensorRef, is_collective, overload_of
from ._objects import built_type, rebuild

_PRINTABLE = frozenset({bool, int, float, complex, str, type(None), torch.dtype, torch.device, torch.layout,
                        torch.memory_format, slice, type(Ellipsis)})


def resolve_target(target: str) -> Any:
    """The ``OpOverload`` named by an op's ``target``.

    >>> resolve_target("aten.convolution.default")
    <OpOverload(op='aten.convolution', overload='default')>
    """
    found = overload_of(target)
    if found is None:
        raise ReplayError(
            f"cannot find the ATen overload {target!r} (torch.ops.{target}); import the library that defines it "
            f"(e.g. `import torchvision` for torchvision ops) before replaying"
        )
    return found

class _Emitter:
    """The half of a replayer that writes nodes: ``_node`` (a ref's node) comes from the other half."""

    fx: fx.Graph
    root: nn.Module
    env: dict[int, fx.Node]
    external: dict[tuple[str, str | None], fx.Node]
    leaf_storages: set[Any]

    def _node(self, ref: TensorRef, reader: Op | None) -> fx.Node:
        raise NotImplementedError

    def _result(self, value: Any) -> Any:
        """The output structure with nodes for refs; the leaves fx prints as code stay constants."""
        return map_leaves(value, self._result_leaf)

    def _result_leaf(self, value: Any) -> Any:
        if isinstance(value, TensorRef):
            return self._node(value, None)
        if isinstance(value, Built):  # a ModelOutput, a DynamicCache: made again around the replayed tensors
            try:
                built_type(value)
            except ImportError as exc:
                raise ReplayError(str(exc)) from None
            target = f"_built{sum(k[0] == 'built' for k in self.external)}"
            setattr(self.root, target, value)
            maker = self.external["built", target] = self.fx.get_attr(target)
            return self.fx.call_function(rebuild, (maker, self._result(value.fields)))
        return value if type(value) in _PRINTABLE else None

    def _args(self, op: Op) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """``op``'s arguments with nodes for refs (the same walk capture made over the live ones)."""

        def leaf(value: Any) -> Any:
            return self._arg(value, op)

        return map_leaves(op.args, leaf), map_leaves(op.kwargs, leaf)

    def _arg(self, value: Any, reader: Op) -> Any:
        if isinstance(value, TensorRef):
            return self._node(value, reader)
        if type(value) in _PRINTABLE or isinstance(value, (int, float)):
            return value
        # an object fx cannot print as code (a torch.Generator, a script object): an attribute
        key = ("object", str(id(value)))
        node = self.external.get(key)
        if node is None:
            target = f"_object{sum(k[0] == 'object' for k in self.external)}"
            setattr(self.root, target, value)
            node = self.external[key] = self.fx.get_attr(target)
        return node

    def _emit(self, op: Op) -> None:
        func = resolve_target(op.target)
        args, kwargs = self._args(op)
        if any(ref.storage in self.leaf_storages for ref in op.mutated):
            # a write into a parameter or input (or a view of one) ran in eager under no_grad, the only
            # mode where a leaf that requires grad may be written in place: replay it the same way
            node = self.fx.create_node("call_function", leaf_write, (func, *args), kwargs, name=op.name)
            node.meta["dispatchtrace_aten"] = func
        else:
            node = self.fx.create_node("call_function", func, args, kwargs, name=op.name)
        node.meta["dispatchtrace_op"] = op.index
        outs = op.outputs
        if not outs:
            return
        returns = [str(r.type) for r in func._schema.returns]
        if returns == ["Tensor"] and len(outs) == 1:
            self.env[outs[0].id] = node
            return
        if returns == ["List[Tensor]"] or (len(returns) == len(outs) and all(r == "Tensor" for r in returns)):
            source = node
        else:
            source = self.fx.call_function(tensor_leaves, (node,))
            source.meta["dispatchtrace_op"] = op.index
        for i, ref in enumerate(outs):
            item = self.fx.call_function(operator.getitem, (source, i))
            item.meta["dispatchtrace_op"] = op.index
            self.env[ref.id] = item


def _refuse_collectives(ops: list[Op]) -> None:
    """Replay runs one process with no process group: a collective (c10d or functional) among the
    replayed ops cannot run."""
    for op in ops:
        if is_collective(op.target):
            group = next((str(a) for a in op.args if isinstance(a, Group)), "its process group")
            raise ReplayError(
                f"%{op.name} ({op.target}, over {group}) is a collective: replay runs one process and cannot "
                f"reproduce what other ranks send; replay a capture of the model without torch.distributed")


def leaf_write(func: Any, *args: Any, **kwargs: Any) -> Any:
    """``func(*args, **kwargs)``, an in-place op on a parameter or input: under ``no_grad`` when it
    writes a leaf that requires grad (or a view of one) with grad mode on, which autograd refuses
    and which therefore ran under ``no_grad`` in the forward (``self.w.mul_(1.5)`` in a ``no_grad`` block)."""
    if torch.is_grad_enabled() and any(_grad_leaf(a) for a in tensor_leaves((args, kwargs))):
        with torch.no_grad():
            return func(*args, **kwargs)
    return func(*args, **kwargs)


def _grad_leaf(t: torch.Tensor) -> bool:
    base = t if t._base is None else t._base
    return base.is_leaf and base.requires_grad
