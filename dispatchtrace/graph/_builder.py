"""The one way to add calls and ops to a ``Graph``: the recorder and the JSON loader both build through it.

Like ``torch.fx.Graph.create_node``, each method adds one record and links it where it belongs:
a call to its parent's children and ``graph.calls``; an op to ``graph.ops``, its call's ``ops`` and
``children`` (its producers' ``users`` are found from ``producers`` when first read: ``users.Users``). Records are added in the order they
ran, so indices, children order and op ranges hold by construction (``Graph.lint`` checks them).

>>> from dispatchtrace.graph import TensorRef
>>> b = GraphBuilder()
>>> call = b.add_call(b.graph.root, "fc", "Linear", 0)
>>> x = TensorRef(0, (2,), "float32", "cpu", 0, 0, None, "input", "x")
>>> op = b.add_op(call, "relu", "aten.relu.default", (x,), {}, (x,), ())
>>> y = TensorRef(1, (2,), "float32", "cpu", 1, 0, op, "activation")
>>> b.set_outputs(op, (y,))
>>> b.set_call_inputs(call, [x]); b.set_call_result(call, [y], y)
>>> b.set_graph_io([x], [y])
>>> graph = b.finish(None)
>>> graph.lint()
>>> print(graph)
%relu = aten.relu.default(x) -> f32[2]  # fc
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ._graph import Graph
from ._literal import Literal
from ._records import Call, Op, Phase, Saved, new_call
from ._tensors import TensorRef
from ._users import Users


class GraphBuilder:
    """Adds calls and ops to ``graph`` (a new empty one by default) in execution order."""

    __slots__ = ("graph", "_ops", "_calls", "_users")

    def __init__(self, graph: Graph | None = None) -> None:
        self.graph = graph if graph is not None else Graph()
        self._ops = self.graph.ops
        self._calls = self.graph.calls
        self._users = Users(self._ops)

    def add_call(self, parent: Call, path: str, type_: str, index: int, *, module: Any = None,
                 repeat: int = 1, inputs: tuple[TensorRef, ...] = ()) -> Call:
        """A new call of a module, entered now inside ``parent`` (depth is ``parent.depth + 1``);
        ``inputs``: the distinct refs it read from outside it so far (``set_call_inputs`` adds more)."""
        call = new_call(path, type_, index, parent, module, inputs)
        if repeat != 1:
            call.repeat = repeat
        parent.children.append(call)
        self._calls.append(call)
        return call

    def add_op(self, call: Call, name: str, target: str, args: tuple[Any, ...], kwargs: dict[str, Any],
               inputs: tuple[TensorRef, ...], producers: tuple[Op, ...], *, phase: Phase = "forward") -> Op:
        """A new op run now inside ``call``, reading ``inputs``; each producer lists it as a user.

        Its outputs are set next with ``set_outputs`` (their refs name this op as producer).
        """
        ops = self._ops
        op = Op(len(ops), name, target, call, args, kwargs, inputs, (), False, producers, self._users, phase)
        ops.append(op)
        call.ops.append(op)
        call.children.append(op)
        return op

    @staticmethod
    def set_dtensor(op: Op, record: Any) -> None:
        """``op`` is a local op of the DTensor-level op ``record`` (``dtensor.DTensorOp``)."""
        op.dtensor = record

    @staticmethod
    def set_outputs(op: Op, outputs: tuple[TensorRef, ...], mutated: tuple[TensorRef, ...] = (),
                    is_view: bool = False) -> None:
        """What ``op`` returned, the refs it wrote (after the write), and whether it is a view."""
        op.outputs = outputs
        if mutated or op.rare is not None:  # a rare field: most ops have none (no property read per op)
            op.mutated = mutated
        op.is_view = is_view

    @staticmethod
    def set_attribution(op: Op, *, phase: Phase, origin: Call | None = None, grad_of: Op | None = None,
                        param: str | None = None) -> None:
        """When ``op`` ran and what it belongs to: the forward call it differentiates or recomputes
        (``origin``), the forward op whose autograd node ran it (``grad_of``), the parameter whose
        gradient it accumulates (``param``)."""
        op.phase = phase
        if origin is not None or grad_of is not None or param is not None or op.rare is not None:
            op._set_rare(origin=origin, grad_of=grad_of, param=param)  # one record for the three

    @staticmethod
    def set_call_inputs(call: Call, refs: Iterable[TensorRef]) -> None:
        """The tensors a call read from outside it, each once, in first-read order."""
        refs = tuple(refs)
        call.inputs = refs if len(refs) < 2 else tuple(dict.fromkeys(refs))

    @staticmethod
    def set_call_result(call: Call, outputs: Iterable[TensorRef], returned: Any) -> None:
        """What a call returned: its output refs (each once) and the structure holding them."""
        outputs = tuple(outputs)
        call.outputs = outputs if len(outputs) < 2 else tuple(dict.fromkeys(outputs))
        call.returned = returned

    @staticmethod
    def set_call_arguments(call: Call, positional: Iterable[tuple[str, Any]], keywords: dict[str, Any]) -> None:
        """A top-level call's arguments as passed: ``(name, value)`` pairs, then keywords; refs for tensors."""
        call.arguments = (tuple(positional), dict(keywords))

    def set_constant(self, name: str, literal: Literal) -> None:
        """The value (or why there is none) of the literal constant ``name``."""
        self.graph.constants[name] = literal

    def set_graph_io(self, inputs: Iterable[TensorRef], outputs: Iterable[TensorRef]) -> None:
        """``graph.inputs`` (the refs of kind ``input``) and ``graph.outputs`` (what the top-level
        calls returned), each ref once."""
        self.graph.inputs = list(dict.fromkeys(inputs))
        self.graph.outputs = list(dict.fromkeys(outputs))

    def set_saved(self, saved: Iterable[Saved]) -> None:
        """The storages autograd saved for backward (``graph.saved``), in the order first saved."""
        self.graph.saved = list(saved)

    def add_note(self, text: str) -> None:
        """A sentence saying what the capture could not see (``graph.notes``), each once."""
        if text not in self.graph.notes:
            self.graph.notes.append(text)

    def finish(self, error: BaseException | None, *, complete: bool = True) -> Graph:
        """The graph, with the exception that ended the block (if any); ``complete`` once the block exited."""
        graph = self.graph
        graph.error = error
        graph.complete = complete
        return graph
