"""What a newly allocated output costs beyond its bytes: fresh pages the OS faults in as a kernel first writes them."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import SpecError
from ._efficiency import along


@dataclass(frozen=True, slots=True, kw_only=True)
class FreshOutput:
    """Seconds per byte an op pays, on top of its roofline time, for each output it allocates anew, by the
    output's size in bytes: piecewise-linear in log10(size) between the points, flat beyond the first and
    the last.

    On a CPU, glibc serves an allocation past its mmap threshold (32 MB at most) with fresh pages from the OS,
    each faulted in (and zeroed) as the kernel first writes it; smaller ones reuse freed heap memory. A GPU's
    caching allocator reuses its blocks: a GPU spec has no such cost (``DeviceSpec.fresh_output`` is ``None``).
    ``dispatchtrace calibrate`` measures it on the CPU as the difference between ``add`` into a new tensor
    and ``add`` into one written before, by size.

    >>> fresh = FreshOutput(points=((16e6, 0.0), (64e6, 5e-10)))
    >>> fresh.seconds(4e6), fresh.seconds(64e6), fresh.seconds(128e6)   # none below, 0.5 ns a byte above
    (0.0, 0.032, 0.064)
    >>> round(fresh.seconds(32e6) / 32e6 * 1e10, 2)                     # halfway in log10: half the rate
    2.5
    >>> FreshOutput(points=((1e6, -1.0),))
    Traceback (most recent call last):
    ...
    dispatchtrace.errors.SpecError: fresh_output's seconds per byte take a number >= 0, not -1.0
    """

    points: tuple[tuple[float, float], ...]

    def __post_init__(self) -> None:
        raw = self.points
        if (not isinstance(raw, (tuple, list)) or not raw
                or any(not isinstance(p, (tuple, list)) or len(p) != 2 for p in raw)):
            raise SpecError(f"fresh_output takes a list of [bytes, seconds per byte] pairs, not {raw!r}")
        points = []
        for size, rate in raw:
            for value in (size, rate):
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                    raise SpecError(f"fresh_output takes finite numbers, not {value!r}")
            if not size > 0:
                raise SpecError(f"fresh_output's sizes take positive numbers of bytes, not {size!r}")
            if rate < 0:
                raise SpecError(f"fresh_output's seconds per byte take a number >= 0, not {float(rate)!r}")
            points.append((float(size), float(rate)))
        sizes = [s for s, _ in points]
        if sizes != sorted(set(sizes)):
            raise SpecError(f"fresh_output's sizes must increase strictly, not {sizes}")
        object.__setattr__(self, "points", tuple(points))

    def per_byte(self, nbytes: float) -> float:
        """Seconds per byte for an output of ``nbytes`` (read along the points as an efficiency curve is)."""
        return along(self.points, nbytes)

    def seconds(self, nbytes: float) -> float:
        """Seconds a new output of ``nbytes`` costs beyond its bytes moved."""
        return nbytes * self.per_byte(nbytes) if nbytes > 0 else 0.0
