"""DTensor at both levels: the DTensor-level op (placements, mesh) as a record its local ops point to.

A ``DTensor`` op reaches the capture's dispatch mode first. The mode records what it means here
(``DTensorOp``: the target, the mesh, each DTensor argument's global shape and placements) and runs
it with itself pushed again, so that the op comes back once more, is answered ``NotImplemented``
(as ``torch.utils._debug_mode`` does) and DTensor runs it: the local ops and redistributions it
issues are what ``g.ops`` holds, each with ``op.dtensor`` naming the DTensor-level op it ran for.
The ops DTensor's sharding propagation runs under its ``FakeTensorMode`` are no ops of the model
and are not recorded. See docs/semantics.md ("DTensor").
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass
from typing import Any

import torch

from .structure import iter_leaves
from .tensors import shape_text

_FAKE = torch._C._TorchDispatchModeKey.FAKE


class _Running(threading.local):
    """How many DTensor ops this thread's capture modes are running (an outer capture's mode sees
    the inner one's local ops, and must leave out the same fake-tensor ops)."""

    depth = 0


RUNNING = _Running()


@dataclass(frozen=True, slots=True)
class DTensorOp:
    """One op on DTensors, as the program called it (global shapes), run as the local ops that point to it.

    ``index`` numbers the DTensor-level ops of a capture in order; ``mesh`` is the device mesh's
    shape, ``dims`` its dimension names, ``ranks`` its global ranks (row-major); ``inputs`` and
    ``outputs`` each DTensor argument and result as ``"f32[4, 16] S(0)"`` (global shape, one
    placement per mesh dimension: ``S(d)`` sharded on tensor dim d, ``R`` replicated, ``P(sum)``
    partial).

    >>> op = DTensorOp(0, "aten.mm.default", (8,), ("tp",), tuple(range(8)), ("f32[4, 16] R", "f32[16, 32] S(1)"),
    ...                ("f32[4, 32] S(1)",))
    >>> print(op)
    aten.mm.default(f32[4, 16] R, f32[16, 32] S(1)) -> f32[4, 32] S(1) on mesh tp=8
    """

    index: int
    target: str
    mesh: tuple[int, ...]
    dims: tuple[str, ...]
    ranks: tuple[int, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]

    def __str__(self) -> str:
        mesh = " x ".join(f"{d}={n}" if d else str(n) for d, n in zip(self.dims, self.mesh, strict=True))
        return f"{self.target}({', '.join(self.inputs)}) -> {', '.join(self.outputs) or '()'} on mesh {mesh}"


def dtensor_type() -> type | None:
    """``DTensor`` when ``torch.distributed.tensor`` is imported (no DTensor can exist before), else ``None``."""
    module = sys.modules.get("torch.distributed.tensor")
    return getattr(module, "DTensor", None) if module is not None else None


def faking() -> bool:
    """Whether a ``FakeTensorMode`` is running the op (DTensor's sharding propagation)."""
    return torch._C._get_dispatch_mode(_FAKE) is not None


def placement_text(p: Any) -> str:
    """``S(0)``, ``R``, ``P(sum)``; other placements as torch writes them."""
    kind = type(p).__name__
    if kind == "Shard":
        return f"S({p.dim})"
    if kind == "Replicate":
        return "R"
    if kind == "Partial":
        return f"P({p.reduce_op})"
    return str(p)


def described(values: Any, dtensor: type) -> tuple[str, ...]:
    """Each DTensor among ``values`` (arguments or results) as ``"f32[4, 16] S(0)"``."""
    out = []
    for v in iter_leaves(values):
        if isinstance(v, dtensor):
            dtype = str(v.dtype).removeprefix("torch.")
            out.append(f"{shape_text(dtype, tuple(int(s) for s in v.shape))} "
                       f"{','.join(placement_text(p) for p in v.placements)}")
    return tuple(out)


def mesh_of(values: Any, dtensor: type) -> tuple[tuple[int, ...], tuple[str, ...], tuple[int, ...]]:
    """The mesh of the first DTensor among ``values``: shape, dimension names, global ranks."""
    for v in iter_leaves(values):
        if isinstance(v, dtensor):
            mesh = v.device_mesh
            names = mesh.mesh_dim_names or ("",) * mesh.ndim
            return tuple(mesh.shape), tuple(names), tuple(int(r) for r in mesh.mesh.flatten().tolist())
    return (), (), ()


def dtensor_record(index: int, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any,
                   dtensor: type) -> DTensorOp:
    """The ``DTensorOp`` for one DTensor-level op that returned ``out`` (the mesh's tensor is read with
    every dispatch mode set aside: an outer capture must not record dispatchtrace's own reads)."""
    from torch.utils._python_dispatch import _disable_current_modes

    values = (args, kwargs)
    with _disable_current_modes():
        mesh = mesh_of(values, dtensor)
    return DTensorOp(index, str(func), *mesh, described(values, dtensor),
                     described(out if isinstance(out, (tuple, list)) else (out,), dtensor))


def check_dtensor_ops(ops: list[Any]) -> str | None:
    """What is wrong with ``op.dtensor`` over a graph's ops, or ``None``: the local ops of one
    DTensor-level op are consecutive and in one call, and DTensor-level ops are numbered in order."""
    last: DTensorOp | None = None
    seen: set[int] = set()
    call = None
    for op in ops:
        d = getattr(op, "dtensor", None)
        if d is None or d is not last:
            if d is not None:
                if d.index in seen:
                    return f"%{op.name} runs for DTensor op {d.index}, whose local ops ended before"
                if seen and d.index <= max(seen):
                    return f"%{op.name}: DTensor op {d.index} after DTensor op {max(seen)}"
                seen.add(d.index)
                call = op.call
            last = d
        elif op.call is not call:
            return f"%{op.name} runs for DTensor op {d.index} in another call than its first local op"
    return None
