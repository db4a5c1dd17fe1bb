"""Call inputs from dataflow: the tensors each call's ops read that came from outside the call."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..graph import GraphBuilder

if TYPE_CHECKING:
    from ..graph import Call, Graph, TensorRef


def add_dataflow_inputs(graph: Graph, starts: dict[Call, int]) -> None:
    """Extend each call's inputs with tensors its ops read that came from outside the call.

    The forward hook only sees positional arguments; this adds keyword arguments, closures and
    attributes read inside. A call's ops are one contiguous index range from ``starts[call]`` (the
    number of ops recorded before it was entered), and a producer ran before the op reading it,
    so a tensor came from outside the call exactly when its producer's index is below the start.
    """
    extra: dict[Call, dict[TensorRef, None]] = {}
    call = start = None
    for op in graph.ops:
        if op.call is not call:  # consecutive ops mostly share their call
            call = op.call
            start = starts[call] if call.parent is not None else None
        if start is None:  # issued outside every call: nothing to extend
            continue
        for ref in op.inputs:
            kind = ref.kind
            if kind != "activation" and kind != "input":
                continue
            producer = ref.producer
            made = -1 if producer is None else producer.index
            if made >= start:  # made inside the op's own call (the common case): read from outside no call
                continue
            at = call
            while at.parent is not None and made < starts[at]:
                refs = extra.get(at)
                if refs is None:
                    refs = extra[at] = {}
                refs[ref] = None
                at = at.parent
    for call, refs in extra.items():
        inputs = call.inputs
        more = [ref for ref in refs if ref not in inputs]  # most were passed to the call: its inputs already
        if more:
            GraphBuilder.set_call_inputs(call, [*inputs, *more])
