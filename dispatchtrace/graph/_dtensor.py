"""The DTensor-level op (placements, mesh) as a record its local ops point to (``op.dtensor``)."""

from __future__ import annotations

from dataclasses import dataclass


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
