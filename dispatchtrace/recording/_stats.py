"""``values="stats"``: the statistics of each tensor an op returns or writes, taken in the dispatch path."""

from __future__ import annotations

import math
from typing import Any

import torch

from .._structure import tensor_leaves
from .._torch import has_values, modes_set_aside
from ..graph import Op, Stats

Tensor = torch.Tensor
_F64 = torch.float64
_F32 = torch.float32
_EMPTY = Stats(0, 0, 0, 0, 0, None, None, None, None)
UNINITIALIZED = frozenset({"empty", "empty_like", "empty_strided", "empty_permuted", "new_empty", "new_empty_strided"})
"""Ops whose results are memory not yet written: their bytes are no value (no stats, so no false difference)."""


def stats_of(t: Tensor) -> Stats | None:
    """The ``Stats`` of ``t``'s value now; ``None`` for a tensor without values (meta, fake) or one
    they do not describe (complex, sparse, quantized, nested).

    Fused reductions, each one pass: ``aminmax``, a sum, an L2 norm and, where ``[min, max]`` holds 0,
    ``count_nonzero`` (of the bits, ``_nonzero``). Float32 and narrower floats are summed by torch's vectorized cascade reductions in
    float32 (relative error about 1e-7 log n), the results kept as float64; a float32 sum or norm that
    overflows is taken again in float64, and float64 tensors, integers and bools are summed in float64.
    The NaN and Inf counts are taken only when the sum is not finite (it always is when every element is,
    short of that overflow). Every dispatch mode is set aside meanwhile: the reductions are no ops of the
    capture. On a GPU the results come to the host in one copy (one sync).

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
        with modes_set_aside():  # (detached: autograd records nothing, no no_grad() to enter)
            x = t.detach()
            if not x.is_floating_point():
                x = x.to(_F64)  # ints and bools: the same numbers as float64
            acc = _F64 if x.dtype is _F64 else _F32
            if x.device.type == "cpu":  # no sync to save: read each result as it comes, skip what is known
                lo, hi = torch.aminmax(x)
                lo_, hi_ = lo.item(), hi.item()
                s = x.sum(dtype=acc).item()
                norm_ = torch.linalg.vector_norm(x, dtype=acc).item()
                zeros = n - _nonzero(x) if lo_ <= 0.0 <= hi_ else 0
            else:
                lo, hi = torch.aminmax(x)
                parts = [x.sum(dtype=acc), lo.to(acc), hi.to(acc), torch.linalg.vector_norm(x, dtype=acc),
                         torch.count_nonzero(x).to(acc)]
                s, lo_, hi_, norm_, nz = torch.stack(parts).tolist()
                zeros = n - int(nz)
            if math.isfinite(s) and math.isfinite(norm_):
                return Stats(n, 0, 0, 0, zeros, lo_, hi_, s / n, norm_)
            if math.isfinite(lo_) and math.isfinite(hi_):  # every element finite: float32 overflowed
                x = x.to(_F64)
                return Stats(n, 0, 0, 0, zeros, lo_, hi_, x.sum().item() / n, torch.linalg.vector_norm(x).item())
            return _nonfinite(x, n)
    except (RuntimeError, TypeError, NotImplementedError):  # a dtype a reduction does not take (float8)
        return None


_BITS = {2: (torch.int16, -(1 << 15)), 4: (torch.int32, -(1 << 31)), 8: (torch.int64, -(1 << 63))}


def _nonzero(x: Tensor) -> int:
    """``count_nonzero(x)``, counted on ``x``'s bits: torch counts integers branch-free, floats with a branch
    that a tensor of many zeros (a ReLU's result) makes 20 times slower. ``-0.0`` is the one zero whose bits
    are not 0: the smallest integer, so the bits' minimum says whether there is one (then ``|x|``'s bits)."""
    entry = _BITS.get(x.element_size()) if x.is_floating_point() else None
    if entry is None:
        return int(torch.count_nonzero(x))
    bits, negative_zero = entry
    v = x.view(bits)
    if v.min().item() == negative_zero:
        return int(torch.count_nonzero(torch.abs(x).view(bits)))
    return int(torch.count_nonzero(v))


def _nonfinite(x: Tensor, n: int) -> Stats:
    """The rare case: counts of NaN, each Inf and zeros, the moments over the finite elements (in float64)."""
    zeros = n - _nonzero(x)
    nan = int(torch.isnan(x).sum())
    posinf = int((x == math.inf).sum())
    neginf = int((x == -math.inf).sum())
    finite = x[torch.isfinite(x)].to(_F64)
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
