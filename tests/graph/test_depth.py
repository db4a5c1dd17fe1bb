"""graph/_depth.py and views/_noise.py: one depth type and one noise rule, the same in every view."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from models import traced

from dispatchtrace.graph import check_depth
from dispatchtrace.graph._depth import NAMED, is_depth
from dispatchtrace.views import noise_ops
from dispatchtrace.views._noise import is_noise, output_keys


@pytest.mark.parametrize("bad", [None, -1, "foo", "ALL", True, False, 1.5, [1]])
def test_anything_but_a_depth_is_one_value_error_everywhere(bad: object) -> None:
    assert not is_depth(bad)
    g = traced(nn.Sequential(nn.Linear(2, 2)), torch.ones(1, 2), grad=False)
    for view in (g.tree, g.collapse, g.to_dot, g.summary, check_depth):
        with pytest.raises(ValueError, match=r"depth must be an int >= 0 .*'auto', 'ops' or 'all'; got"):
            view(bad)  # type: ignore[operator]


def test_depths() -> None:
    assert [check_depth(d) for d in (0, 3, *NAMED)] == [0, 3, "auto", "ops", "all"]


def test_noise_is_bookkeeping_nothing_reads() -> None:
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU()).train()
    g = traced(model, torch.randn(2, 3, 8, 8))  # training batch norm: a scratch buffer and a counter
    noise = noise_ops(g)
    assert {op.short for op in noise} == {"aten::empty", "aten::add_"}
    assert all(not op.users for op in noise)
    counter = next(op for op in g.ops if op.mutated and op.mutated[0].name == "1.num_batches_tracked")
    assert counter in noise
    assert not any(is_noise(op, output_keys(g)) for op in g.ops if op.short in ("aten::convolution", "aten::relu"))
    # every view hides the same ops, and noise=True shows them all
    for hidden in noise:
        assert hidden not in {n.op for n in g.tree(ops=True).walk()}
        assert hidden not in {n.op for n in g.collapse().nodes}
        assert hidden in {n.op for n in g.tree(ops=True, noise=True).walk()}
        assert hidden in {n.op for n in g.collapse(noise=True).nodes}
    assert f"label=\"{counter.short}\"" in g.to_dot("ops", noise=True).source
    assert f"label=\"{counter.short}\"" not in g.to_dot("ops").source


def test_detach_nothing_reads_is_noise_unless_it_is_an_output() -> None:
    class Detach(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            (x * 2).detach()  # read by nothing
            return (x + 1).detach()  # the output is a detach

    g = traced(Detach(), torch.ones(3))
    assert [op.short for op in g.ops] == ["aten::mul", "aten::detach", "aten::add", "aten::detach"]
    assert noise_ops(g) == {g.ops[1]}  # a detach shares its tensor's storage: the output's is kept
