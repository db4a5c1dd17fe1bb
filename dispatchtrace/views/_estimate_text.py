"""How an ``Estimate`` prints: the calls that take the most time, their share of the step, measured beside."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._text import items
from ._labels import call_label
from ._time_metrics import seconds

if TYPE_CHECKING:
    from ._estimate import Estimate


def estimate_text(est: Estimate, top: int) -> str:
    graph, total = est.graph, est.total
    title = est.spec.title or est.spec.name
    phases = est.phases
    split = ", ".join(f"{p} {seconds(t)}" for p, t in phases.items()) if len(phases) > 1 else ""
    lines = [f"Estimated time on {title} ({est.spec.name}): {seconds(total)}" + (f" ({split})" if split else "")]
    timed = est.timed
    measured_total = est.measured(graph.root) if timed else None
    if measured_total:
        lines.append(f"Measured: {seconds(measured_total)} (estimated / measured {total / measured_total:.2f})")
    rows = sorted(graph.calls, key=lambda c: -est.time(c))[:top]
    head = ["Estimated", "Share", "Self", "Bound"] + (["Measured", "Est/Meas"] if timed else []) + ["Call"]
    table = [head]
    for call in rows:
        t = est.time(call)
        if not t:
            break
        row = [seconds(t), f"{100 * t / total:.1f}%" if total else "-", seconds(est.self_time(call) or None),
               est.dominant_bound(call)]
        if timed:
            m = est.measured(call)
            row += [seconds(m), f"{t / m:.2f}" if m else "-"]
        row.append("  " * max(call.depth - 1, 0) + call_label(call))
        table.append(row)
    widths = [max(len(r[i]) for r in table) for i in range(len(head) - 1)]
    for r in table:
        cells = [c.rjust(w) if i != 3 else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=False))]
        lines.append("  ".join([*cells, r[-1]]).rstrip())
    if len(graph.calls) > len(table) - 1:
        lines.append(f"... {len(graph.calls) - (len(table) - 1)} more calls")
    lines.append(f"Total {seconds(total)} over {sum(1 for t in est.times if t)} kernels")
    if est.collectives:  # the total is the schedule's: communication that compute hides costs nothing
        lines.append(f"Communication {seconds(est.communication)} in {len(est.collectives)} collectives: "
                     f"{seconds(est.exposed)} exposed, {100 * est.overlap:.0f}% hidden behind compute "
                     f"(docs/timeline.md)")
    if est.unsure:
        targets = list(dict.fromkeys(op.target for op in est.unsure))
        lines.append(f"Unsure: {len(est.unsure)} ops have no FLOP formula ({items(targets, limit=6)}): "
                     f"charged their bytes moved only, so they may take longer")
    return "\n".join(lines)
