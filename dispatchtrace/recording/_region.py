"""The bytes of its storage a tensor covers, and whether two such byte sets meet, exactly.

A ``Region`` is ``(lo, hi, dims)``: the bytes lie in ``[lo, hi)``, and ``dims``, when known, says
which of them: ``lo + sum(k_i * stride_i)`` for ``0 <= k_i < size_i``, one ``(size, stride)`` per
dimension in bytes, strides descending, the innermost ``(itemsize, 1)`` (a contiguous tensor is the
one dimension ``(nbytes, 1)``). ``dims`` is ``None`` where only the interval is known (symbolic
sizes, layouts without strides): the interval then stands for its every byte, a conservative answer.

Two regions of one storage are compared without enumerating a byte: when their strides divide one
another (1 | 4 | 192 | 384 ...), each region is a box in the mixed-radix coordinates those strides
make, which is what every view of one contiguous base is (slices, ``select``, ``chunk``, ``split``,
``narrow``, ``unbind``, transposes and permutes of those, ``view``/``reshape`` where they alias,
``expand``'s stride 0, other dtypes by ``view(dtype)``), and boxes meet, contain and subtract
dimension by dimension. Where the strides do not divide one another, or a region is no box in
them (windows that overlap themselves, ``as_strided`` with strides that do not nest, an offset
that makes a dimension wrap), the answer is the interval's.

>>> import torch
>>> z = torch.zeros(2, 48)
>>> a, b, c = (region(p) for p in z.unsafe_split(16, 1))   # an RNN cell's gate chunks
>>> (a[0], a[1]), (b[0], b[1]), meets(a, b), meets(a, region(z[1])), meets(c, region(z[:, 40]))
((0, 256), (64, 320), False, True, True)
>>> covers(region(z), b), covers(b, region(z)), subtract(region(z[:, :32]), b) == (a,)
(True, False, True)
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

Dims = tuple[tuple[int, int], ...]
Region = tuple[int, float, "Dims | None"]
"""``(lo, hi, dims)``: see the module's docstring."""

WHOLE: Region = (0, float("inf"), None)
_Box = tuple[tuple[int, int], ...]


def region(t: Any) -> Region:
    """The bytes of its storage ``t`` covers (the whole storage for symbolic sizes and for layouts
    without a storage offset or strides).

    >>> import torch
    >>> z = torch.zeros(2, 3)
    >>> region(z), region(z[1]), region(z[:, 1]), region(z[:0])
    ((0, 24, ((24, 1),)), (12, 24, ((12, 1),)), (4, 20, ((2, 12), (4, 1))), (0, 0, ()))
    """
    try:
        n = t.numel()
        if type(n) is not int:
            return WHOLE
        if n == 0:
            return 0, 0, ()
        item = t.element_size()
        lo = t.storage_offset()
        if type(lo) is not int:
            return WHOLE
        lo *= item
        if t.is_contiguous():
            return lo, lo + n * item, ((n * item, 1),)
        dims = sorted(((size, stride * item) for size, stride in zip(t.shape, t.stride(), strict=True)
                       if size > 1 and stride != 0), key=lambda d: -d[1])
        dims.append((item, 1))
        last = 0
        merged: list[tuple[int, int]] = []
        for size, stride in reversed(dims):  # innermost first: an outer dimension that continues it merges in
            last += (size - 1) * stride
            if merged and stride == merged[-1][0] * merged[-1][1]:
                merged[-1] = (size * merged[-1][0], merged[-1][1])
            else:
                merged.append((size, stride))
        return lo, lo + last + 1, tuple(reversed(merged))
    except (RuntimeError, NotImplementedError, TypeError):  # sparse, nested: no strides or offset
        return WHOLE


@lru_cache(maxsize=1024)
def _chain(a: Dims, b: Dims) -> tuple[int, ...] | None:
    """The strides of both regions, ascending, when each divides the next (else ``None``)."""
    chain = sorted({d for _, d in a} | {d for _, d in b} | {1})
    for small, big in zip(chain, chain[1:], strict=False):
        if big % small:
            return None
    return tuple(chain)


