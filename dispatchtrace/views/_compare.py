"""How two tensor values of two captures are compared: kept copies where both have them, else their stats."""

from __future__ import annotations

import math
from typing import Literal

import torch

from .._torch import disable_current_modes
from ..graph import Graph, Stats, TensorRef

Via = Literal["values", "stats", "none", "partial"]
"""What a comparison read: both sides' kept tensors, both sides' statistics, or nothing (meta tensors; a
parallel job's partial sums, ``"partial"``: their full value is no combination of the ranks' statistics)."""


def compare(ga: Graph, a: TensorRef, gb: Graph, b: TensorRef, rtol: float, atol: float) -> tuple[float, bool, Via]:
    """``(error, departs, via)`` of value ``b`` against ``a``: the largest difference relative to the value's scale,
    whether it is beyond ``atol + rtol * |a|`` (per element, kept tensors) or ``atol + rtol * scale``
    (statistics: min, max, RMS and the mean where both have it, scale the larger RMS; NaN and Inf counts must be
    equal)."""
    if a.shape != b.shape:
        return math.inf, True, "none"
    ta, tb = ga.kept.get(a.id), gb.kept.get(b.id)
    if ta is not None and tb is not None:
        return _tensors(ta, tb, rtol, atol)
    sa, sb = ga.stats.get(a.id), gb.stats.get(b.id)
    if sa is None or sb is None:
        return 0.0, False, "none"
    return (*compare_stats(sa, sb, rtol, atol), "stats")


def _tensors(ta: object, tb: object, rtol: float, atol: float) -> tuple[float, bool, Via]:
    assert isinstance(ta, torch.Tensor) and isinstance(tb, torch.Tensor)
    with disable_current_modes(), torch.no_grad():
        if ta.dtype == torch.bool or not (ta.is_floating_point() or ta.is_complex()):
            same = bool(torch.equal(ta, tb.to(ta.dtype)))
            return (0.0 if same else math.inf), not same, "values"
        x, y = ta.double(), tb.double()
        nan_x, nan_y = torch.isnan(x), torch.isnan(y)
        if not torch.equal(nan_x, nan_y) or not torch.equal(torch.isinf(x) & (x > 0), torch.isinf(y) & (y > 0)) \
                or not torch.equal(torch.isinf(x) & (x < 0), torch.isinf(y) & (y < 0)):
            return math.inf, True, "values"
        finite = torch.isfinite(x)
        x, y = x[finite], y[finite]
        if x.numel() == 0:
            return 0.0, False, "values"
        d = (x - y).abs()
        scale = max(float(x.abs().max()), float(y.abs().max()))
        error = float(d.max()) / scale if scale else 0.0
        departs = bool((d > atol + rtol * x.abs()).any())
        return error, departs, "values"


def compare_stats(sa: Stats, sb: Stats, rtol: float, atol: float) -> tuple[float, bool]:
    """``(error, departs)`` of two values' statistics (``compare``'s rule)."""
    if (sa.nan, sa.posinf, sa.neginf) != (sb.nan, sb.posinf, sb.neginf) or (sa.min is None) != (sb.min is None):
        return math.inf, True
    if sa.min is None or sb.min is None:
        return 0.0, False
    n = max(sa.numel - sa.nonfinite, 1)
    rms_a, rms_b = (sa.norm or 0.0) / math.sqrt(n), (sb.norm or 0.0) / math.sqrt(n)
    scale = max(rms_a, rms_b, abs(sa.max or 0.0), abs(sb.max or 0.0), abs(sa.min), abs(sb.min))
    mean = abs(sa.mean - sb.mean) if sa.mean is not None and sb.mean is not None else 0.0  # (taken on request)
    worst = max(abs(sa.min - sb.min), abs((sa.max or 0.0) - (sb.max or 0.0)), mean, abs(rms_a - rms_b))
    return (worst / scale if scale else 0.0), worst > atol + rtol * scale


def bitwise(ga: Graph, a: TensorRef, gb: Graph, b: TensorRef) -> bool | None:
    """Whether value ``b`` is ``a``'s very bits (``Stats.bitwise_equal`` of their fingerprints, taken with
    ``capture(values="stats", stats=("fingerprint",))``); ``None`` where either side has no fingerprint."""
    sa, sb = ga.stats.get(a.id), gb.stats.get(b.id)
    if sa is None or sb is None or a.shape != b.shape or a.dtype != b.dtype:
        return None
    return sa.bitwise_equal(sb)
