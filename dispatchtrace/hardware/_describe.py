"""A DeviceSpec as text: its peaks, bandwidth, overhead, links and efficiency curves, one line each."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._efficiency import OP_CLASSES

if TYPE_CHECKING:
    from ._link import Link
    from ._spec import DeviceSpec


def describe(spec: DeviceSpec) -> str:
    """What ``print(spec)`` shows.

    >>> from dispatchtrace.hardware import DeviceSpec
    >>> print(describe(DeviceSpec.named("l4")).splitlines()[2])
    peak (dense)    bfloat16 121 TFLOP/s, float16 121 TFLOP/s, float32 30.3 TFLOP/s, float64 473 GFLOP/s, float8_e4m3fn 242 TFLOP/s, float8_e5m2 242 TFLOP/s, int8 242 TFLOP/s, tfloat32 60 TFLOP/s
    """
    peaks = ", ".join(f"{k} {_si(v)}FLOP/s" for k, v in sorted(spec.peak_flops.items()))
    lines = [
        f"{spec.name}: {spec.title}" if spec.title else spec.name,
        "",
        f"{'peak (dense)':<15} {peaks}",
        f"{'bandwidth':<15} {_si(spec.memory_bandwidth)}B/s",
        f"{'launch':<15} {spec.launch_overhead * 1e6:.3g} us per op",
    ]
    if spec.memory is not None:
        lines.append(f"{'memory':<15} {spec.memory / 2**30:.4g} GiB")
    if not spec.attention_dropout_fused:
        lines.append(f"{'attention':<15} SDPA with dropout runs unfused (the math path, charged op by op)")
    for label, link in (("intra-node", spec.intra_node), ("inter-node", spec.inter_node)):
        if link is not None:
            lines.append(f"{label:<15} {_link(link)}")
    if spec.ranks_per_node != 1 or spec.intra_node is not None:
        lines.append(f"{'ranks per node':<15} {spec.ranks_per_node}")
    for title, curves, unit in (("compute efficiency (by FLOPs)", spec.compute_efficiency, "FLOP"),
                                ("memory efficiency (by bytes moved)", spec.memory_efficiency, "B")):
        if curves:
            lines += ["", title]
            for c in OP_CLASSES:
                if c in curves:
                    lines.append(f"  {c:<13} {_curve(curves[c].points, unit)}")
                    lines += [f"    at {_shape(c)} {shape:<6g} {_curve(row, unit)}" for shape, row in curves[c].by_shape]
    if spec.kernel_efficiency:
        lines += ["", "kernel efficiency (by bytes moved)"]
        width = max(13, *(len(k) for k in spec.kernel_efficiency))
        lines += [f"  {k:<{width}} {_curve(c.points, 'B')}" for k, c in spec.kernel_efficiency.items()]
    if spec.fresh_output is not None:
        lines += ["", "fresh outputs (seconds per byte beyond the bytes moved, by output size)",
                  "  " + "  ".join(f"{_si(size)}B {rate * 1e9:.3g} ns/B" for size, rate in spec.fresh_output.points)]
    if spec.sources:
        lines += ["", "sources"] + [f"  {k}: {v}" for k, v in spec.sources.items()]
    return "\n".join(lines)


def _curve(points: tuple[tuple[float, float], ...], unit: str) -> str:
    return "  ".join(f"{_si(size)}{unit} {fraction:.0%}" for size, fraction in points)


def _shape(op_class: str) -> str:
    return "positions" if op_class == "convolution" else "smallest dim"


def _link(link: Link) -> str:
    name = f"{link.name}: " if link.name else ""
    return f"{name}{_si(link.bandwidth)}B/s per direction, {link.latency * 1e6:.3g} us"


def _si(value: float) -> str:
    for prefix, scale in (("E", 1e18), ("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= scale:
            return f"{value / scale:.3g} {prefix}"
    return f"{value:.3g} "
