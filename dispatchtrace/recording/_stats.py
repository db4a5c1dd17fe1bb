"""``values="stats"``: the statistics of each tensor an op returns or writes, taken in the dispatch path."""

from __future__ import annotations

import functools
import math
from typing import Any

import torch

from .._structure import tensor_leaves
from .._torch import has_values, modes_set_aside
from ..graph import SCHEMAS as _schemas
from ..graph import Op, Stats, schema_of

Tensor = torch.Tensor
_F64 = torch.float64
_F32 = torch.float32
_EMPTY = Stats(0, 0, 0, 0, 0, None, None, None, None)
UNINITIALIZED = frozenset({"empty", "empty_like", "empty_strided", "empty_permuted", "new_empty", "new_empty_strided"})
"""Ops whose results are memory not yet written: their bytes are no value (no stats, so no false difference)."""
SAME_ELEMENTS = frozenset({"t", "transpose", "permute", "view", "_unsafe_view", "_reshape_alias", "alias", "detach",
                           "squeeze", "unsqueeze", "clone"})
"""Ops whose one result holds the very elements of their first input, rearranged at most: when the result has
as many of the same dtype (not ``view(dtype)``), it has the input's stats (no second pass over the same numbers:
a transposed weight, a flatten)."""


def stats_of(t: Tensor) -> Stats | None:
    """The ``Stats`` of ``t``'s value now; ``None`` for a tensor without values (meta, fake) or one
    they do not describe (complex, sparse, quantized, nested).

    Fused reductions, each one pass: ``aminmax``, a sum, an L2 norm and, where ``[min, max]`` holds 0, a
    count of zeros (on the bits, ``_nonzero``). A permuted dense tensor (a transposed weight) is read as the
    flat block of memory it covers: the same elements, in the order torch reads fastest. Sums and norms
    accumulate in float64: tensors of at most ``_SMALL`` elements directly, larger float32 and narrower ones
    in blocks of 64 to ``_BLOCK`` consecutive elements, each block summed and normed by torch's vectorized
    float32 reductions (relative error about 1e-7 log2 _BLOCK of the block's), the blocks' sums and norms
    combined in float64 (``_sum_norm``): as fast as one float32 pass, where torch's float64 sum of a float32
    tensor costs six, and accurate where torch's float32 norm of a whole tensor is not (8 M elements of 0.1:
    off by 0.7%). A sum or norm that overflows float32 is taken again in float64. The NaN and Inf counts
    are taken only when the sum is not finite (it always is when every element is, short of that
    overflow). Every dispatch mode is set aside meanwhile: the reductions are no ops of the capture. On a
    GPU the reductions are torch's float64 ones and the results come to the host in one copy (one sync).

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
            if x.device.type == "cpu":  # no sync to save: read each result as it comes, skip what is known
                x = _flat(x)
                lo, hi = torch.aminmax(x)
                lo_, hi_ = lo.item(), hi.item()
                s, norm_ = _sum_norm(x, n)
                zeros = n - _nonzero(x) if lo_ <= 0.0 <= hi_ else 0
            else:
                lo, hi = torch.aminmax(x)
                parts = [x.sum(dtype=_F64), lo.to(_F64), hi.to(_F64), torch.linalg.vector_norm(x, dtype=_F64),
                         torch.count_nonzero(x).to(_F64)]
                s, lo_, hi_, norm_, nz = torch.stack(parts).tolist()
                zeros = n - int(nz)
            if math.isfinite(s) and math.isfinite(norm_):
                return Stats(n, 0, 0, 0, zeros, lo_, hi_, s / n, norm_)
            if math.isfinite(lo_) and math.isfinite(hi_):  # every element finite: a float32 block overflowed
                x = x.to(_F64)
                return Stats(n, 0, 0, 0, zeros, lo_, hi_, x.sum().item() / n, torch.linalg.vector_norm(x).item())
            return _nonfinite(x, n)
    except (RuntimeError, TypeError, NotImplementedError):  # a dtype a reduction does not take (float8)
        return None


_SMALL = 4096
_BLOCK = 1024


def _flat(x: Tensor) -> Tensor:
    """``x`` as one flat run of memory when it is a permutation of one (``t()`` of a weight, a permuted
    activation): the same multiset of elements, so the same stats, read at a contiguous tensor's speed
    (torch's reductions over a transposed 2048 x 1000 weight take seven times as long). Any other layout
    (a gapped or overlapping view) is returned as it is."""
    if x.is_contiguous():
        return x.view(-1)
    y = x.permute(sorted(range(x.dim()), key=lambda d: -x.stride(d)))  # (size-1 dims: ignored by is_contiguous)
    return y.view(-1) if y.is_contiguous() else x


@functools.lru_cache(maxsize=4096)
def _block(n: int) -> int:
    """The largest divisor of ``n`` from 64 to ``_BLOCK`` (blocks with no remainder to sum apart), 0 if none."""
    return next((b for b in range(_BLOCK, 63, -1) if n % b == 0), 0)


def _sum_norm(x: Tensor, n: int) -> tuple[float, float]:
    """The sum and the L2 norm of ``x``'s elements, accumulated in float64 (see ``stats_of``)."""
    if x.dtype is _F64 or n <= _SMALL or x.dim() != 1 or not x.is_contiguous():  # (small, float64, or not flat)
        return x.sum(dtype=_F64).item(), torch.linalg.vector_norm(x, dtype=_F64).item()
    block = _block(n)
    whole = n if block else n - n % _BLOCK
    blocks = x[:whole].view(-1, block or _BLOCK)
    s = blocks.sum(1, dtype=_F32).sum(dtype=_F64).item()
    norm = torch.linalg.vector_norm(torch.linalg.vector_norm(blocks, dim=1, dtype=_F32), dtype=_F64).item()
    if whole < n:
        rest = x[whole:]
        s += rest.sum(dtype=_F64).item()
        norm = math.hypot(norm, torch.linalg.vector_norm(rest, dtype=_F64).item())
    return s, norm


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
    tensor it read whose current value has none yet, into ``stats`` by ref id: a tensor no op of the capture
    made (a parameter, a buffer, an input, optimizer state) where it is first read, and a view read after a
    write to its storage (a sibling view written in place: its ref is new, its value may be too).

    An op that writes a tensor reads its value from before the write: ``before`` (called before the op runs)
    takes the stats of the tensors of such an op that will need them, ``after`` hands them to their refs.
    ``live`` is the tracker's ``id(tensor) -> TensorState``, to know which ref a tensor will be read as."""

    def __init__(self, stats: dict[int, Stats], live: dict[int, Any]) -> None:
        self.stats = stats
        self._live = live
        self._unwritten: set[int] = set()  # storages an ``UNINITIALIZED`` op made and no op wrote yet
        self._none: set[int] = set()  # refs ``stats_of`` found no values in (meta, complex): not asked again
        self._pre: dict[int, Stats | None] = {}  # id(tensor) -> its stats before the op that writes it ran

    def before(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Before an op runs: when it writes a tensor, the stats of each of its tensor arguments whose
        current value has none (their values after the op are others)."""
        self._pre = {}
        try:
            info = _schemas[id(func)]
        except KeyError:
            info = schema_of(func)
        if not info.writes or info.base in UNINITIALIZED:
            return
        live, stats, none, unwritten = self._live, self.stats, self._none, self._unwritten
        pre = self._pre
        for t in tensor_leaves([list(args), list(kwargs.values())]):
            s = live.get(id(t))
            if s is not None and s() is t and s.ref.version == s.storage.version:
                rid = s.ref.id
                if rid in stats or rid in none or s.storage.sid in unwritten:
                    continue
            elif s is not None and s() is t and s.storage.sid in unwritten:
                continue
            if id(t) not in pre:
                pre[id(t)] = stats_of(t)

    def _inputs(self, op: Op, args: tuple[Any, ...], kwargs: dict[str, Any], wrote: bool) -> None:
        """The stats of ``op``'s inputs that have none: taken before the op where it wrote, else now."""
        stats, none, unwritten = self.stats, self._none, self._unwritten
        need = [i for i, r in enumerate(op.inputs) if r.id not in stats and r.id not in none and r.storage not in unwritten]
        if not need:
            return
        pre = self._pre
        tensors = tensor_leaves([list(args), list(kwargs.values())])
        for i in need:
            if i >= len(tensors):
                break
            ref, t = op.inputs[i], tensors[i]
            if ref.shape != tuple(t.shape):  # (the same leaf, checked)
                continue
            if wrote:
                if id(t) not in pre:
                    continue
                s = pre[id(t)]
            else:
                s = stats_of(t)
            if s is None:
                none.add(ref.id)
            else:
                stats[ref.id] = s

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
        self._inputs(op, args, kwargs, bool(mutated))
        self._pre = {}
        if outputs:
            tensors = (out,) if isinstance(out, Tensor) else tensor_leaves(out)
            same = None
            if info.base in SAME_ELEMENTS and op.inputs and len(outputs) == 1:
                source = op.inputs[0]
                same = stats.get(source.id) if source.dtype == outputs[0].dtype else None
            for ref, t in zip(outputs, tensors, strict=False):
                if ref.id not in stats and ref.storage not in unwritten:  # (a view of memory not yet written: none)
                    s = same if same is not None and same.numel == t.numel() else stats_of(t)
                    if s is not None:
                        stats[ref.id] = s
        if mutated:
            for ref, t in zip(mutated, tensor_leaves(info.written(args, kwargs)), strict=False):
                if ref.id not in stats:
                    s = stats_of(t)
                    if s is not None:
                        stats[ref.id] = s
