"""Lint's check of ``op.dtensor``: the local ops of one DTensor-level op are consecutive and in one call."""

from __future__ import annotations

from typing import Any

from .._dtensor import DTensorOp


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
