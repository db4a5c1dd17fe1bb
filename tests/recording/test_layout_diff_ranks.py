"""One device against a parallel job on 2 gloo ranks (tensor parallelism with DTensor, FSDP2): ``dt.diff``
makes each value whole from the ranks' shards and names the first op where the layouts part. Each job
runs as a subprocess under a hard timeout (tests/dist_worker.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from test_distributed import run_ranks

import dispatchtrace as dt

sys.path.insert(0, str(Path(__file__).parents[1]))
from dist_worker import Block, Pair  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.distributed]


def single(case: str) -> dt.Graph:
    """The same model and input on one device (dist_worker.py's seed, weights and batch)."""
    torch.manual_seed(0)
    model = Block() if case == "tp" else Pair()
    x = torch.randn(2, 8, generator=torch.Generator().manual_seed(1))
    with torch.no_grad(), dt.capture(model, values="stats") as g:
        model(x)
    return g


@pytest.mark.parametrize("case", ["tp", "fsdp"])
def test_one_device_agrees_with_two_ranks(tmp_path: Path, case: str) -> None:
    ranks = run_ranks(f"{case}:stats", 2, tmp_path)
    one = single(case)
    d = dt.diff(one, ranks)
    assert d.agree and d.first is None and not d.structural, str(d)
    assert d.via.get("stats", 0) == len(one.ops) - d.via.get("partial", 0)
    layout = d.layout_ops
    if case == "tp":  # RowwiseParallel's partial sums, all-reduced: said, not combined
        assert d.via.get("partial") == 1 and layout["_c10d_functional.all_reduce.default"] == 1
        assert "partial sum (P(sum))" in str(d)
        up = next(cd for cd in d.calls if cd.a.path == "up")
        t = next(p for p in up.ops if p.status == "same")  # the weight's transpose: a DTensor op's result sharded over the ranks, combined
        assert t.a is not None and t.b is not None and t.b.dtensor is not None and "S(1)" in t.b.dtensor.outputs[0]
        sa, sb = d.shown(t.a.outputs[0], t.b.outputs[0])
        assert t.b.outputs[0].shape == (8, 8) and sa is not None and sb is not None  # rank 0's half of [8, 16]
        assert (sb.numel, sb.min, sb.max) == (sa.numel, sa.min, sa.max) == (128, sa.min, sa.max)
        assert sb.mean is sa.mean is None and sb.norm == pytest.approx(sa.norm, rel=1e-6)  # (float32 norms; the mean: on request)
    else:  # FSDP2's all-gathers and copies
        assert layout["c10d._allgather_base_.default"] == 2
    text = str(d)
    assert "values: agree within tolerance" in text and "on each of 2 ranks" in text


@pytest.mark.parametrize("case", ["tp", "fsdp"])
def test_one_perturbed_shard_is_named(tmp_path: Path, case: str) -> None:
    ranks = run_ranks(f"{case}_perturbed:stats", 2, tmp_path)
    d = dt.diff(single(case), ranks)
    f = d.first
    assert f is not None and f.a is not None and f.b is not None, str(d)
    weight = "up.weight" if case == "tp" else "a.up.weight"
    assert f.a.target == "aten.t.default" and f.a.call.path == weight.removesuffix(".weight")
    assert d.cause == (f"it reads {weight} (parameter), which differs already",)
    assert f"first departure: %{f.a.name} / %{f.b.name} = aten.t.default in {f.a.call.label}" in str(d)


def test_the_cli_takes_a_quoted_glob_of_rank_files(tmp_path: Path) -> None:
    run_ranks("tp_perturbed:stats", 2, tmp_path)
    single("tp").save(tmp_path / "single.json")
    env = {"PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    r = subprocess.run([sys.executable, "-m", "dispatchtrace", "diff", str(tmp_path / "single.json"),
                        str(tmp_path / "trace.rank*.json"), "-o", str(tmp_path / "layout.html")],
                       capture_output=True, text=True, timeout=120, env={**__import__("os").environ, **env})
    assert r.returncode == 1, r.stderr
    assert "on each of 2 ranks" in r.stdout and "first departure: %t / %t = aten.t.default in up" in r.stdout
    assert (tmp_path / "layout.html").exists()
    bad = subprocess.run([sys.executable, "-m", "dispatchtrace", "diff", str(tmp_path / "single.json"),
                          str(tmp_path / "none.rank*.json")], capture_output=True, text=True, timeout=120,
                         env={**__import__("os").environ, **env})
    assert bad.returncode == 2 and "no file matches" in bad.stderr
