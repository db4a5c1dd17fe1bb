"""``values="stats"``: the statistics of one tensor value, taken in the dispatch path (``stats_of``)."""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from typing import Literal, get_args

import torch

from .._torch import has_values, modes_set_aside
from ..graph import Stats

Tensor = torch.Tensor
_Parameter = torch.nn.Parameter
_F64 = torch.float64
_F32 = torch.float32
_HALF = (torch.bfloat16, torch.float16)
_EMPTY = Stats(0, 0, 0, 0, 0, None, None, None, None)

Extra = Literal["mean", "zeros", "fingerprint"]
"""What ``capture(values="stats", stats=...)`` adds to the default statistics (the counts of NaN and Inf, the
range, the L2 norm): ``"mean"``, the mean (torch's cascaded sum: one more pass, about 0.2x of the default's
cost on ResNet-50's tensors); ``"zeros"``, the exact count of zeros (a count on the bits where ``[min, max]``
holds 0: about 0.8x); ``"fingerprint"``, a 64-bit hash of each value's bits in element order, for run-to-run
determinism checks (``Stats.bitwise_equal``; about 15x the default's cost)."""
EXTRAS: tuple[Extra, ...] = get_args(Extra)


def extras(stats: Iterable[str], values: str) -> frozenset[str]:
    """``capture(stats=...)`` checked: a set of ``EXTRAS``, given with ``values="stats"``.

    >>> sorted(extras(("zeros", "fingerprint"), "stats"))
    ['fingerprint', 'zeros']
    >>> sorted(extras(["mean"], "stats"))
    ['mean']
    >>> extras("zeros", "stats")
    frozenset({'zeros'})
    """
    chosen = frozenset((stats,) if isinstance(stats, str) else stats)
    unknown = sorted(chosen - set(EXTRAS))
    if unknown:
        raise ValueError(f"stats={unknown[0]!r} is not one of {', '.join(map(repr, EXTRAS))}: \"mean\" adds the mean, "
                         f"\"zeros\" counts the zeros exactly, \"fingerprint\" hashes each value's bits (run-to-run "
                         f"determinism checks)")
    if chosen and values != "stats":
        raise ValueError(f"stats={tuple(sorted(chosen))!r} adds to the statistics of values=\"stats\": "
                         f"capture with dt.capture(model, values=\"stats\", stats=...)")
    return chosen


def stats_of(t: Tensor, *, mean: bool = False, zeros: bool = False, fingerprint: bool = False,
             bounds: tuple[float, float] | None = None) -> Stats | None:
    """The ``Stats`` of ``t``'s value now; ``None`` for a tensor without values (meta, fake) or one
    they do not describe (complex, sparse, quantized, nested).

    Two of torch's one-pass reductions by default: ``aminmax`` (whose NaN or Inf says the value is not finite:
    only then are NaN and Inf counted) and an L2 norm (``_norm``: relative error below 1e-6 at any size, where
    torch's float32 norm of a whole large tensor is off by up to 5e-3).
    ``mean`` adds a third, torch's sum (cascaded: relative error about 1e-7 at any size, accumulated in float32
    for float32 and narrower, in float64 for the rest; else ``Stats.mean`` is ``None``), ``zeros`` counts the
    zeros (else ``Stats.zeros`` is ``None``), ``fingerprint`` hashes the bits (``fingerprint_of``). A permuted
    dense tensor (a transposed weight) is read as the flat block of memory it covers: the same elements, in the
    order torch reads fastest. A sum or norm that overflows float32 is taken again in float64. Every dispatch
    mode is set aside meanwhile: the reductions are no ops of the capture. A caller that knows the value is
    finite and its min and max (a ReLU of a finite value whose range it has: ``StatsTaker``) gives them as
    ``bounds``, and one pass is left, the norm.

    >>> str(stats_of(torch.tensor([0.0, 1.0, float("nan"), -3.0]), mean=True, zeros=True))
    '[-3, 1] mean -0.6667 norm 3.162 zeros 1 nan 1'
    >>> str(stats_of(torch.tensor([3.0, -4.0])))
    '[-4, 3] norm 5'
    >>> stats_of(torch.tensor([0.0, 2.0])).zeros is None
    True
    >>> str(stats_of(torch.tensor([0.0, 3.0, 4.0]), bounds=(0.0, 4.0)))
    '[0, 4] norm 5'
    >>> stats_of(torch.ones(2, device="meta")) is None
    True
    """
    if not describable(t):
        return None
    n = t.numel()
    if n == 0:
        return _EMPTY
    try:
        with modes_set_aside():
            x = t.detach() if t.requires_grad else t  # (autograd records nothing: no node, no no_grad() to enter)
            fp = fingerprint_of(x) if fingerprint else None
            if not x.is_floating_point():
                x = x.to(_F64)  # ints and bools: the same numbers as float64
            if not x.is_contiguous():
                x = _flat(x)
            if bounds is None:
                lo, hi = torch.aminmax(x)
                lo_, hi_ = lo.item(), hi.item()
                if not (math.isfinite(lo_) and math.isfinite(hi_)):  # a NaN or an Inf (aminmax propagates NaN)
                    return _nonfinite(x, n, mean, zeros, fp)
            else:
                lo_, hi_ = bounds
            norm_ = _norm(x, n)
            s = x.sum(dtype=_F32 if x.dtype in _HALF else None).item() if mean else 0.0
            if not (math.isfinite(s) and math.isfinite(norm_)):  # every element finite: float32 overflowed
                x = x.to(_F64)
                s, norm_ = x.sum().item(), torch.linalg.vector_norm(x).item()
            z = (n - _nonzero(x) if lo_ <= 0.0 <= hi_ else 0) if zeros else None
            return Stats(n, 0, 0, 0, z, lo_, hi_, s / n if mean else None, norm_, fp)
    except (RuntimeError, TypeError, NotImplementedError):  # a dtype a reduction does not take (float8)
        return None