@lru_cache(maxsize=8192)  # one region meets many: its box is made once per chain
def _box(lo: int, dims: Dims, chain: tuple[int, ...]) -> _Box | None:
    """The region as one range of digits per stride of ``chain`` (the last one unbounded), or ``None``
    where it is no such box (a dimension that wraps past its digit, or two on one digit)."""
    n = len(chain)
    digits = [0] * n
    rest = lo
    for k in range(n - 1, -1, -1):
        digits[k], rest = divmod(rest, chain[k])
    box = [(d, d + 1) for d in digits]
    claimed = [False] * n
    index = {d: k for k, d in enumerate(chain)}
    for size, stride in dims:
        k = index[stride]
        while True:
            if claimed[k]:
                return None
            claimed[k] = True
            start = digits[k]
            radix = chain[k + 1] // chain[k] if k + 1 < n else None
            if radix is None or start + size <= radix:
                box[k] = (start, start + size)
                break
            if start == 0 and size % radix == 0:  # whole rows of this digit: the rest is the next digit's
                box[k] = (0, radix)
                size //= radix
                k += 1
                continue
            return None
    return tuple(box)


def _region(box: list[tuple[int, int]], chain: tuple[int, ...]) -> Region:
    lo = sum(a * d for (a, _), d in zip(box, chain, strict=True))
    last = sum((b - a - 1) * d for (a, b), d in zip(box, chain, strict=True))
    dims: list[tuple[int, int]] = []
    for (a, b), d in zip(box, chain, strict=True):  # innermost first, merging as ``region`` does
        if b - a > 1 or d == 1:
            if dims and d == dims[-1][0] * dims[-1][1]:
                dims[-1] = ((b - a) * dims[-1][0], dims[-1][1])
            else:
                dims.append((b - a, d))
    return lo, lo + last + 1, tuple(reversed(dims))


def _boxes(a: Region, b: Region) -> tuple[_Box, _Box, tuple[int, ...]] | None:
    if a[2] is None or b[2] is None:
        return None
    chain = _chain(a[2], b[2])
    if chain is None:
        return None
    ba, bb = _box(int(a[0]), a[2], chain), _box(int(b[0]), b[2], chain)
    if ba is None or bb is None:
        return None
    return ba, bb, chain


def _contiguous(r: Region) -> bool:
    dims = r[2]
    return dims is not None and len(dims) <= 1


@lru_cache(maxsize=4096)  # the same pairs come back at every step of a loop (offsets repeat, storages differ)
def meets(a: Region, b: Region) -> bool:
    """Whether the two regions share a byte (``True`` where only their intervals can say, and they meet)."""
    if not (a[0] < b[1] and b[0] < a[1]):
        return False
    if _contiguous(a) and _contiguous(b):
        return True
    boxes = _boxes(a, b)
    if boxes is None:
        return True
    ba, bb, _ = boxes
    return all(max(x0, y0) < min(x1, y1) for (x0, x1), (y0, y1) in zip(ba, bb, strict=True))


@lru_cache(maxsize=4096)
def covers(outer: Region, inner: Region) -> bool:
    """Whether every byte of ``inner`` is a byte of ``outer`` (``False`` where that is not known)."""
    if outer[2] is None or not (outer[0] <= inner[0] and inner[1] <= outer[1]):
        return False
    if _contiguous(outer):
        return True
    boxes = _boxes(inner, outer)
    if boxes is None:
        return False
    bi, bo, _ = boxes
    return all(y0 <= x0 and x1 <= y1 for (x0, x1), (y0, y1) in zip(bi, bo, strict=True))


@lru_cache(maxsize=4096)
def subtract(a: Region, b: Region) -> tuple[Region, ...]:
    """The bytes of ``a`` that are not bytes of ``b``, as regions (``(a,)`` where that is not known)."""
    if not meets(a, b):
        return (a,)
    if b[2] is None:
        return (a,)
    if _contiguous(a) and _contiguous(b):
        out: list[Region] = []
        if a[0] < b[0]:
            out.append((a[0], b[0], ((int(b[0] - a[0]), 1),)))
        if b[1] < a[1]:
            out.append((int(b[1]), a[1], ((int(a[1] - b[1]), 1),)))
        return tuple(out)
    boxes = _boxes(a, b)
    if boxes is None:
        return (a,)
    ba, bb, chain = boxes
    pieces: list[Region] = []
    cur = list(ba)
    for k, ((x0, x1), (y0, y1)) in enumerate(zip(ba, bb, strict=True)):
        if x0 < y0:
            pieces.append(_region([*cur[:k], (x0, y0), *cur[k + 1:]], chain))
        if y1 < x1:
            pieces.append(_region([*cur[:k], (y1, x1), *cur[k + 1:]], chain))
        cur[k] = (max(x0, y0), min(x1, y1))
    return tuple(pieces)
