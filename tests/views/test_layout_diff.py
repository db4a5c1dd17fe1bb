"""``dt.diff`` of one device against a parallel job's ranks: each value made whole from its shards.

The job's ranks here are captures of one process on parts of the batch (a data-parallel split: fast, no
process group); tests/recording/test_layout_diff.py runs tensor parallelism and FSDP2 on 2 gloo ranks."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
import torch.nn as nn

import dispatchtrace as dt
from dispatchtrace.graph import Stats
from dispatchtrace.views import Layout
from dispatchtrace.views._layouts import combine


def stats_of(t: torch.Tensor) -> Stats:
    with dt.capture(nn.Identity(), values="stats", stats=("mean", "zeros")) as g:
        t.clone()
    return g.stats[g.ops[-1].outputs[0].id]


def test_combined_shards_are_the_whole_tensors_stats() -> None:
    t = torch.randn(6, 5, generator=torch.Generator().manual_seed(0))
    t[1, 2], t[4, 0], t[5, 1] = float("nan"), float("inf"), 0.0
    whole, parts = stats_of(t), [stats_of(p) for p in t.split([2, 1, 3])]
    got = combine(parts)
    assert (got.numel, got.nan, got.posinf, got.neginf, got.min, got.max) == \
        (whole.numel, whole.nan, whole.posinf, whole.neginf, whole.min, whole.max)
    # (each part summed in float32 by torch: the whole and the parts round differently, by about 1e-8)
    assert got.mean == pytest.approx(whole.mean, rel=1e-6) and got.norm == pytest.approx(whole.norm, rel=1e-6)
    assert got.zeros == whole.zeros == 1
    unmeant = [dataclasses.replace(p, mean=None) if i == 1 else p for i, p in enumerate(parts)]
    assert combine(unmeant).mean is None and combine(unmeant).norm == got.norm  # a part without it: no mean


def run(model: nn.Module, x: torch.Tensor) -> dt.Graph:
    with torch.no_grad(), dt.capture(model, values="stats") as g:
        model(x)
    return g


def model_and_batch() -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)), torch.randn(6, 8)


def test_a_batch_split_over_ranks_agrees_with_the_whole_batch() -> None:
    model, x = model_and_batch()
    single = run(model, x)
    ranks = {0: run(model, x[:4]), 1: run(model, x[4:])}  # uneven shards of the batch
    d = dt.diff(single, ranks)
    assert d.agree and d.first is None and d.layout_b is not None and not d.layout_ops
    assert d.via == {"stats": len(single.ops)}
    # the activations were combined (not one rank's): the relu's full value is the single run's
    relu = next(cd for cd in d.calls if cd.a.path == "1").ops[0]
    sa, sb = d.shown(relu.a.outputs[0], relu.b.outputs[0])  # type: ignore[union-attr]
    assert sb is not None and sb.numel == 6 * 16 and sb.norm == pytest.approx(sa.norm)  # type: ignore[union-attr]
    text = str(d)
    assert "on each of 2 ranks" in text and "values: agree within tolerance" in text
    assert str(dt.diff(ranks, single)).count("agree within tolerance") == 1  # either side


def test_one_rank_perturbed_is_named() -> None:
    model, x = model_and_batch()
    single = run(model, x)
    y = x[4:].clone()
    y[0, 3] += 1.0
    d = dt.diff(single, {0: run(model, x[:4]), 1: run(model, y)})
    assert d.first is not None and d.first.a is not None and d.first.a.target == "aten.addmm.default"
    assert d.first.a.call.path == "0" and not d.agree
    assert d.cause == ("it reads input (input), which differs already",)


def test_ranks_that_ran_other_ops_are_refused() -> None:
    model, x = model_and_batch()
    other = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4))
    with pytest.raises(ValueError, match=r"rank 1 ran other ops than rank 0 from op 2, %relu"):
        Layout({0: run(model, x), 1: run(other, x)})
    with pytest.raises(ValueError, match="no rank to diff"):
        Layout({})


def test_whole_values_compare_every_rank() -> None:
    model, x = model_and_batch()
    single = run(model, x)
    ranks = {0: run(model, x), 1: run(model, x * (1 + 1e-3))}  # each rank ran the whole batch; rank 1 departs
    d = dt.diff(single, ranks, rtol=1e-5)
    assert d.first is not None and d.first.error > 1e-4 and math.isfinite(d.first.error)
    assert d.cause == ("it reads input (input), which differs already",)  # rank 0's agrees: rank 1's is seen
