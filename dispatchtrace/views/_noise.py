"""Noise: bookkeeping ops nothing reads, hidden by every view unless ``noise=True``.

Autograd saves tensors for backward with ``aten::detach`` / ``aten::alias`` that nothing reads;
batch norm makes a scratch ``aten::empty`` and counts ``num_batches_tracked.add_(1)``: ops that touch
no activation. An op is noise when nothing reads it (no user, it writes no activation or input, it
makes no output of the capture) and it is a ``detach``/``alias`` or touches no activation at all.
``tree``, ``collapse``, ``to_dot``, ``render`` and the CLI (``--noise``) use this one rule.
"""

from __future__ import annotations

from ..graph import Graph, Op

#: ops autograd adds to keep a tensor for backward
BOOKKEEPING = frozenset({"aten::detach", "aten::alias"})

#: tensor kinds that carry data through the forward (weights, buffers and constants do not)
FLOWING = ("input", "activation")

OutputKeys = frozenset[tuple[int, int]]


def output_keys(graph: Graph) -> OutputKeys:
    """``(storage, version)`` of every output of the capture: ops making them are never noise."""
    return frozenset((r.storage, r.version) for r in graph.outputs)


def is_noise(op: Op, outputs: OutputKeys = frozenset()) -> bool:
    """Whether ``op`` is bookkeeping nothing reads (see the module docstring)."""
    if op.users or any(r.kind in FLOWING for r in op.mutated) or any((r.storage, r.version) in outputs for r in op.outputs):
        return False
    return op.short in BOOKKEEPING or not any(r.kind in FLOWING for r in op.inputs)


def noise_ops(graph: Graph) -> frozenset[Op]:
    """Every op of ``graph`` that ``is_noise``."""
    outputs = output_keys(graph)
    return frozenset(op for op in graph.ops if is_noise(op, outputs))