def describable(t: object) -> bool:
    """Whether ``Stats`` describe ``t``: a strided real tensor with values (not meta or fake).

    >>> describable(torch.ones(2)), describable(torch.ones(2, device="meta")), describable(torch.ones(1, dtype=torch.complex64))
    (True, False, False)
    """
    if type(t) is not Tensor and type(t) is not _Parameter:  # (a Parameter of a fake tensor is no Parameter)
        if not isinstance(t, Tensor) or not has_values(t):
            return False
    elif t.is_meta:
        return False
    return not (t.layout is not torch.strided or t.is_complex() or t.is_quantized or t.is_nested)


_FLAT = 1 << 16
"""Up to this many elements, one float32 norm of the whole (relative error at most 4e-7 at this size); above
it, float32 norms of blocks of at most ``_BLOCK`` elements combined in float64, at the same speed (torch's
float32 norm of a whole 8 M-element tensor of 0.1s is off by 5e-3, the blocked one by 3e-7; blocks of 4,096
would be off by 2e-6: torch sums each row of a 2-D reduction in one float32 running sum)."""
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
    """The largest divisor of ``n`` from 64 to ``_BLOCK`` (blocks with no remainder to norm apart), 0 if none."""
    return next((b for b in range(_BLOCK, 63, -1) if n % b == 0), 0)


def _norm(x: Tensor, n: int) -> float:
    """The L2 norm of ``x``'s elements: one float32 (or float64) norm up to ``_FLAT`` elements, else the float32
    norms of blocks combined in float64 (see ``_FLAT``)."""
    acc = _F64 if x.dtype is _F64 else _F32
    if n <= _FLAT or acc is _F64:
        return torch.linalg.vector_norm(x, dtype=acc).item()
    if x.dim() != 1:
        if not x.is_contiguous():  # (a gapped or overlapping view: no blocks)
            return torch.linalg.vector_norm(x, dtype=acc).item()
        x = x.view(-1)
    block = _block(n)
    whole = n if block else n - n % _BLOCK
    blocks = (x if block else x[:whole]).view(-1, block or _BLOCK)
    rows = torch.linalg.vector_norm(blocks, dim=1, dtype=None if x.dtype is _F32 else _F32)  # (no dtype: no cast)
    norm = torch.linalg.vector_norm(rows, dtype=_F64).item()  # (in float32: off by 5e-6 for 8 k equal rows)
    if whole < n:
        norm = math.hypot(norm, torch.linalg.vector_norm(x[whole:], dtype=_F32).item())
    return norm


