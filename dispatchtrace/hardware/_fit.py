"""Measured samples (a kernel's size and seconds) made into a DeviceSpec: peaks, bandwidth, efficiency curves."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ._describe import _si
from ._efficiency import Efficiency
from ._fresh import FreshOutput
from ._spec import DeviceSpec

COMPUTE = ("matmul", "convolution", "attention")
"""The classes whose samples are sized in FLOPs; the others in bytes moved."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Sample:
    """One measured kernel: ``seconds`` per call (the least of the repeats, as the clock saw it: on the CPU
    with the per-op overhead in it, on CUDA the kernel alone); ``size`` is its FLOPs for the compute classes
    (``COMPUTE``), else the bytes it reads and writes; ``step`` the rung of the size ladder it was run at
    (the memory-bound kernels of one class at one rung make one point of the class's curve); ``shape`` the
    compute kernel's value on the shape axis (a matmul's smallest dimension, a convolution's output
    positions); ``aten`` the ATen kernel's name (``"gelu"``): a memory-bound kernel's samples make its own curve in
    ``DeviceSpec.kernel_efficiency``; ``typical`` whether they also count in the class's curve (a kernel timed
    for its own curve only, as ``tanh``, is not).

    Two classes time new outputs: ``"fresh"`` (``add`` into a new tensor) and ``"written"`` (the same ``add``
    into one written before); ``size`` is then the output's bytes, and the pair at one step is one point of
    ``DeviceSpec.fresh_output``."""

    kernel: str
    op_class: str
    dtype: str
    size: float
    seconds: float
    step: int = 0
    shape: float | None = None
    aten: str = ""
    typical: bool = True

    def __str__(self) -> str:
        unit = "FLOP/s" if self.op_class in COMPUTE else "B/s"
        return f"{self.kernel:<40} {self.seconds * 1e6:>11.1f} us {_si(self.size / self.seconds):>7}{unit}"


