"""How close to the roofline an op class gets, by the op's size (and shape): piecewise-linear in log10(size)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import SpecError

#: the op classes a spec's efficiency curves are keyed by; a class a spec has no curve for uses "other"
OP_CLASSES = ("matmul", "convolution", "attention", "elementwise", "reduction", "pooling", "copy", "other")


@dataclass(frozen=True, slots=True, kw_only=True)
class Efficiency:
    """The fraction of the roofline an op class reaches, by the op's size (FLOPs for compute, bytes moved for
    memory): piecewise-linear in log10(size) between the points, flat beyond the first and the last.

    Small ops reach far less than the peak (a kernel too small to fill the device), large ones level off
    below it (a large GEMM at 70-80% of the dense peak, a large copy at 80-90% of the bandwidth).

    >>> matmul = Efficiency(points=((1e6, 0.05), (1e9, 0.5), (1e12, 0.8)))
    >>> matmul.at(1e9), matmul.at(1e3), matmul.at(1e15)      # on a point, flat beyond both ends
    (0.5, 0.05, 0.8)
    >>> round(matmul.at(10 ** 10.5), 3)                      # halfway between 1e9 and 1e12 in log10
    0.65
    >>> Efficiency(points=((1e6, 1.5),))
    Traceback (most recent call last):
    ...
    dispatchtrace.errors.SpecError: an efficiency point's fraction takes a number in (0, 1], not 1.5

    ``by_shape`` adds a second axis for the compute classes: rows ``(shape, points)``, each a curve by size
    at one value of the op's shape (the smallest GEMM dimension of a matmul, the output positions
    N·Ho·Wo of a convolution: ``views/_kernels.py`` reads it off the op). An op whose shape is known reads the two rows around it at its size
    and interpolates between them in log10(shape) (flat beyond the first and the last row); an op without a
    shape, or a curve without rows, reads ``points`` (what a spec of version 1 holds).

    >>> conv = Efficiency(points=((1e8, 0.9),), by_shape=((49, ((1e8, 0.6),)), (784, ((1e6, 0.5), (1e8, 0.9)))))
    >>> conv.at(1e8), conv.at(1e8, shape=49), conv.at(1e8, shape=10), conv.at(1e8, shape=784)
    (0.9, 0.6, 0.6, 0.9)
    >>> round(conv.at(1e8, shape=196), 3)                    # halfway between 49 and 784 in log10
    0.75
    """

    points: tuple[tuple[float, float], ...]
    by_shape: tuple[tuple[float, tuple[tuple[float, float], ...]], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "points", _checked(self.points))
        rows = self.by_shape
        if not isinstance(rows, (tuple, list)) or any(not isinstance(r, (tuple, list)) or len(r) != 2 for r in rows):
            raise SpecError(f"an efficiency curve's by_shape takes a list of [shape, [[size, fraction], ...]] rows, "
                            f"not {rows!r}")
        checked = tuple((_number(shape, "shape"), _checked(points)) for shape, points in rows)
        shapes = [shape for shape, _ in checked]
        if any(not s > 0 or math.isinf(s) for s in shapes) or shapes != sorted(set(shapes)):
            raise SpecError(f"an efficiency curve's shapes must be positive, finite and increase strictly, not {shapes}")
        object.__setattr__(self, "by_shape", checked)

    def at(self, size: float, shape: float | None = None) -> float:
        """The fraction at ``size`` (a size of 0 or less reads as the first point's), on the rows around
        ``shape`` when the curve has rows and the shape is given (``None``: ``points``)."""
        rows = self.by_shape
        if not rows or shape is None or not shape > 0:
            return along(self.points, size)
        if shape <= rows[0][0]:
            return along(rows[0][1], size)
        if shape >= rows[-1][0]:
            return along(rows[-1][1], size)
        x = math.log10(shape)
        for (s0, p0), (s1, p1) in zip(rows, rows[1:], strict=False):
            if shape <= s1:
                f0, f1 = along(p0, size), along(p1, size)
                return f0 + (f1 - f0) * (x - math.log10(s0)) / (math.log10(s1) - math.log10(s0))
        return along(rows[-1][1], size)  # pragma: no cover (the loop always returns)

    @classmethod
    def flat(cls, fraction: float) -> Efficiency:
        """One fraction at every size.

        >>> Efficiency.flat(0.8).at(123.0)
        0.8
        """
        return cls(points=((1.0, fraction),))

    @classmethod
    def saturating(cls, top: float, half: float, *, decades: tuple[int, int] = (-2, 3)) -> Efficiency:
        """The curve ``top * x / (x + half)`` sampled at ``half * 10**k`` for ``k`` in ``decades``: an op reaches
        half of ``top`` at size ``half``, and ``top`` as it grows (how the built-in specs' curves are made).

        >>> Efficiency.saturating(0.8, 1e9, decades=(-1, 1)).points
        ((100000000.0, 0.07273), (1000000000.0, 0.4), (10000000000.0, 0.7273))
        """
        points = []
        for k in range(decades[0], decades[1] + 1):
            size = float(f"{half * 10.0 ** k:.3g}")
            points.append((size, float(f"{top * size / (size + half):.4g}")))
        return cls(points=tuple(points))


def _checked(raw: object) -> tuple[tuple[float, float], ...]:
    points = tuple((_number(s, "size"), _number(f, "fraction")) for s, f in _pairs(raw))
    if not points:
        raise SpecError("an efficiency curve takes at least one (size, fraction) point, not none")
    for size, fraction in points:
        if not size > 0 or math.isinf(size):
            raise SpecError(f"an efficiency point's size takes a positive finite number, not {size!r}")
        if not 0 < fraction <= 1:
            raise SpecError(f"an efficiency point's fraction takes a number in (0, 1], not {fraction!r}")
    sizes = [s for s, _ in points]
    if sizes != sorted(set(sizes)):
        raise SpecError(f"an efficiency curve's sizes must increase strictly, not {sizes}")
    return points


def along(points: tuple[tuple[float, float], ...], size: float) -> float:
    """Piecewise-linear in log10(size) between the points, flat beyond the first and the last."""
    if size <= points[0][0]:
        return points[0][1]
    if size >= points[-1][0]:
        return points[-1][1]
    x = math.log10(size)
    for (s0, f0), (s1, f1) in zip(points, points[1:], strict=False):
        if size <= s1:
            x0, x1 = math.log10(s0), math.log10(s1)
            return f0 + (f1 - f0) * (x - x0) / (x1 - x0)
    return points[-1][1]  # pragma: no cover (the loop always returns)


def _pairs(points: object) -> list[tuple[object, object]]:
    if not isinstance(points, (tuple, list)) or any(not isinstance(p, (tuple, list)) or len(p) != 2 for p in points):
        raise SpecError(f"an efficiency curve takes a list of [size, fraction] pairs, not {points!r}")
    return [(p[0], p[1]) for p in points]


def _number(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise SpecError(f"an efficiency point's {what} takes a number, not {value!r}")
    return float(value)
