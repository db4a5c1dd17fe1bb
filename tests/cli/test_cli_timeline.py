"""The timeline on the command line: ``--estimate SPEC -o step.trace.json -o step.et``, ``--ranks-per-node``, and a
job's rank files estimated rank by rank with ``dispatchtrace render 'trace.rank*.json' --estimate SPEC``."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from views.test_estimate_distributed import _tp_dp_rank

import dispatchtrace as dt
from dispatchtrace import cli


def test_the_main_command_writes_the_estimate_s_timelines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace, et = tmp_path / "step.trace.json", tmp_path / "step.et"
    assert cli.main(["coolcnn", "--estimate", "h100", "-o", str(trace), "-o", str(et)]) == 0
    out = capsys.readouterr().out
    data = json.loads(trace.read_text())
    assert data["dispatchtrace"]["source"] == "estimate" and data["dispatchtrace"]["spec"] == "h100-sxm"
    assert f"Estimated time on {data['deviceProperties'][0]['name']}" in out
    pb = pytest.importorskip("chakra.schema.protobuf.et_def_pb2")
    protolib = pytest.importorskip("chakra.src.third_party.utils.protolib")
    f, meta, node = io.BytesIO(et.read_bytes()), pb.GlobalMetadata(), pb.Node()
    assert protolib.decodeMessage(f, meta) and protolib.decodeMessage(f, node)


def test_a_timeline_needs_times_and_ranks_per_node_needs_an_estimate(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["coolcnn", "-o", str(tmp_path / "step.trace.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--estimate SPEC or --time" in err
    assert not (tmp_path / "step.trace.json").exists()
    assert cli.main(["coolcnn", "--ranks-per-node", "4"]) == 2
    assert "goes with --estimate SPEC" in capsys.readouterr().err
    assert cli.main(["coolcnn", "--estimate", "h100", "--ranks-per-node", "0"]) == 2


def test_a_job_s_rank_files_estimated_rank_by_rank(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for rank in range(8):  # a job of 8 ranks: tensor parallel 4 inside a node, data parallel 2, rank 6's batch longer
        _tp_dp_rank(rank, world=8, tp=4, tokens=256 if rank == 6 else 64).save(tmp_path / f"trace.rank{rank}.json")
    pattern = str(tmp_path / "trace.rank*.json")
    out = tmp_path / "out"
    assert cli.main(["render", pattern, "--estimate", "h100", "--ranks-per-node", "4", "-o", str(out / "ranks.html"),
                     "-o", str(out / "step.trace.json"), "-o", str(out / "step.et")]) == 0
    text = capsys.readouterr().out
    job = dt.estimate_ranks(dt.load_ranks(pattern), "h100", ranks_per_node=4)
    assert job.slowest == 6 and f"(rank 6), skew {job.skew * 1e6:.1f} µs" in text
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["ranks.html", "step.groups.json", *(f"step.rank{r}.trace.json" for r in range(8)), *(f"step.{r}.et" for r in range(8))])
    assert "Estimated step on NVIDIA H100" in (out / "ranks.html").read_text()
    groups = json.loads((out / "step.groups.json").read_text())
    assert sorted(map(tuple, groups.values())) == [(0, 1, 2, 3), (0, 4), (1, 5), (2, 6), (3, 7), (4, 5, 6, 7)]
    six = json.loads((out / "step.rank6.trace.json").read_text())
    assert six["distributedInfo"]["rank"] == 6 and six["dispatchtrace"]["step_seconds"] == pytest.approx(job[6].total)
    assert cli.main(["render", pattern, "-o", str(tmp_path / "x.trace.json")]) == 2
    assert "needs times: add --estimate SPEC" in capsys.readouterr().err