def fit(samples: Sequence[Sample], *, name: str, title: str, overhead: float, memory: float | None, primary: str,
        source: str, included: float = 0.0, details: Mapping[str, str] | None = None,
        attention_dropout_fused: bool = True) -> DeviceSpec:
    """The spec the samples describe, for an estimate that charges ``busy / efficiency + overhead``.

    A sample's busy time is its seconds less ``included`` (the overhead inside the clock's reading: the
    per-op overhead on the CPU, 0 for CUDA events), at least 5% of them. Each dtype's peak is its best matmul
    rate and the bandwidth the best rate of any memory-bound kernel, both over the samples that took at least
    ten times ``included`` (where the overhead is a small part of the reading); a curve's point is a sample's rate
    over that peak (at most 1), the memory-bound kernels of one class at one ladder step merged by their
    median (as are the convolutions of one step). ``primary`` is the dtype whose matmul, convolution and attention
    samples make the compute curves (float32 on the CPU, bfloat16 on CUDA); those with a ``shape`` also make the
    curve's rows by shape (``Efficiency.by_shape``), a row for each shape timed at two steps at least. Each
    memory-bound kernel's samples make its own curve (``kernel_efficiency``, over the same bandwidth); the
    ``"fresh"`` and ``"written"`` pairs make ``fresh_output``; ``attention_dropout_fused`` is the spec's as given.

    >>> ladder = [Sample(kernel="mm", op_class="matmul", dtype="float32", size=2e9, seconds=0.01001, step=1),
    ...           Sample(kernel="mm", op_class="matmul", dtype="float32", size=2e6, seconds=3e-5, step=0),
    ...           Sample(kernel="add", op_class="elementwise", dtype="float32", size=1e8, seconds=0.01001, step=0)]
    >>> spec = fit(ladder, name="toy", title="", overhead=1e-5, included=1e-5, memory=None, primary="float32", source="")
    >>> spec.peak("float32"), spec.memory_bandwidth, spec.compute_efficiency["matmul"].points
    (200000000000.0, 10000000000.0, ((2000000.0, 0.5), (2000000000.0, 1.0)))
    """

    fresh = _fresh(samples)

    def busy(s: Sample) -> float:
        return max(s.seconds - included, 0.05 * s.seconds)

    def best(mine: list[Sample]) -> float:
        steady = [s for s in mine if s.seconds >= 10 * included] or mine
        return max(s.size / busy(s) for s in steady)

    # the curves divide by the best rates as measured, so the best sample's point is 1.0 exactly; the spec keeps
    # them rounded to 4 digits (up to 5e-4 off: 1.0005e11 is 1.001e11)
    exact = {dtype: best([s for s in samples if s.op_class == "matmul" and s.dtype == dtype])
             for dtype in dict.fromkeys(s.dtype for s in samples if s.op_class == "matmul")}
    peaks = {dtype: _digits(rate) for dtype, rate in exact.items()}
    exact_bandwidth = best([s for s in samples if s.op_class not in (*COMPUTE, "fresh", "written") and s.typical])
    bandwidth = _digits(exact_bandwidth)
    compute: dict[str, Efficiency] = {}
    for op_class in COMPUTE:
        mine = [s for s in samples if s.op_class == op_class and s.dtype == primary]
        if mine:
            fractions = [(s.size, s.size / busy(s) / exact[primary], s.step) for s in mine]
            rows: dict[float, list[tuple[float, float, int]]] = {}
            for s, point in zip(mine, fractions, strict=True):
                if s.shape is not None:
                    rows.setdefault(s.shape, []).append(point)
            # a shape's row needs two sizes at least: one point alone says nothing of how that shape grows
            by_shape = tuple((shape, _curve(row).points) for shape, row in sorted(rows.items())
                             if len({step for _, _, step in row}) >= 2)
            compute[op_class] = Efficiency(points=_curve(fractions).points, by_shape=by_shape)
    compute["other"] = compute["matmul"]
    memory_curves: dict[str, Efficiency] = {}
    for op_class in ("elementwise", "copy", "reduction", "pooling"):
        mine = [s for s in samples if s.op_class == op_class and s.typical]
        if mine:
            memory_curves[op_class] = _curve([(s.size, s.size / busy(s) / exact_bandwidth, s.step) for s in mine])
    memory_curves["other"] = memory_curves["elementwise"]
    kernels: dict[str, Efficiency] = {}
    for aten in dict.fromkeys(s.aten for s in samples if s.aten and s.op_class not in (*COMPUTE, "fresh", "written")):
        mine = [s for s in samples if s.aten == aten]
        kernels[aten] = _curve([(s.size, s.size / busy(s) / exact_bandwidth, s.step) for s in mine])
    for op_class in COMPUTE:  # their compute curves hold all that slows them: the bandwidth side is the roofline
        memory_curves[op_class] = Efficiency.flat(1.0)
    sources = {field: source for field in ("peak_flops", "memory_bandwidth", "launch_overhead", "compute_efficiency",
                                           "memory_efficiency", "memory")}
    sources.update(details or {})
    if fresh is None:
        sources.pop("fresh_output", None)
    else:
        sources.setdefault("fresh_output", source)
    return DeviceSpec(name=name, title=title, peak_flops=peaks, memory_bandwidth=bandwidth, launch_overhead=overhead,
                      compute_efficiency=compute, memory_efficiency=memory_curves, kernel_efficiency=kernels,
                      fresh_output=fresh, attention_dropout_fused=attention_dropout_fused, memory=memory,
                      sources=sources)


def _digits(x: float) -> float:
    return float(f"{x:.4g}")


def _fresh(samples: Sequence[Sample]) -> FreshOutput | None:
    """Seconds per byte of a new output by its size: at each step, ``add`` into a new tensor less ``add`` into one
    written before, over the output's bytes (at least 0: below the allocator's threshold the two are one kernel)."""
    written = {s.step: s for s in samples if s.op_class == "written"}
    points = sorted((s.size, _digits(max(s.seconds - written[s.step].seconds, 0.0) / s.size))
                    for s in samples if s.op_class == "fresh" and s.step in written)
    return FreshOutput(points=tuple(points)) if points else None


def _curve(points: Sequence[tuple[float, float, int]]) -> Efficiency:
    """One point per step: the steps' samples at the geometric mean of their sizes and the median of their
    fractions (kept in (0, 1]); sorted by size, a point not past the one before merged into it."""
    steps: dict[int, list[tuple[float, float]]] = {}
    for size, fraction, step in points:
        steps.setdefault(step, []).append((size, fraction))
    merged: list[tuple[float, float]] = []
    for group in steps.values():
        size = _digits(math.exp(sum(math.log(s) for s, _ in group) / len(group)))
        fraction = _digits(min(max(statistics.median(f for _, f in group), 1e-4), 1.0))
        merged.append((size, fraction))
    out: list[tuple[float, float]] = []
    for size, fraction in sorted(merged):
        if out and size <= out[-1][0]:
            out[-1] = (out[-1][0], max(out[-1][1], fraction))
        else:
            out.append((size, fraction))
    return Efficiency(points=tuple(out))


