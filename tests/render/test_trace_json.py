"""The ``.trace.json`` of a rank's schedule: Chrome trace events that Holistic Trace Analysis reads back with our numbers."""

from __future__ import annotations

import json
import warnings

import pytest
import torch
import torch.distributed as dist

import dispatchtrace as dt
from dispatchtrace.render._trace_json import trace_events
from dispatchtrace.views import timeline

MS = 1e-3


def _is_compute(op) -> bool:
    return not op.target.startswith(("c10d.", "_c10d_functional."))


def _step_of_rank(rank: int, world: int = 2):
    """One rank's step on the fake backend: an all-reduce issued early, waited after some compute."""
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=world)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            grads, a = torch.ones(1024), torch.ones(32, 32)
            model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32))
            with dt.capture(model) as g:
                work = dist.all_reduce(grads, async_op=True)
                model(a)
                work.wait()
                grads.mul_(0.5)
    finally:
        dist.destroy_process_group()
    return g


def _schedule(g, comm: float):
    return timeline(g, lambda op: MS if _is_compute(op) and not op.is_view else 0.0, lambda c: comm)


def test_the_trace_holds_rank_device_streams_calls_and_flows():
    g = _step_of_rank(1)
    t = _schedule(g, 2.5 * MS)
    d = trace_events(g, t, {"name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 80 << 30, "source": "estimate"})
    assert d["distributedInfo"] == {"backend": "fake", "rank": 1, "world_size": 2}
    assert d["deviceProperties"][0]["name"] == "NVIDIA H100 80GB HBM3"
    events = d["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    comm = [e for e in kernels if e["name"].startswith("ncclDevKernel_AllReduce")]
    assert len(comm) == 1 and comm[0]["args"]["kind"] == "all_reduce" and comm[0]["tid"] != kernels[-1]["tid"]
    assert comm[0]["dur"] == pytest.approx(2500.0)
    calls = {e["name"] for e in events if e.get("cat") == "gpu_user_annotation"}
    assert {"0", "1", "2"} <= calls  # the Sequential's children, each around its ops
    linear = next(e for e in events if e.get("cat") == "gpu_user_annotation" and e["name"] == "0")
    inside = [e for e in kernels if e["args"]["call"] == "0"]
    assert inside and all(linear["ts"] <= e["ts"] and e["ts"] + e["dur"] <= linear["ts"] + linear["dur"] + 1e-6 for e in inside)
    starts = {e["id"] for e in events if e.get("ph") == "s"}
    ends = {e["id"] for e in events if e.get("ph") == "f"}
    assert starts and starts == ends
    json.dumps(d)  # plain JSON


def test_holistic_trace_analysis_reads_our_overlap_and_breakdown(tmp_path):
    hta = pytest.importorskip("hta.trace_analysis")
    ours = {}
    for rank in (0, 1):
        g = _step_of_rank(rank)
        t = _schedule(g, (2.5 + 4 * rank) * MS)  # rank 1's network is slower: part of its all-reduce shows
        ours[rank] = t
        d = trace_events(g, t, {"name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 80 << 30, "source": "estimate"})
        (tmp_path / f"step.rank{rank}.trace.json").write_text(json.dumps(d))
    analysis = hta.TraceAnalysis(trace_dir=str(tmp_path))
    overlap = analysis.get_comm_comp_overlap(visualize=False).set_index("rank")["comp_comm_overlap_pctg"]
    for rank, t in ours.items():
        assert overlap[rank] == pytest.approx(100 * t.overlap, abs=0.5)
    assert ours[0].overlap == pytest.approx(1.0) and 0 < ours[1].overlap < 1
    breakdown = analysis.get_temporal_breakdown(visualize=False).set_index("rank")
    for rank, t in ours.items():
        row = breakdown.loc[rank]  # HTA's non-compute time is the communication nothing overlapped: our exposed
        assert row["non_compute_time(us)"] == pytest.approx(t.exposed * 1e6, abs=1)
        assert row["compute_time(us)"] == pytest.approx(t.compute * 1e6, abs=1)
        assert row["kernel_time(us)"] == pytest.approx(t.total * 1e6, abs=1)
        assert row["idle_time(us)"] == pytest.approx(0.0, abs=1)
    assert ours[1].exposed == pytest.approx(3.5 * MS)


def test_render_writes_the_estimate_s_trace_and_the_last_estimate_is_the_default(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU())
    with dt.capture(model) as g:
        model(torch.ones(8, 64))
    with pytest.raises(ValueError, match=r"a trace needs times: pass estimate=g.estimate\('h100'\)"):
        g.render(tmp_path / "none.trace.json")
    assert not (tmp_path / "none.trace.json").exists()
    est = g.estimate("a100-80gb")
    g.render(tmp_path / "a.trace.json", estimate=est)
    g.estimate("h100")  # the capture's views show the last estimate: the trace too
    g.render(tmp_path / "h.trace.json")
    a, h = (json.loads((tmp_path / f"{k}.trace.json").read_text()) for k in "ah")
    assert a["deviceProperties"][0]["name"].startswith("NVIDIA A100") and h["deviceProperties"][0]["name"].startswith("NVIDIA H100")
    assert a["dispatchtrace"]["step_seconds"] == pytest.approx(est.total)
    kernels = [e for e in a["traceEvents"] if e.get("cat") == "kernel"]
    assert sum(e["dur"] for e in kernels) == pytest.approx(est.total * 1e6, abs=0.01)


def test_a_timed_capture_writes_its_measured_timeline(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU())
    with dt.capture(model, timing=True) as g:
        model(torch.ones(8, 64))
    g.render(tmp_path / "m.trace.json")
    d = json.loads((tmp_path / "m.trace.json").read_text())
    assert d["dispatchtrace"]["source"] == "measured"
    kernels = [e for e in d["traceEvents"] if e.get("cat") == "kernel"]
    assert {e["args"]["op"] for e in kernels} >= {"addmm", "relu"}
    assert sum(e["dur"] for e in kernels) == pytest.approx(sum(op.time or 0 for op in g.ops) * 1e6, abs=0.01)
