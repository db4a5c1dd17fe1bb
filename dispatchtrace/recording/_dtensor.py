"""DTensor at capture time: the DTensor-level op recorded as a ``DTensorOp`` its local ops point to.

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
from typing import Any

from .._structure import iter_leaves
from .._torch import disable_current_modes, fake_mode_running
from ..graph import DTensorOp, shape_text


class _Running(threading.local):
    """How many DTensor ops this thread's capture modes are running (an outer capture's mode sees
    the inner one's local ops, and must leave out the same fake-tensor ops)."""

    depth = 0


RUNNING = _Running()


def dtensor_type() -> type | None:
    """``DTensor`` when ``torch.distributed.tensor`` is imported (no DTensor can exist before), else ``None``."""
    module = sys.modules.get("torch.distributed.tensor")
    return getattr(module, "DTensor", None) if module is not None else None


def faking() -> bool:
    """Whether a ``FakeTensorMode`` is running the op (DTensor's sharding propagation)."""
    return fake_mode_running()


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
    values = (args, kwargs)
    with disable_current_modes():
        mesh = mesh_of(values, dtensor)
    return DTensorOp(index, str(func), *mesh, described(values, dtensor),
                     described(out if isinstance(out, (tuple, list)) else (out,), dtensor))


