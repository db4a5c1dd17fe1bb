"""``values="stats"``: the statistics of each tensor an op returns or writes, taken in the dispatch path."""

from __future__ import annotations

import math
from typing import Any

import torch

from .._structure import tensor_leaves
from .._torch import disable_current_modes, has_values
from ..graph import Op, Stats

Tensor = torch.Tensor
_F64 = torch.float64
_EMPTY = Stats(0, 0, 0, 0, 0, None, None, None, None)
UNINITIALIZED = frozenset({"empty", "empty_like", "empty_strided", "empty_permuted", "new_empty", "new_empty_strided"})
"""Ops whose results are memory not yet written: their bytes are no value (no stats, so no false difference)."""


def stats_of(t: Tensor) -> Stats | None:
    """The ``Stats`` of ``t``'s value now; ``None`` for a tensor without values (meta, fake) or one
    they do not describe (complex, sparse, quantized, nested).

    Four fused reductions and one copy to the host (one sync on a GPU): a float64 sum, ``aminmax``,
    a float64 L2 norm and ``count_nonzero``; the NaN and Inf counts are taken only when the sum is not
    finite (a float64 sum of finite floats always is), and then over the finite elements again.
    Every dispatch mode is set aside meanwhile: the reductions are not ops of the capture.

    >>> str(stats_of(torch.tensor([0.0, 1.0, float("nan"), -3.0])))
    '[-3, 1] mean -0.6667 norm 3.162 zeros 1 nan 1'
    >>> stats_of(torch.ones(2, device="meta")) is None
    True
    """
    if type(t) is not Tensor and not isinstance(t, Tensor):
        return None
    if t.layout is not torch.strided or t.is_complex() or t.is_quantized or t.is_nested or not has_values(t):
        return None
    n = t.numel()
    if n == 0:
        return _EMPTY
    try:
        with disable_current_modes(), torch.no_grad():
            x = t.detach()
            if not x.is_floating_point():
                x = x.to(_F64)  # ints and bools: the same numbers as float64
            total = x.sum(dtype=_F64)
            lo, hi = torch.aminmax(x)
            norm = torch.linalg.vector_norm(x, dtype=_F64)
            nonzero = torch.count_nonzero(x)
            s, lo_, hi_, norm_, nz = torch.stack([total, lo.to(_F64), hi.to(_F64), norm, nonzero.to(_F64)]).tolist()
            if math.isfinite(s):
                return Stats(n, 0, 0, 0, n - int(nz), lo_, hi_, s / n, norm_)
            return _nonfinite(x, n, n - int(nz))
    except (RuntimeError, TypeError, NotImplementedError):  # a dtype a reduction does not take (float8)
        return None


def _nonfinite(x: Tensor, n: int, zeros: int) -> Stats:
    """The rare case: counts of NaN and each Inf, the moments over the finite elements."""
    nan = int(torch.isnan(x).sum())
    posinf = int((x == math.inf).sum())
    neginf = int((x == -math.inf).sum())
    finite = x[torch.isfinite(x)]
    if finite.numel() == 0:
        return Stats(n, nan, posinf, neginf, zeros, None, None, None, None)
    lo, hi = torch.aminmax(finite)
    s, lo_, hi_, norm = torch.stack([finite.sum(dtype=_F64), lo.to(_F64), hi.to(_F64),
                                     torch.linalg.vector_norm(finite, dtype=_F64)]).tolist()
    return Stats(n, nan, posinf, neginf, zeros, lo_, hi_, s / finite.numel(), norm)


class StatsTaker:
    """Per op, after ``Recorder`` recorded it: the stats of each tensor it returned or wrote, and of each
    tensor it read that no op of the capture made (a parameter, an input, the first time it is read),
    into ``stats`` by ref id."""

    def __init__(self, stats: dict[int, Stats]) -> None:
        self.stats = stats
        self._unwritten: set[int] = set()  # storages an ``UNINITIALIZED`` op made and no op wrote yet

    def after(self, op: Op, info: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> None:
        stats = self.stats
        outputs = op.outputs
        mutated = op.mutated
        unwritten = self._unwritten
        if info.base in UNINITIALIZED:
            unwritten.update(r.storage for r in outputs)
            return
        if unwritten:  # what reads memory not yet written makes no value either (a copy of it, a view of it)
            written = {r.storage for r in mutated}
            if any(r.storage in unwritten and r.storage not in written for r in op.inputs):
                unwritten.update(r.storage for r in outputs)
                unwritten.update(written)
                return
            unwritten.difference_update(written)
        if outputs:
            tensors = (out,) if isinstance(out, Tensor) else tensor_leaves(out)
            for ref, t in zip(outputs, tensors, strict=False):
                if ref.id not in stats and ref.storage not in unwritten:  # (a view of memory not yet written: none)
                    s = stats_of(t)
                    if s is not None:
                        stats[ref.id] = s
        if mutated:
            for ref, t in zip(mutated, tensor_leaves(info.written(args, kwargs)), strict=False):
                if ref.id not in stats:
                    s = stats_of(t)
                    if s is not None:
                        stats[ref.id] = s
        leaves = [r for r in op.inputs if r.producer is None and r.id not in stats]
        if leaves and not mutated:  # a tensor written in place is no longer the value the op read
            by_id = {r.id: r for r in leaves}
            for ref, t in zip(op.inputs, tensor_leaves([list(args), list(kwargs.values())]), strict=False):
                if ref.id in by_id and ref.shape == tuple(t.shape):  # (the same leaf, checked)
                    s = stats_of(t)
                    if s is not None:
                        stats[ref.id] = s
