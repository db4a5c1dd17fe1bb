"""The collectives of a capture, in order: kind, group, reduce op, bytes this rank sends and receives, its wait.

>>> import torch, dispatchtrace as dt
>>> with dt.capture() as g:
...     y = torch.ones(2) + 1
>>> collectives(g)
Collectives(0)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from .._structure import iter_leaves
from ..graph import Call, Graph, Group, Op, TensorRef, itemsize
from ._serves import Gradients, serves

# target (without overload) -> (kind, argument positions of what this rank sends, of what it receives;
# -1: the op's results), the reduce op's position, the peer / root's position
_C10D: dict[str, tuple[str, tuple[int, ...], tuple[int, ...], int | None, int | None]] = {
    "c10d.allreduce_": ("all_reduce", (0,), (0,), 2, None),
    "c10d.allreduce_coalesced_": ("all_reduce", (0,), (0,), 2, None),
    "c10d.allgather_": ("all_gather", (1,), (0,), None, None),
    "c10d._allgather_base_": ("all_gather", (1,), (0,), None, None),
    "c10d.allgather_into_tensor_coalesced_": ("all_gather", (1,), (0,), None, None),
    "c10d.reduce_scatter_": ("reduce_scatter", (1,), (0,), 3, None),
    "c10d._reduce_scatter_base_": ("reduce_scatter", (1,), (0,), 3, None),
    "c10d.reduce_scatter_tensor_coalesced_": ("reduce_scatter", (1,), (0,), 3, None),
    "c10d.alltoall_": ("all_to_all", (1,), (0,), None, None),
    "c10d.alltoall_base_": ("all_to_all", (1,), (0,), None, None),
    "c10d.broadcast_": ("broadcast", (0,), (0,), None, 2),
    "c10d.reduce_": ("reduce", (0,), (0,), 2, 3),
    "c10d.gather_": ("gather", (1,), (0,), None, 3),
    "c10d.scatter_": ("scatter", (1,), (0,), None, 3),
    "c10d.send": ("send", (0,), (), None, 2),
    "c10d.recv_": ("recv", (), (0,), None, 2),
    "c10d.recv_any_source_": ("recv", (), (0,), None, None),
    "c10d.barrier": ("barrier", (), (), None, None),
    "_c10d_functional.all_reduce": ("all_reduce", (0,), (-1,), 1, None),
    "_c10d_functional.all_reduce_": ("all_reduce", (0,), (-1,), 1, None),
    "_c10d_functional.all_reduce_coalesced": ("all_reduce", (0,), (-1,), 1, None),
    "_c10d_functional.all_gather_into_tensor": ("all_gather", (0,), (-1,), None, None),
    "_c10d_functional.all_gather_into_tensor_out": ("all_gather", (0,), (-1,), None, None),
    "_c10d_functional.all_gather_into_tensor_coalesced": ("all_gather", (0,), (-1,), None, None),
    "_c10d_functional.reduce_scatter_tensor": ("reduce_scatter", (0,), (-1,), 1, None),
    "_c10d_functional.reduce_scatter_tensor_coalesced": ("reduce_scatter", (0,), (-1,), 1, None),
    "_c10d_functional.all_to_all_single": ("all_to_all", (0,), (-1,), None, None),
    "_c10d_functional.broadcast": ("broadcast", (0,), (-1,), None, 1),
    "_c10d_functional.broadcast_": ("broadcast", (0,), (-1,), None, 1),
}
_WAIT = "_c10d_functional.wait_tensor.default"
_ENTER, _EXIT = "profiler._record_function_enter_new.default", "profiler._record_function_exit._RecordFunction"
_PASS_ON = frozenset({"_c10d_functional._wrap_tensor_autograd.default"})  # the result wrapped, not used yet


def collective_kind(target: str) -> str | None:
    """``"all_reduce"``, ``"all_gather"``, ... for a collective's target, else ``None``.

    >>> collective_kind("c10d.allreduce_.default"), collective_kind("aten.add.Tensor")
    ('all_reduce', None)
    """
    entry = _C10D.get(target.rpartition(".")[0])
    return entry[0] if entry else None


@dataclass(frozen=True, slots=True)
class Collective:
    """One collective op as this rank ran it.

    ``shapes``: what it sends and what it receives, ``f32[4, 8] -> f32[256, 8]``.
    ``sent`` / ``received``: the bytes of this rank's input and output buffers (what the collective
    moves per rank logically, not an algorithm's wire traffic; a broadcast's root sends, the others
    receive). ``peer``: the root of a rooted collective, the other rank of a send / recv (group
    rank). ``wait``: the op where this rank waits for a functional collective's result: the
    ``wait_tensor`` that reads it or, when the result went into an ``AsyncCollectiveTensor`` (whose
    wait runs inside the subclass, unseen by a dispatch mode), the first op that reads it;
    ``None`` for c10d ops (they return after the work is issued) and unused results.
    ``region``: the innermost ``torch.profiler.record_function`` range open around it, as
    ``fully_shard`` labels its work (``FSDP::all_gather (layers.0)``), else ``None``.
    ``serves``: the module call it serves (``views/_serves.py``: the module a ``fully_shard`` region
    names, else a forward op's call, a backward op's origin). ``params``: the parameters whose
    gradients it sends (DDP's bucket, FSDP2's reduce-scatter), in the order they were made.
    """

    op: Op
    kind: str
    group: Group | None
    reduce: str | None
    peer: int | None
    sent: int
    received: int
    shapes: str
    wait: Op | None
    region: str | None = None
    serves: Call | None = None
    params: tuple[str, ...] = ()

    @property
    def call(self) -> Call:
        return self.op.call

    def __str__(self) -> str:
        group = str(self.group) if self.group is not None else "group ?"
        reduce = f" {self.reduce}" if self.reduce else ""
        peer = f" peer {self.peer}" if self.peer is not None else ""
        wait = f", waited at %{self.wait.name}" if self.wait is not None else ""
        wait += f" [{self.region}]" if self.region else ""
        wait += f" for {', '.join(self.params)}" if self.params else ""
        return (f"%{self.op.name} {self.kind}{reduce} {self.shapes} {group}{peer}: "
                f"sends {_size(self.sent)}, receives {_size(self.received)}{wait}  # {(self.serves or self.op.call).label}")


@dataclass(frozen=True, slots=True)
class Collectives:
    """The collectives of one capture, in execution order, with totals."""

    items: tuple[Collective, ...]

    def __iter__(self) -> Any:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> Collective:
        return self.items[i]

    @property
    def sent(self) -> int:
        return sum(c.sent for c in self.items)

    @property
    def received(self) -> int:
        return sum(c.received for c in self.items)

    def __repr__(self) -> str:
        return f"Collectives({len(self.items)})"

    def __str__(self) -> str:
        lines = [str(c) for c in self.items]
        lines.append(f"{len(self.items)} collectives: sends {_size(self.sent)}, receives {_size(self.received)}")
        return "\n".join(lines)


def collectives(graph: Graph) -> Collectives:
    """Every collective op of ``graph`` (c10d and functional), in execution order."""
    out = []
    regions: list[str] = []
    grads = Gradients(graph)
    for op in graph.ops:
        if op.target == _ENTER:
            regions.append(str(op.args[0]) if op.args else "")
        elif op.target == _EXIT:
            if regions:
                regions.pop()
        entry = _C10D.get(op.target.rpartition(".")[0])
        if entry is not None:
            c = _collective(op, *entry)
            region = regions[-1] if regions else None
            sent = [r.storage for i in entry[1] for r in _refs(op, i)]
            out.append(dataclasses.replace(c, region=region, serves=serves(graph, op, region),
                                           params=grads.params(op, sent)))
    return Collectives(tuple(out))


def _collective(op: Op, kind: str, sends: tuple[int, ...], receives: tuple[int, ...], reduce_at: int | None,
                peer_at: int | None) -> Collective:
    args = op.args
    group = next((a for a in iter_leaves(list(args) + list(op.kwargs.values())) if isinstance(a, Group)), None)
    reduce = args[reduce_at] if reduce_at is not None and reduce_at < len(args) else None
    peer = args[peer_at] if peer_at is not None and peer_at < len(args) else None
    out_refs = [r for i in sends for r in _refs(op, i)]
    in_refs = [r for i in receives for r in _refs(op, i)]
    sent, received = sum(map(_nbytes, out_refs)), sum(map(_nbytes, in_refs))
    if kind == "broadcast" and group is not None and isinstance(peer, int):
        root = group.group_rank == peer
        sent, received = (sent, 0) if root else (0, received)
    shapes = f"{', '.join(r.shape_text for r in out_refs) or '()'} -> {', '.join(r.shape_text for r in in_refs) or '()'}"
    wait = _wait(op) if op.target.startswith("_c10d_functional.") else None
    return Collective(op, kind, group, reduce if isinstance(reduce, str) else None,
                      peer if isinstance(peer, int) else None, sent, received, shapes, wait)


def _refs(op: Op, position: int) -> list[TensorRef]:
    if position == -1:
        return list(op.outputs)
    if position >= len(op.args):
        return []
    return [r for r in iter_leaves(op.args[position]) if isinstance(r, TensorRef)]


def _wait(op: Op) -> Op | None:
    """The first ``wait_tensor`` reading the result (through its wrapper), else its first reader."""
    seen = [op]
    first_use: Op | None = None
    while seen:
        current = seen.pop()
        for user in current.users:
            if user.target == _WAIT:
                return user
            if user.target in _PASS_ON:
                seen.append(user)
            elif first_use is None or user.index < first_use.index:
                first_use = user
    return first_use


def _nbytes(ref: TensorRef) -> int:
    n = ref.numel
    return 0 if n is None else n * (itemsize(ref.dtype) or 0)


def _size(n: int) -> str:
    """``512 B``, ``1.5 KiB``, ``3.0 GiB``.

    >>> _size(512), _size(1536), _size(3 * 2**30)
    ('512 B', '1.5 KiB', '3.0 GiB')
    """
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"