_BITS = {2: (torch.int16, -(1 << 15)), 4: (torch.int32, -(1 << 31)), 8: (torch.int64, -(1 << 63))}


def _nonzero(x: Tensor) -> int:
    """``count_nonzero(x)``, counted on ``x``'s bits: torch counts integers branch-free, floats with a branch
    that a tensor of many zeros (a ReLU's result) makes 20 times slower. ``-0.0`` is the one zero whose bits
    are not 0: the smallest integer, so the bits' minimum says whether there is one (then ``|x|``'s bits)."""
    entry = _BITS.get(x.element_size()) if x.is_floating_point() and x.is_contiguous() else None
    if entry is None:
        return int(torch.count_nonzero(x))
    bits, negative_zero = entry
    v = x.view(bits)
    if v.min().item() == negative_zero:
        return int(torch.count_nonzero(torch.abs(x).view(bits)))
    return int(torch.count_nonzero(v))


def _nonfinite(x: Tensor, n: int, mean: bool, zeros: bool, fp: int | None) -> Stats:
    """The rare case: counts of NaN, each Inf (and zeros), the moments over the finite elements (in float64)."""
    z = n - _nonzero(x) if zeros else None
    nan = int(torch.isnan(x).sum())
    posinf = int((x == math.inf).sum())
    neginf = int((x == -math.inf).sum())
    finite = x[torch.isfinite(x)].to(_F64)
    if finite.numel() == 0:
        return Stats(n, nan, posinf, neginf, z, None, None, None, None, fp)
    lo, hi = torch.aminmax(finite)
    s, lo_, hi_, norm = torch.stack([finite.sum(), lo, hi, torch.linalg.vector_norm(finite)]).tolist()
    return Stats(n, nan, posinf, neginf, z, lo_, hi_, s / finite.numel() if mean else None, norm, fp)


_UNSIGNED = {1: (torch.uint8, 0xFF), 2: (torch.int16, 0xFFFF), 4: (torch.int32, 0xFFFFFFFF)}
_M32 = 0xFFFFFFFF


def fingerprint_tensor(x: Tensor) -> Tensor:
    """``fingerprint_of(x)`` as a 0-d int64 tensor on ``x``'s device (no copy to the host)."""
    w = x.element_size()
    flat = x.reshape(-1)  # element order, whatever the layout (a copy only for a non-contiguous view)
    if x.dtype == torch.bool:
        flat = flat.view(torch.uint8)
    if w == 8:  # two 32-bit words per element
        flat, w = flat.view(torch.int32), 4
    bits, mask = _UNSIGNED[w]
    v = flat.view(bits).to(torch.int64).bitwise_and_(mask)  # each word as an unsigned number below 2**32
    i = torch.arange(v.numel(), dtype=torch.int64, device=v.device)
    h = v.mul_(0x7FEB352D).add_(i).bitwise_and_(_M32)  # the word with its position, then mixed: each step a
    h.bitwise_xor_(h >> 15).mul_(0x6A09E667).bitwise_and_(_M32)  # bijection of 32-bit words (odd multipliers
    h.bitwise_xor_(h >> 13)  # below 2**31: exact in int64, no product reaches 2**63)
    return h.sum()


def fingerprint_of(x: Tensor) -> int:
    """A 64-bit hash of ``x``'s bits in element order (its logical order, whatever its layout), for
    run-to-run determinism checks: equal values give equal fingerprints; one element differing in one bit
    changes it, and two elements swapped do (each 32-bit word and its position are mixed by a bijection of
    32-bit words, the mixed words summed exactly in int64: another value collides with probability about
    2**-32). About ten passes over int64 words: costly, so only on request.

    >>> x = torch.tensor([1.0, 2.0, 3.0])
    >>> fingerprint_of(x) == fingerprint_of(x.clone()), fingerprint_of(x) == fingerprint_of(x.flip(0))
    (True, False)
    >>> fingerprint_of(x) == fingerprint_of(torch.nextafter(x, x + 1))  # one unit in the last place
    False
    """
    with modes_set_aside():
        return int(fingerprint_tensor(x.detach()).item())
