"""What a collective is for: the parameters whose gradients it carries, and the module call it serves.

Read from the graph alone (so a loaded rank file answers too), never from the job's live objects:

- **parameters** (``params``): the ``param`` of the gradient-accumulation ops (``AccumulateGrad``,
  ``op.param``) whose results the collective sends, through the plumbing that packs them: ops that
  wrote the bytes it sends since the last collective on them (DDP copies each gradient into its
  bucket's flat buffer, from the parameter's ``AccumulateGrad`` hook), or ops its inputs came from
  that are no gradient math of the model (no ``grad_of``: FSDP2's ``chunk_cat`` of the unsharded
  gradients). DDP's bucket all-reduce thus names the bucket's parameters, FSDP2's reduce-scatter
  the parameters of the module it reduces.
- **the call it serves** (``serves``): for an op inside a ``fully_shard`` region
  (``FSDP::all_gather (a)``, ``FSDP::post_backward_reduce (a)``), a call of the module the label
  names (the one the op's ``origin`` lies in, else its last call): in backward FSDP2 runs from
  autograd hooks of other nodes, so the op's own call or origin says less. Elsewhere, a forward
  op's call and a backward op's origin.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..graph import Call, Graph, Op, within

_FSDP = re.compile(r"^FSDP::\w+ \((.*)\)$")
_COLLECTIVE = ("c10d.", "_c10d_functional.")


def region_path(region: str | None) -> str | None:
    """The module path a ``fully_shard`` region names, else ``None``.

    >>> region_path("FSDP::post_backward_reduce (layers.0)"), region_path("FSDP::all_gather ()"), region_path("x")
    ('layers.0', '', None)
    """
    found = _FSDP.match(region or "")
    return found.group(1) if found else None


def serves(graph: Graph, op: Op, region: str | None) -> Call | None:
    """The module call ``op`` (a collective inside ``region``) serves (see the module docstring)."""
    path = region_path(region)
    if path is not None:
        calls = [c for c in graph.calls if c.path == path]
        if calls:
            inside = [c for c in calls if within(op.origin, c) or within(op.call, c)]
            return inside[-1] if inside else calls[-1]
    if op.phase == "forward":
        return op.call if op.call.parent is not None else None
    return op.origin


class Gradients:
    """Finds the parameters whose gradients each collective sends; built once per graph."""

    def __init__(self, graph: Graph) -> None:
        self._writers: dict[int, list[Op]] = {}
        for op in graph.ops:
            if op.phase != "forward" and op.mutated and not op.target.startswith(_COLLECTIVE):
                for ref in op.mutated:
                    self._writers.setdefault(ref.storage, []).append(op)
        self._last_read: dict[int, int] = {}

    def params(self, op: Op, sent: Iterable[int]) -> tuple[str, ...]:
        """Parameter names (in the order their gradients were made) whose gradients ``op`` sends;
        ``sent``: the storages of the tensors it sends. Call in op order: each collective's reads
        bound what the next one on the same storage counts."""
        if op.phase == "forward":
            return ()
        found: dict[int, str] = {}
        seen: set[int] = set()
        todo: list[Op] = []
        for storage in set(sent):
            after = self._last_read.get(storage, -1)
            self._last_read[storage] = op.index
            todo += [w for w in self._writers.get(storage, ()) if after < w.index < op.index]
        todo += [p for p in op.producers]
        while todo:
            cur = todo.pop()
            if cur.index in seen or cur.phase != op.phase or cur.index >= op.index:
                continue
            seen.add(cur.index)
            if cur.param is not None:
                found[cur.index] = cur.param
            elif cur.grad_of is None and not cur.target.startswith(_COLLECTIVE):
                todo += cur.producers
        return tuple(dict.fromkeys(found[i] for i in sorted(found)))
