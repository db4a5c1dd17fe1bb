"""A rank's step as Chrome trace events (``.trace.json``): what Perfetto, chrome://tracing and Holistic Trace Analysis open.

One file per rank, in the shape PyTorch's profiler writes on a GPU, so the tools that read those read
ours: ``distributedInfo`` (rank, world size, backend) and ``deviceProperties`` at the top, then
``traceEvents``: one process for the device, the compute stream and each communication stream as its
threads (``args.stream``), every op that takes time as a ``kernel`` slice (a collective named
``ncclDevKernel_<Kind>_...`` so HTA counts it as communication), each module call as a
``gpu_user_annotation`` slice around its ops (calls nest as the calls did), data edges between ops as
flow arrows, and a ``ProfilerStep#0`` annotation around the step. Times are microseconds from the
step's start, from the estimate's schedule (``views/_timeline.py``) or, for a timed capture without
an estimate, from the measured times (one stream: what ran, in order).
"""

from __future__ import annotations

import json
from collections.abc import Container
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..graph import Group
from ..views import measured_timeline, shown_estimate

if TYPE_CHECKING:
    from ..graph import Call, Graph, Op
    from ..views import Span, Timeline

#: thread ids: the compute stream as PyTorch numbers CUDA's default stream, communication streams after it
COMPUTE_STREAM, FIRST_COMM_STREAM, HOST_THREAD = 7, 20, 1
DEVICE_PID, HOST_PID = 0, 1

_KERNEL_NAMES = {"all_reduce": "AllReduce", "all_gather": "AllGather", "reduce_scatter": "ReduceScatter",
                 "all_to_all": "SendRecv", "broadcast": "Broadcast", "reduce": "Reduce", "gather": "SendRecv",
                 "scatter": "SendRecv", "send": "SendRecv", "recv": "SendRecv", "barrier": "AllReduce"}


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceOptions:
    """What a trace takes: the ``estimate`` whose schedule it draws (``g.estimate(spec)``; without one, the last
    estimate made of the capture, else a timed capture's measured times: ``capture(timing=True)``)."""

    estimate: Any = None


def timeline_of(graph: Graph, estimate: Any) -> tuple[Timeline, dict[str, Any]]:
    """The schedule a trace draws and the device it ran (or would run) on: the estimate given, else the last one
    made of the capture (``g.estimate(spec)``, ``--estimate``), else the measured times of a timed capture."""
    if estimate is None:
        estimate = shown_estimate(graph)
    if estimate is not None:
        timeline = getattr(estimate, "timeline", None)
        if timeline is None:
            raise TypeError(f"estimate= takes what g.estimate(spec) returns, not {type(estimate).__name__}")
        spec = estimate.spec
        device = {"name": spec.title or spec.name, "totalGlobalMem": int(spec.memory or 0), "source": "estimate",
                  "spec": spec.name}
        return timeline, device
    timeline = measured_timeline(graph)
    if timeline is None:
        raise ValueError("a trace needs times: pass estimate=g.estimate('h100') (or any spec), or capture with "
                         "dt.capture(model, timing=True) (on the command line: --estimate SPEC or --time)")
    return timeline, {"name": "measured on the capture's device", "totalGlobalMem": 0, "source": "measured"}


def trace_events(graph: Graph, timeline: Timeline, device: dict[str, Any]) -> dict[str, Any]:
    """The whole trace as a JSON-able dict."""
    rank, world, backend = _rank_info(graph)
    streams: dict[str, int] = {"compute": COMPUTE_STREAM}
    for s in timeline.spans:
        if s.stream not in streams:
            streams[s.stream] = FIRST_COMM_STREAM + len(streams) - 1
    events: list[dict[str, Any]] = [
        _meta("process_name", DEVICE_PID, 0, {"name": f"rank {rank}: {device['name']}"}),
        _meta("process_name", HOST_PID, 0, {"name": f"rank {rank}: host"}),
        _meta("thread_name", HOST_PID, HOST_THREAD, {"name": "step"}),
    ]
    for stream, tid in streams.items():
        events.append(_meta("thread_name", DEVICE_PID, tid, {"name": f"stream {tid} ({stream})"}))
    events.append({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#0", "pid": HOST_PID, "tid": HOST_THREAD,
                   "ts": 0.0, "dur": _us(timeline.total), "args": {"rank": rank}})
    shown: dict[int, Span] = {}
    for k, s in enumerate(timeline.spans, 1):
        if s.end <= s.start:
            continue  # views and other ops that launch nothing
        tid = streams[s.stream]
        shown[s.op.index] = s
        events.append({"ph": "X", "cat": "kernel", "name": _kernel_name(s), "pid": DEVICE_PID, "tid": tid,
                       "ts": _us(s.start), "dur": _us(s.seconds), "args": _op_args(s, tid, k)})
    events += _call_slices(graph, shown)
    events += _flows(graph, shown, streams)
    return {
        "schemaVersion": 1,
        "distributedInfo": {"backend": backend, "rank": rank, "world_size": world},
        "deviceProperties": [{"id": 0, "name": device["name"], "totalGlobalMem": device["totalGlobalMem"]}],
        "dispatchtrace": {"source": device["source"], "spec": device.get("spec"), "step_seconds": timeline.total,
                          "exposed_seconds": timeline.exposed, "overlap": timeline.overlap},
        "displayTimeUnit": "ms",
        "traceEvents": events,
    }


