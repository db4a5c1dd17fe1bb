"""``dt.diff``: two captures aligned call by call, op by op inside each call, and where their values part."""

from __future__ import annotations

import copy
import dataclasses
import math
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import dispatchtrace as dt
from dispatchtrace.graph import Stats
from dispatchtrace.models import CoolCNN
from dispatchtrace.views._compare import compare_stats


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int, *, sdpa: bool) -> None:
        super().__init__()
        self.heads, self.sdpa = heads, sdpa
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = (nn.Linear(dim, dim) for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = (p(x).view(b, t, self.heads, d // self.heads).transpose(1, 2)
                   for p in (self.q_proj, self.k_proj, self.v_proj))
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v)
        else:
            y = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d // self.heads), dim=-1) @ v
        return self.o_proj(y.transpose(1, 2).reshape(b, t, d))


class Block(nn.Module):
    def __init__(self, dim: int = 32, *, sdpa: bool = False) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = Attention(dim, 4, sdpa=sdpa)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class Net(nn.Module):
    def __init__(self, *, sdpa: bool = False, layers: int = 3) -> None:
        super().__init__()
        self.layers = nn.ModuleList(Block(sdpa=sdpa) for _ in range(layers))
        self.head = nn.Linear(32, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


X = torch.randn(2, 6, 32, generator=torch.Generator().manual_seed(1))


def _run(model: nn.Module, x: torch.Tensor = X, *, bf16: bool = False, **options: object) -> dt.Graph:
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16), \
            dt.capture(model, values="stats", **options) as g:  # type: ignore[arg-type]
        model(x)
    return g


def _net(**kw: bool) -> Net:
    torch.manual_seed(0)
    return Net(**kw).eval()


def test_two_identical_runs_agree() -> None:
    model = _net()
    d = dt.diff(_run(model), _run(model))
    assert d.agree and d.first is None and d.structural == () and not d.only_a and not d.only_b
    assert len(d.calls) == len(_run(model).calls) + 1 and all(cd.error == 0 for cd in d.calls)
    assert d.via == {"stats": len(_run(model).ops)}
    assert "structure: the same calls and ops" in str(d) and "values: agree within tolerance" in str(d)


def test_fp32_against_bf16_autocast_aligns_every_call_and_shows_the_error_per_layer() -> None:
    model = _net()
    a, b = _run(model), _run(model, bf16=True)
    d = dt.diff(a, b, rtol=1e-3, atol=1e-5)
    assert not d.only_a and not d.only_b and len(d.calls) == len(a.calls) + 1  # every call aligned
    added = [p for cd in d.calls for p in cd.changed]
    assert added and {(p.status, p.b.target) for p in added} == {("added", "aten._to_copy.default")}  # type: ignore[union-attr]
    assert all(p.b.call.type == "Linear" or p.b.call.type == "Net" for p in added)  # type: ignore[union-attr]
    layers = [cd for cd in d.calls if cd.a.path.startswith("layers.") and cd.a.path.count(".") == 1]
    assert len(layers) == 3 and all(0 < cd.error < 0.1 for cd in layers)
    assert d.first is not None and not d.agree
    text = str(d)
    assert "added _to_copy.default" in text and "layers.2" in text and "first departure" in text


@pytest.mark.parametrize("saved", [False, True], ids=["live", "saved"])
def test_one_perturbed_weight_is_found_in_its_call(saved: bool, tmp_path: Path) -> None:
    model = _net()
    other = copy.deepcopy(model)
    with torch.no_grad():
        other.layers[1].mlp[2].weight[3, 5] += 0.25
    a, b = _run(model), _run(other)
    if saved:
        a.save(tmp_path / "a.json")
        b.save(tmp_path / "b.json")
        a, b = dt.load(tmp_path / "a.json"), dt.load(tmp_path / "b.json")
    d = dt.diff(a, b)
    assert d.first is not None and d.first.a.call.label == "layers.1.mlp.2"  # type: ignore[union-attr]
    assert d.structural == () and d.first.via == "stats"
    by_label = {cd.label: cd for cd in d.calls}
    assert by_label["layers.0"].error == 0 and by_label["layers.1.mlp.2"].error > 0 and by_label["layers.2"].error > 0


def test_a_refactor_names_the_calls_whose_ops_differ_and_the_projections_agree() -> None:
    a, b = _run(_net(sdpa=False)), _run(_net(sdpa=True))
    d = dt.diff(a, b, rtol=1e-4, atol=1e-6)
    changed = {cd.label for cd in d.calls if cd.changed}
    assert changed == {f"layers.{i}.attn" for i in range(3)}
    assert not d.only_a and not d.only_b
    for cd in d.calls:
        if cd.a.path.endswith(("q_proj", "k_proj", "v_proj")) and cd.a.path.startswith("layers.0"):
            assert cd.error == 0 and not cd.changed  # before the attention that changed: the same numbers
    assert any("_scaled_dot_product" in line for line in d.structural)
    assert d.first is None or d.first.error < 1e-3  # the same numbers up to rounding: no false departure


def test_kept_tensors_are_compared_where_both_kept_them() -> None:
    model = _net()
    other = copy.deepcopy(model)
    with torch.no_grad():
        other.head.bias[0] += 1e-3
    d = dt.diff(_run(model, keep="head"), _run(other, keep="head"))
    head = next(cd for cd in d.calls if cd.label == "head")
    assert head.via == "values" and head.error > 0 and d.first is not None and d.first.a.call.label == "head"  # type: ignore[union-attr]
    assert d.via.get("values", 0) >= 1 and "through kept tensors" in str(d)


def test_meta_captures_give_the_structure_only() -> None:
    with torch.device("meta"):
        model = Net().eval()
    x = torch.zeros(2, 6, 32, device="meta")
    a, b = _run(model, x), _run(model, x)
    d = dt.diff(a, b)
    assert not a.stats and d.agree and d.via == {"none": len(a.ops)}
    assert "structure only" in str(d)
    with torch.device("meta"):
        smaller = Net(layers=2).eval()
    d2 = dt.diff(a, _run(smaller, x))
    assert [c.label for c in d2.only_a] == ["layers.2"] and d2.first is None and not d2.agree


def test_captures_of_different_models_report_structure_and_do_not_crash() -> None:
    torch.manual_seed(0)
    cool = CoolCNN()
    with dt.capture(cool, values="stats") as c:
        cool(torch.randn(1, 3, 32, 32))
    d = dt.diff(_run(_net()), c)
    assert not d.agree and d.only_a and d.only_b and "call only in b: initial_conv" in "\n".join(d.structural)
    assert str(d)


def test_a_training_step_diff_compares_gradients_and_updates() -> None:
    def step(model: nn.Module, x: torch.Tensor) -> dt.Graph:
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        with dt.capture(model, values="stats") as g:
            model(x).pow(2).mean().backward()
            opt.step()
        return g

    model = _net()
    a = step(copy.deepcopy(model), X)
    b = step(copy.deepcopy(model), X)
    assert dt.diff(a, b).agree
    y = X.clone()
    y[1, 2, 3] += 1.0  # the second sample only: a different input
    d = dt.diff(a, step(copy.deepcopy(model), y))
    phases = {p.a.phase for cd in d.calls for p in cd.ops if p.departs}  # type: ignore[union-attr]
    assert phases == {"forward", "backward", "optimizer"}
    assert d.first is not None and d.first.a.phase == "forward" and d.first.a.call.label == "layers.0.norm1"  # type: ignore[union-attr]


def test_a_stats_only_diff_cannot_see_one_element_scaled_by_1_001_and_says_so() -> None:
    torch.manual_seed(0)
    lin = nn.Linear(64, 64)
    x = torch.randn(8, 64)
    y = x.clone()
    y[3, 5] *= 1.001  # min, max, mean and norm stay within rtol 1e-4; the element itself is off by 1e-3

    def run(inp: torch.Tensor, **kw: object) -> dt.Graph:
        with torch.no_grad(), dt.capture(lin, values="stats", **kw) as g:  # type: ignore[arg-type]
            lin(inp)
        return g

    d = dt.diff(run(x), run(y), rtol=1e-4, atol=1e-6)
    assert d.first is None and d.stats_only
    text = str(d)
    assert "values: agree within tolerance" in text
    assert "note: the values were compared through statistics only" in text and "keep=" in text
    kept = dt.diff(run(x, keep="aten.addmm*"), run(y, keep="aten.addmm*"), rtol=1e-4, atol=1e-6)
    assert kept.first is not None and kept.first.via == "values" and kept.first.a.target == "aten.addmm.default"  # type: ignore[union-attr]
    assert not kept.stats_only and "1 op pairs were compared through statistics only" in str(kept)


def test_the_departure_says_when_it_starts_at_casts_autocast_added() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 32), nn.GELU(), nn.Linear(32, 32)).eval()
    x = torch.randn(4, 32)
    fp32 = _run(model, x)
    d = dt.diff(fp32, _run(model, x, bf16=True), rtol=1e-4, atol=1e-6)
    assert d.first is not None and d.first.b is not None
    why = d.cause
    assert len(why) == 1 and "cast from f32 to bf16" in why[0] and "as autocast adds" in why[0]
    assert "its inputs agree" not in str(d) and why[0] in str(d)
    same = dt.diff(fp32, fp32)
    assert same.cause == ()


def test_the_mean_is_compared_only_where_both_sides_took_it() -> None:
    """``stats=("mean",)`` on one side only: the mean is not compared (no false departure); on both, it is."""
    a = Stats(4, 0, 0, 0, None, -1.0, 1.0, 0.5, 2.0)
    shifted = dataclasses.replace(a, mean=-0.5)  # the range and the norm alike: only the mean tells them apart
    assert compare_stats(a, shifted, 1e-5, 1e-8)[1]
    assert compare_stats(a, dataclasses.replace(a, mean=None), 1e-5, 1e-8) == (0.0, False)
    assert compare_stats(dataclasses.replace(shifted, mean=None), a, 1e-5, 1e-8) == (0.0, False)
