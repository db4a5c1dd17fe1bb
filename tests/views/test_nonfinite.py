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


# The triggers of issue 36: an answer never names a false maker, the earliest event wins, and "any" never
# comes after "nan" or "inf".


def answers(g: dt.Graph) -> dict[str, dt.NonFinite | None]:
    return {k: g.first_nonfinite(k) for k in ("any", "nan", "inf")}  # type: ignore[arg-type]


def assert_consistent(found: dict[str, dt.NonFinite | None]) -> None:
    """``any`` is the earlier of ``nan`` and ``inf``; no answer says "made" while an input's stats are unknown."""
    specific = [f for k, f in found.items() if k != "any" and f is not None]
    if not specific:
        assert found["any"] is None
        return
    first = found["any"]
    assert first is not None and first.op.index == min(f.op.index for f in specific)
    for f in found.values():
        if f is not None and f.verdict == "made":
            assert all(s is not None for _, s in f.inputs), f"{f} names a maker whose inputs are not all known"


class Bigram(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed, self.head = nn.Embedding(10, 8), nn.Linear(8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.embed(x))


@needs_node_hook
def test_the_step_after_the_nan_with_adam_is_carried_in_the_embedding_not_made_by_the_optimizer() -> None:
    torch.manual_seed(0)
    model = Bigram()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = torch.randint(0, 10, (4, 6)), torch.randint(0, 10, (4, 6))

    def step() -> torch.Tensor:
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
        loss.backward()
        opt.step()
        return loss

    step()
    opt.zero_grad()  # the step that makes the NaN: one gradient row NaN, as an overflow would leave it
    loss = nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
    loss.backward()
    model.embed.weight.grad[x[0, 0]] *= float("nan")  # type: ignore[index]
    opt.step()
    assert model.embed.weight.isnan().any() and opt.state[model.embed.weight]["exp_avg"].isnan().any()
    with dt.capture(model, values="stats") as g:  # the step after: the loss first reads NaN
        loss = step()
    assert loss.isnan()
    found = answers(g)
    assert_consistent(found)
    for kind in ("any", "nan"):
        f = found[kind]
        assert f is not None and f.verdict == "carried", f
        assert f.tensor.name == "embed.weight" and f.phase == "forward" and f.op.target == "aten.embedding.default"
        assert str(f).startswith(("NaN/Inf already in embed.weight, first read by %embedding",
                                  "NaN already in embed.weight, first read by %embedding"))
    assert found["inf"] is None


def gru_capture() -> dt.Graph:
    torch.manual_seed(0)
    gru = nn.GRU(4, 3)  # on the CPU: unsafe_split of the gates, then in-place sigmoid_ / mul_ / add_ on the chunks
    x = torch.randn(3, 1, 4)
    x[0, 0, 1], x[0, 0, 2] = float("inf"), -float("inf")  # inf - inf: a NaN made inside the first addmm
    with torch.no_grad(), dt.capture(gru, values="stats") as g:
        out, _ = gru(x)
    assert out.isnan().any()
    return g


def test_any_nan_and_inf_agree_on_a_gru() -> None:
    g = gru_capture()
    assert any(op.target == "aten.unsafe_split.Tensor" for op in g.ops)
    found = answers(g)
    assert_consistent(found)
    inf, nan, any_ = found["inf"], found["nan"], found["any"]
    assert inf is not None and inf.verdict == "carried" and inf.tensor.kind == "input"
    assert any_ is not None and any_.op is inf.op and any_.verdict == "carried" and any_.kind == "any"
    assert nan is not None and nan.op.target == "aten.addmm.default" and nan.verdict == "made"
    assert nan.op.index > inf.op.index


def test_a_gru_view_read_after_its_sibling_view_was_written_has_stats() -> None:
    g = gru_capture()
    missing = [f"%{op.name} reads {r.text}" for op in g.ops for r in op.inputs if r.id not in g.stats]
    assert not missing, missing


class InPlaceBuffer(nn.Module):
    """A buffer whose first read writes it in place (a running statistic, a step counter)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("acc", torch.tensor([1.0, float("nan"), 3.0]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.acc.mul_(0.9)
        return x + self.acc


def test_a_buffer_whose_first_read_writes_it_in_place_is_never_named_as_the_maker() -> None:
    model = InPlaceBuffer()
    with torch.no_grad(), dt.capture(model, values="stats") as g:
        model(torch.ones(3))
    found = g.first_nonfinite()
    assert found is not None and found.op.target == "aten.mul_.Tensor" and found.verdict != "made", found
    assert found.inputs[0][1] is not None and found.inputs[0][1].nan == 1  # its value before the write
    assert_consistent(answers(g))


def test_a_buffer_whose_first_read_writes_it_in_place_is_carried() -> None:
    model = InPlaceBuffer()
    with torch.no_grad(), dt.capture(model, values="stats") as g:
        model(torch.ones(3))
    found = g.first_nonfinite()
    assert found is not None and found.verdict == "carried" and found.tensor.name == "acc", found
    assert str(found).startswith("NaN/Inf already in acc, first read by %mul_")


class Magnitude(nn.Module):
    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return z.abs() + 1


def test_an_op_whose_input_has_no_stats_is_unsure_not_the_maker() -> None:
    z = torch.tensor([1 + 1j, complex(float("nan"), 0.0)])  # complex tensors have no stats
    with torch.no_grad(), dt.capture(Magnitude(), values="stats") as g:
        Magnitude()(z)
    found = g.first_nonfinite()
    assert found is not None and found.op.target == "aten.abs.default" and found.verdict == "unsure"
    assert not found.carried and found.unsure == "input z has no stats: a complex tensor (c64[2]) has none"
    text = str(found)
    assert text.startswith("NaN/Inf first seen in %abs = aten.abs.default in Magnitude")
    assert "maker uncertain: input z has no stats" in text and "made" not in text.splitlines()[0]
    assert_consistent(answers(g))
