"""views.fold: which sibling calls form a run, how later repetitions map onto the first, run labels."""

from __future__ import annotations

import torch
import torch.nn as nn
from models import traced

from dispatchtrace.views import foldable_runs
from dispatchtrace.views._fold import Folding, fold, range_label, signature


def chain_of(n: int) -> nn.Module:
    return nn.Sequential(*[nn.Linear(4, 4) for _ in range(n)])


def test_signature_is_types_targets_and_shapes_in_order() -> None:
    g = traced(chain_of(2), torch.ones(1, 4))
    assert signature(g.calls[1]) == signature(g.calls[2])
    assert [item[:3] for item in signature(g.calls[0])[:2]] == [("call", 0, "Sequential"), ("call", 1, "Linear")]


def test_a_chain_of_identical_calls_is_one_run() -> None:
    g = traced(chain_of(3), torch.ones(1, 4))
    (run,) = foldable_runs(g, lambda c: True)
    assert run.calls == tuple(g.calls[1:])
    assert foldable_runs(g, lambda c: c.parent is None) == []  # the Sequential is not expanded


def test_later_repetitions_map_onto_the_first() -> None:
    g = traced(chain_of(3), torch.ones(1, 4))
    folding = fold(foldable_runs(g, lambda c: True))
    assert isinstance(folding, Folding)
    first, second, third = g.calls[1:]
    assert folding.stand_in(third) is first and folding.stand_in(first) is first
    assert [folding.stand_in(op) for op in third.all_ops()] == list(first.all_ops())
    assert folding.run_of[first].calls == (first, second, third)
    assert folding.apart(next(first.all_ops()), next(second.all_ops()))
    assert not folding.apart(*list(first.all_ops())[:2])
    assert fold([]).stand_in(first) is first


def test_fold_needs_a_chain() -> None:
    class Twin(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.a(x) + self.b(x)  # same structure, side by side: not a chain

    g = traced(Twin(), torch.ones(1, 4))
    assert foldable_runs(g, lambda c: True) == []
    assert [n.name for n in g.collapse(1, fold=True).nodes if n.kind == "call"] == ["a", "b"]


def test_fold_needs_the_same_structure() -> None:
    model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4, bias=False), nn.Linear(4, 4), nn.Linear(4, 4))
    g = traced(model, torch.ones(1, 4))
    assert signature(g.calls[1]) != signature(g.calls[2])
    assert [n.label for n in g.collapse(1, fold=True).nodes if n.kind == "call"] == [
        "0 (Linear)", "1 (Linear)", "2–3 (Linear) ×2"]


def test_one_module_called_in_a_loop_folds() -> None:
    class Loop(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.step = nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for _ in range(5):
                x = self.step(x)
            return x

    g = traced(Loop(), torch.ones(1, 4))
    assert [n.label for n in g.collapse(1, fold=True).nodes] == ["x", "step#0–4 (Linear) ×5", "output"]
    assert range_label(tuple(g.calls[1:])) == "step#0–4"
