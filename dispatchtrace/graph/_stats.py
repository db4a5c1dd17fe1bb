"""``Stats``: what ``capture(values="stats")`` remembers of one tensor value instead of its data."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Stats:
    """Counts and moments of one tensor value (an op's result, or a tensor it wrote, after the op).

    ``nan``, ``posinf``, ``neginf`` and ``zeros`` count elements; ``min``, ``max``, ``mean`` and ``norm``
    (L2) are taken over the finite elements only (``None`` when there is none), so that one NaN does not
    hide the scale of the rest. Integer and bool tensors have no NaN or Inf; a bool's ``mean`` is the
    fraction of ``True``. ``mean`` is also ``None`` where it was not taken, ``zeros`` where it was not counted and
    ``fingerprint`` (a 64-bit hash of the value's bits, in element order) ``None`` where it was not taken:
    all three are ``capture(values="stats", stats=...)`` options.

    >>> s = Stats(4, 1, 0, 1, 1, 0.0, 2.0, 1.0, 2.0)
    >>> s.finite, s.nonfinite
    (False, 2)
    >>> str(s)
    '[0, 2] mean 1 norm 2 zeros 1 nan 1 -inf 1'
    """

    numel: int
    nan: int
    posinf: int
    neginf: int
    zeros: int | None
    min: float | None
    max: float | None
    mean: float | None
    norm: float | None
    fingerprint: int | None = None

    @property
    def nonfinite(self) -> int:
        """NaN and Inf elements together."""
        return self.nan + self.posinf + self.neginf

    @property
    def finite(self) -> bool:
        """No NaN and no Inf."""
        return self.nan == 0 and self.posinf == 0 and self.neginf == 0

    def bitwise_equal(self, other: Stats) -> bool | None:
        """Whether both values are the same bits (their fingerprints agree); ``None`` where either has none.

        >>> a = Stats(1, 0, 0, 0, None, 1.0, 1.0, 1.0, 1.0, fingerprint=7)
        >>> a.bitwise_equal(a), a.bitwise_equal(Stats(1, 0, 0, 0, None, 1.0, 1.0, 1.0, 1.0))
        (True, None)
        """
        if self.fingerprint is None or other.fingerprint is None:
            return None
        return self.fingerprint == other.fingerprint and self.numel == other.numel

    def has(self, kind: str) -> bool:
        """Whether it holds a value of ``kind``: ``"nan"``, ``"inf"`` (either sign) or ``"any"`` (either)."""
        if kind == "nan":
            return self.nan > 0
        if kind == "inf":
            return self.posinf + self.neginf > 0
        return not self.finite

    def __str__(self) -> str:
        if self.numel == 0:
            return "empty"
        mean = "" if self.mean is None else f" mean {_num(self.mean)}"
        parts = [f"[{_num(self.min)}, {_num(self.max)}]{mean} norm {_num(self.norm)}"
                 if self.min is not None else "no finite value"]
        for label, n in (("zeros", self.zeros), ("nan", self.nan), ("+inf", self.posinf), ("-inf", self.neginf)):
            if n:
                parts.append(f"{label} {n}")
        return " ".join(parts)


def relative(a: float | None, b: float | None, scale: float = 0.0) -> float:
    """``|a - b| / max(|a|, |b|, scale)``: 0 for equal values, ``inf`` where only one side has a value.

    >>> relative(1.0, 1.1) < 0.1, relative(0.0, 0.0), relative(None, 1.0)
    (True, 0.0, inf)
    """
    if a is None or b is None:
        return 0.0 if a is b else math.inf
    if a == b:
        return 0.0
    if math.isnan(a) or math.isnan(b):
        return math.inf
    den = max(abs(a), abs(b), scale)
    return abs(a - b) / den if den else 0.0


def _num(v: float | None) -> str:
    """A statistic as short text: four significant digits.

    >>> _num(0.000123456), _num(2.0), _num(None), _num(1e20)
    ('0.0001235', '2', '-', '1e+20')
    """
    return "-" if v is None else f"{v:.4g}"