def write(graph: Graph, o: TraceOptions) -> bytes:
    """The trace's bytes (compact JSON)."""
    timeline, device = timeline_of(graph, o.estimate)
    return json.dumps(trace_events(graph, timeline, device), separators=(",", ":")).encode()


def _us(seconds: float) -> float:
    return round(seconds * 1e6, 3)


def _meta(name: str, pid: int, tid: int, args: dict[str, Any]) -> dict[str, Any]:
    return {"ph": "M", "name": name, "pid": pid, "tid": tid, "args": args}


def _kernel_name(s: Span) -> str:
    c = s.collective
    if c is None:
        return s.op.short
    reduce = f"_{c.reduce.capitalize()}" if c.reduce else ""
    return f"ncclDevKernel_{_KERNEL_NAMES.get(c.kind, 'SendRecv')}{reduce} ({s.op.short})"


def _op_args(s: Span, tid: int, k: int) -> dict[str, Any]:
    op = s.op
    args: dict[str, Any] = {"device": 0, "stream": tid, "correlation": k, "External id": k, "op": op.name,
                            "call": op.call.label, "phase": op.phase,
                            "shapes": ", ".join(r.shape_text for r in op.outputs)}
    if s.waited > 0:
        args["waited_us"] = _us(s.waited)
    c = s.collective
    if c is not None:
        args.update({"kind": c.kind, "group": str(c.group) if c.group is not None else None,
                     "bytes_sent": c.sent, "bytes_received": c.received})
    return args


def _call_slices(graph: Graph, shown: dict[int, Span]) -> list[dict[str, Any]]:
    """Each module call as an annotation around its compute-stream ops (children nest inside, as the calls did)."""
    bounds: dict[int, list[float]] = {}
    calls: dict[int, Call] = {}
    for s in shown.values():
        if s.collective is not None:
            continue
        call: Call | None = s.op.call
        while call is not None and call.parent is not None:  # the root is the step itself
            b = bounds.setdefault(id(call), [s.start, s.end])
            b[0], b[1] = min(b[0], s.start), max(b[1], s.end)
            calls[id(call)] = call
            call = call.parent
    out = []
    for key, (start, end) in bounds.items():
        call = calls[key]
        out.append({"ph": "X", "cat": "gpu_user_annotation", "name": call.label, "pid": DEVICE_PID,
                    "tid": COMPUTE_STREAM, "ts": _us(start), "dur": _us(end - start),
                    "args": {"type": call.type, "path": call.path, "index": call.index}})
    out.sort(key=lambda e: (e["ts"], -e["dur"]))
    return out


def _flows(graph: Graph, shown: dict[int, Span], streams: dict[str, int]) -> list[dict[str, Any]]:
    """A flow arrow from each shown op to each shown op that reads what it made (through views and other unshown ops)."""
    out: list[dict[str, Any]] = []
    flow = 0
    for s in shown.values():
        for producer in producers_in(s.op, shown):
            p = shown[producer.index]
            flow += 1
            out.append({"ph": "s", "cat": "dataflow", "name": "data", "id": flow, "pid": DEVICE_PID,
                        "tid": streams[p.stream], "ts": _us(p.end - 1e-9 if p.end > p.start else p.start)})
            out.append({"ph": "f", "bp": "e", "cat": "dataflow", "name": "data", "id": flow, "pid": DEVICE_PID,
                        "tid": streams[s.stream], "ts": _us(s.start)})
    return out


def producers_in(op: Op, shown: Container[int]) -> list[Op]:
    """The ops among ``shown`` (op indices) whose results ``op`` reads, through any op not in it (views and other
    ops that take no time), in op order."""
    found: dict[int, Op] = {}
    stack, seen = list(op.producers), set()
    while stack:
        p = stack.pop()
        if p.index in seen:
            continue
        seen.add(p.index)
        if p.index in shown:
            found[p.index] = p
        else:
            stack.extend(p.producers)
    return [found[i] for i in sorted(found)]


def _rank_info(graph: Graph) -> tuple[int, int, str]:
    """``(rank, world size, backend)`` from the capture's process groups (``(0, 1, "")`` without any)."""
    rank, world, backend = 0, 1, ""
    for op in graph.ops:
        for a in op.args:
            if isinstance(a, Group):
                rank, backend = a.rank, a.backend or backend
                world = max(world, max(a.ranks, default=0) + 1)
    return rank, world, backend
