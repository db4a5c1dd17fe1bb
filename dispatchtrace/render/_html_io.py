"""The tensors the viewer's details panel lists for calls the capture recorded none for.

A phase page's calls (``views/_phases.py``: backward calls, the optimizer's groups, the root's backward box)
have no inputs or outputs of their own: their module's forward tensors are not what they read. The page
shows the tensors their ops read from outside the call (a gradient, a saved activation, a parameter) as
its inputs, and the tensors made inside that an op outside reads, or that nothing reads (a parameter's
gradient), as its outputs, as a forward call's box lists its arguments and results.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..graph import within

if TYPE_CHECKING:
    from ..graph import Call, Graph, Op, TensorRef


def derived_io(graph: Graph, hidden: frozenset[Op]) -> dict[Call, tuple[list[TensorRef], list[TensorRef]]]:
    """``{call: (inputs, outputs)}`` for every call of ``graph`` (its root included) that holds a shown op and
    has no recorded inputs and outputs; the root also when it has inputs but no outputs (a backward page).

    >>> import torch, dispatchtrace as dt
    >>> from dispatchtrace.views import phase_graph
    >>> lin = torch.nn.Linear(4, 2)
    >>> with dt.capture(lin) as g:
    ...     lin(torch.ones(1, 4)).sum().backward()
    >>> back = phase_graph(g, "backward")
    >>> ins, outs = derived_io(back, frozenset())[back.root]  # the page's <capture>: the loss's seed and x in, the gradients out
    >>> [r.shape_text for r in ins], [r.shape_text for r in outs]
    (['f32[]', 'f32[1, 4]'], ['f32[2]', 'f32[2, 4]'])
    """
    readers: dict[int, list[Op]] = {}  # by id(ref): a view shares its base's storage and version
    for op in graph.ops:
        if op not in hidden:
            for r in op.inputs:
                readers.setdefault(id(r), []).append(op)

    out: dict[Call, tuple[list[TensorRef], list[TensorRef]]] = {}
    for call in [graph.root, *graph.calls]:
        root = call.parent is None
        have_ins = graph.inputs if root else call.inputs
        have_outs = graph.outputs if root else call.outputs
        if have_outs or (have_ins and not root):
            continue
        ops = [op for op in call.all_ops() if op not in hidden]
        if not ops:
            continue
        ins: dict[int, TensorRef] = {}
        outs: dict[int, TensorRef] = {}
        for op in ops:
            for r in op.inputs:
                if r.producer is None or not within(r.producer.call, call):
                    ins.setdefault(id(r), r)
            for r in op.outputs:
                users = readers.get(id(r), [])
                if not users or any(not within(u.call, call) for u in users):
                    outs.setdefault(id(r), r)
        out[call] = (list(have_ins) if root and have_ins else list(ins.values()), list(outs.values()))
    return out
