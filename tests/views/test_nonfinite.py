"""``first_nonfinite``: the op that made a NaN or Inf, not the ops that carried it on."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from models import needs_node_hook

import dispatchtrace as dt


class Sqrt(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sqrt(x)


class Twice(nn.Module):
    """One ``Sqrt`` called twice; only the second call gets a negative number."""

    def __init__(self) -> None:
        super().__init__()
        self.root = Sqrt()
        self.fc = nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.root(x)
        b = self.root(x - 2.5)
        return self.fc(a + b).relu()


def test_a_nan_made_in_the_second_call_of_a_module_names_that_call() -> None:
    model = Twice()
    with torch.no_grad(), dt.capture(model, values="stats") as g:
        model(torch.tensor([[1.0, 2.0, 3.0]]))
    found = g.first_nonfinite()
    assert found is not None and found.op.target == "aten.sqrt.default" and found.call.label == "root#1"
    assert found.call.index == 1 and found.kind == "any" and found.phase == "forward" and not found.carried
    assert found.stats.nan == 2 and all(s is not None and s.finite for _, s in found.inputs)
    assert found.source is not None and "self.root(x - 2.5)" not in found.source.text  # the line that ran sqrt
    later = [op for op in g.ops[found.op.index + 1:] if any(not g.stats[r.id].finite for r in op.outputs)]
    assert later, "the NaN is carried on by later ops, which are not named"
    text = str(found)
    assert text.startswith("NaN/Inf first made by %sqrt_1 = aten.sqrt.default in root#1") and "nan 2" in text
    assert g.first_nonfinite("inf") is None


class Masked(nn.Module):
    """``log`` of every element, the zeros masked out by ``where``: finite forward, NaN gradient."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.where(x > 0, torch.log(x), torch.zeros_like(x)).sum()


@needs_node_hook
def test_a_masked_log_gives_a_forward_inf_and_a_backward_nan_told_apart_by_kind() -> None:
    model = Masked()
    x = torch.tensor([0.0, 1.0, 2.0], requires_grad=True)
    with dt.capture(model, values="stats") as g:
        model(x).backward()
    assert x.grad is not None and x.grad.isnan().any()
    inf = g.first_nonfinite("inf")
    assert inf is not None and inf.op.target == "aten.log.default" and inf.phase == "forward"
    assert inf.stats.neginf == 1 and inf.call.label == "Masked"
    nan = g.first_nonfinite("nan")
    assert nan is not None and nan.phase == "backward" and nan.stats.nan == 1
    assert nan.origin is not None and nan.origin.label == "Masked"
    assert nan.grad_of is inf.op, f"{nan.op} is traced to {nan.grad_of}, not to the forward log"
    assert "gradient of %log" in str(nan)
    assert g.first_nonfinite("any").op is inf.op  # type: ignore[union-attr]


def test_an_optimizer_step_that_overflows_a_parameter_names_it() -> None:
    model = nn.Sequential(nn.Linear(1, 1, bias=False))
    with torch.no_grad():
        model[0].weight.fill_(3e38)
    opt = torch.optim.SGD(model.parameters(), lr=1e38)
    with dt.capture(model, values="stats") as g:
        (-model(torch.ones(1, 1))).sum().backward()
        opt.step()
    assert torch.isinf(model[0].weight).all()
    found = g.first_nonfinite()
    assert found is not None and found.phase == "optimizer" and found.kind == "any"
    assert found.param == "0.weight" and found.stats.posinf == 1
    assert "parameter 0.weight" in str(found)


def test_all_finite_is_none_and_a_capture_without_stats_says_what_to_do() -> None:
    lin = nn.Linear(3, 2)
    with dt.capture(lin, values="stats") as g:
        lin(torch.ones(1, 3))
    assert g.first_nonfinite() is None
    with dt.capture(lin) as plain:
        lin(torch.ones(1, 3))
    with pytest.raises(dt.NoValuesError, match='values="stats"'):
        plain.first_nonfinite()
    with pytest.raises(ValueError, match="kind='zero'"):
        g.first_nonfinite("zero")  # type: ignore[arg-type]


def test_a_nan_already_in_a_parameter_is_carried_not_made() -> None:
    lin = nn.Linear(3, 2)
    with torch.no_grad():
        lin.weight[0, 0] = float("nan")
    with torch.no_grad(), dt.capture(lin, values="stats") as g:
        lin(torch.ones(1, 3))
    found = g.first_nonfinite("nan")
    assert found is not None and found.carried and found.tensor.name == "weight"
    assert str(found).startswith("NaN already in weight, first read by %t")


def test_the_summary_shows_each_calls_output_norm_and_nan_count() -> None:
    model = Twice()
    with torch.no_grad(), dt.capture(model, values="stats") as g:
        out = model(torch.tensor([[1.0, 2.0, 3.0]]))
    s = g.summary()
    rows = {r.label: r for r in s}
    assert rows["root#0"].nonfinite == 0 and rows["root#1"].nonfinite == 2 and rows["fc"].nonfinite == 3
    assert rows["root#0"].norm == pytest.approx(torch.tensor([1.0, 2.0, 3.0]).sqrt().norm().item())
    assert s.total.nonfinite == int(out.isnan().sum())
    header = str(s).splitlines()[0]
    assert "Out norm" in header and "NaN/Inf" in header and "norm" in s.rows()[0]
    with torch.no_grad(), dt.capture(model) as plain:
        model(torch.tensor([[1.0, 2.0, 3.0]]))
    assert "NaN/Inf" not in str(plain.summary()) and "norm" not in plain.summary().rows()[0]
