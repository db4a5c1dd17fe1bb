"""``capture(values="stats")`` and ``keep=``: statistics of every result, copies of chosen ones."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn

import dispatchtrace as dt
from dispatchtrace.graph import Stats
from dispatchtrace.models import CoolCNN
from dispatchtrace.recording import stats_of
from dispatchtrace.recording._capture import OpMode


def test_stats_of_counts_and_moments_in_float64() -> None:
    x = torch.tensor([0.0, 1.0, -2.0, float("nan"), float("inf"), float("-inf"), 0.0, 3.0])
    s = stats_of(x, mean=True, zeros=True)
    assert s is not None and (s.numel, s.nan, s.posinf, s.neginf, s.zeros) == (8, 1, 1, 1, 2)
    assert stats_of(x) == Stats(8, 1, 1, 1, None, s.min, s.max, None, s.norm)  # the mean and zeros: on request
    assert (s.min, s.max) == (-2.0, 3.0) and s.mean == pytest.approx(2.0 / 5) and s.norm == pytest.approx(math.sqrt(14))
    assert stats_of(x[~x.isnan() & ~x.isinf()]).mean is None  # (finite, too)
    big = torch.full((1000,), 3e38, dtype=torch.float32)  # its float32 sum and square would overflow
    for b in (stats_of(big), stats_of(big, mean=True)):
        assert b is not None and b.finite and b.norm == pytest.approx(3e38 * math.sqrt(1000), rel=1e-6)
    assert stats_of(big, mean=True).mean == pytest.approx(3e38, rel=1e-6)
    half = stats_of(torch.tensor([1.5, -0.5], dtype=torch.bfloat16), mean=True)
    assert half is not None and (half.min, half.max, half.mean) == (-0.5, 1.5, 0.5)
    wide = stats_of(torch.full((300,), 1.0 + 2**-7, dtype=torch.bfloat16))  # its norm in float32, not bfloat16
    assert wide is not None and wide.norm == pytest.approx((1.0 + 2**-7) * math.sqrt(300), rel=1e-6)


def test_stats_of_large_tensors_are_accurate() -> None:
    """Past ``_FLAT`` elements the norm is float32 within blocks of at most ``_BLOCK`` and float64 across them,
    the elements past the last whole block included (torch's float32 norm of the whole is off by 5e-3 at 8 M);
    the sum is torch's cascaded one."""
    from dispatchtrace.recording._stats import _BLOCK, _FLAT, _block

    n = next(m for m in range(8 * _BLOCK * _BLOCK + 1, 9 * _BLOCK * _BLOCK, 2) if _block(m) == 0)
    assert n > _FLAT and n % _BLOCK  # no block size divides it: the elements past the last whole block apart
    for size in (n, 1000 * 1000, _FLAT):  # (and one that blocks of 1000 divide, and the largest in one norm)
        x = torch.full((size,), 0.1)
        x[-(size % _BLOCK or 500):] = 7.0  # the tail carries its own value: dropping or double-counting it shows
        exact = x.double().sum().item()
        s = stats_of(x, mean=True)
        assert s is not None and s.numel == size
        assert abs(s.mean * size - exact) < 1e-6 * exact  # float32 blocks of 0.1: each exact to ~1e-7
        assert s.norm == pytest.approx(x.double().norm().item(), rel=1e-6)
    torch.manual_seed(0)
    y = torch.randn(n) + 1e3  # a large offset: one long float32 running sum would lose the low digits
    assert abs(stats_of(y, mean=True).mean * n - y.double().sum().item()) < 1e-7 * y.double().abs().sum().item()
    assert stats_of(y).norm == pytest.approx(y.double().norm().item(), rel=1e-7)
    z = torch.randn(_FLAT) + 1e3  # the largest norm taken whole in float32: within 1e-6
    assert stats_of(z).norm == pytest.approx(z.double().norm().item(), rel=1e-6)


def test_stats_of_a_permuted_or_gapped_view_are_those_of_its_elements() -> None:
    torch.manual_seed(0)
    w = torch.randn(300, 200)
    w[3, 4] = 0.0
    w[5, 6] = -0.0
    for view in (w.t(), w.view(30, 10, 200).permute(2, 0, 1), w[:, ::3], w.expand(2, 300, 200)[1]):
        s, ref = stats_of(view, mean=True, zeros=True), stats_of(view.contiguous(), mean=True, zeros=True)
        assert s is not None and ref is not None
        assert (s.numel, s.zeros, s.min, s.max) == (ref.numel, ref.zeros, ref.min, ref.max)
        assert s.mean == pytest.approx(ref.mean, abs=1e-6) and s.norm == pytest.approx(ref.norm, rel=1e-6)  # (order: float32 blocks)
    assert stats_of(w.t(), zeros=True).zeros == 2  # -0.0 is a zero


def test_a_view_of_the_same_elements_shares_its_source_stats_but_not_a_dtype_view() -> None:
    lin = nn.Linear(64, 32)
    x = torch.randn(4, 64)
    with dt.capture(lin, values="stats") as g:
        y = lin(x)
        bits = y.view(torch.int32)
    t = g.find_ops("aten.t*")[0]
    assert g.stats[t.outputs[0].id] == g.stats[t.inputs[0].id]  # the transposed weight: the weight's own stats
    as_int = g.find_ops("aten.view.dtype")[0]
    s = g.stats[as_int.outputs[0].id]
    assert s == stats_of(bits) and s != g.stats[as_int.inputs[0].id]  # other numbers: their own stats


def test_stats_of_ints_bools_empty_and_tensors_without_values() -> None:
    i = stats_of(torch.tensor([3, 0, -4]), zeros=True)
    assert i is not None and (i.min, i.max, i.zeros, i.nan, i.norm) == (-4.0, 3.0, 1, 0, 5.0)
    b = stats_of(torch.tensor([True, False, True, True]), mean=True, zeros=True)
    assert b is not None and (b.mean, b.zeros, b.min, b.max) == (0.75, 1, 0.0, 1.0)
    e = stats_of(torch.ones(0, 3))
    assert e is not None and e.numel == 0 and e.min is None and str(e) == "empty"
    assert stats_of(torch.ones(2, device="meta")) is None
    assert stats_of(torch.ones(2, dtype=torch.complex64)) is None
    only_nan = stats_of(torch.full((3,), float("nan")))
    assert only_nan is not None and only_nan.nan == 3 and only_nan.min is None and "no finite value" in str(only_nan)


def test_stats_are_those_of_each_result_and_the_reductions_are_no_ops() -> None:
    torch.manual_seed(0)
    model, x = CoolCNN(), torch.randn(1, 3, 32, 32)
    seen: list[str] = []
    outer = OpMode(lambda func, args, kwargs, out: seen.append(str(func)))
    with outer, dt.capture(model, values="stats", stats=("mean", "zeros")) as g:
        out = model(x)
    plain = [str(op.target) for op in g.ops]
    assert g.values == "stats" and len(seen) == len(plain)  # the mode outside saw the model's ops, not the reductions
    last = g.stats[g.calls[-1].outputs[0].id]
    assert last.numel == out.numel() and last.min == pytest.approx(out.min().item())
    assert last.norm == pytest.approx(out.double().norm().item()) and last.mean == pytest.approx(out.double().mean().item())
    relu = g.find_ops("aten.relu*")[0]
    assert g.stats[relu.outputs[0].id].min == 0.0 and g.stats[relu.outputs[0].id].zeros > 0
    weight = g.ops[0].inputs[1]  # a parameter: no op made it, its stats are taken where first read
    assert weight.kind == "parameter" and g.stats[weight.id].norm == pytest.approx(model.initial_conv.weight.double().norm().item())
    with dt.capture(model) as plain_g:
        model(x)
    assert plain_g.values == "none" and not plain_g.stats and [op.target for op in plain_g.ops] == plain


def test_an_in_place_write_has_the_stats_of_its_value_after_the_op() -> None:
    x = torch.tensor([-1.0, 2.0])
    with dt.capture(values="stats") as g:
        y = x.clone()
        y.relu_()
        y.mul_(3)
    relu, mul = g.ops[1], g.ops[2]
    assert g.stats[relu.mutated[0].id].min == 0.0 and g.stats[mul.mutated[0].id].max == 6.0
    assert g.stats[relu.inputs[0].id].min == -1.0  # the clone, before relu_ wrote it


def test_text_with_values_and_meta_captures_without_stats() -> None:
    lin = nn.Linear(4, 2)
    with dt.capture(lin, values="stats") as g:
        lin(torch.ones(1, 4))
    text = g.text(stats=True)
    assert text.splitlines()[0] == str(g).splitlines()[0] and "norm" in text.splitlines()[1]
    assert g.text() == str(g)
    meta = nn.Linear(4, 2, device="meta")
    with dt.capture(meta, values="stats") as m:
        meta(torch.ones(1, 4, device="meta"))
    assert len(m.ops) == len(g.ops) and not m.stats and "no stats" in m.text(stats=True)
    with pytest.raises(dt.NoValuesError, match="meta or fake"):
        m.first_nonfinite()
    with pytest.raises(ValueError, match="values='everything' is not one of"):
        dt.capture(lin, values="everything")  # type: ignore[arg-type]


def test_keep_copies_matching_ops_and_calls_detached_on_the_cpu() -> None:
    torch.manual_seed(0)
    model, x = CoolCNN(), torch.randn(1, 3, 32, 32)
    with dt.capture(model, keep=["aten.relu*", "output_layer"]) as g:
        out = model(x)
    relus = g.find_ops("aten.relu*")
    assert len(relus) == 4 and all(not g.value(op).requires_grad for op in relus)
    kept = g.value(g.find_calls("output_layer")[0])
    assert isinstance(kept, torch.Tensor) and torch.equal(kept, out) and kept.data_ptr() != out.data_ptr()
    with pytest.raises(dt.NotKeptError, match="keep='convolution'"):
        g.value(g.ops[0])
    pool = g.find_ops("aten.max_pool2d*")[0]
    with dt.capture(model, keep=lambda x: x is not None and getattr(x, "target", "").startswith("aten.max_pool")) as h:
        model(x)
    values, indices = h.value(h.ops[pool.index])
    assert values.dtype == torch.float32 and indices.dtype == torch.int64


def test_keep_matching_nothing_is_a_note_and_a_budget_refuses_before_copying() -> None:
    model, x = CoolCNN(), torch.randn(1, 3, 32, 32)
    with dt.capture(model, keep="no_such_layer") as g:
        model(x)
    assert not g.kept and any("keep='no_such_layer' matched no op" in n for n in g.notes)
    with pytest.raises(dt.KeepBudgetError, match=r"past keep_bytes=70,000; narrow keep="):
        with dt.capture(model, keep="aten.*", keep_bytes=70_000) as g2:
            model(x)
    assert sum(t.numel() * t.element_size() for t in g2.kept.values()) <= 70_000


def test_uninitialized_memory_has_no_stats() -> None:
    with dt.capture(values="stats") as g:
        e = torch.empty(64)
        f = torch.empty_like(e)
        e.fill_(1.0)
    assert [op.target for op in g.ops] == ["aten.empty.memory_format", "aten.empty_like.default", "aten.fill_.Scalar"]
    assert g.ops[0].outputs[0].id not in g.stats and g.ops[1].outputs[0].id not in g.stats and f.numel() == 64
    assert g.stats[g.ops[2].mutated[0].id].min == 1.0  # written: a value now


def test_what_reads_unwritten_memory_has_no_stats_either() -> None:
    with dt.capture(values="stats") as g:
        e = torch.empty(8)
        view = e[2:4]
        c = torch.empty(2)
        c.copy_(view)
        c.fill_(2.0)
    empty, sliced, _, copied, filled = g.ops
    assert sliced.outputs[0].id not in g.stats and copied.mutated[0].id not in g.stats
    assert g.stats[filled.mutated[0].id].max == 2.0


def test_zeros_count_negative_zero_and_half_precision() -> None:
    x = torch.tensor([0.0, -0.0, 1.0, -2.0, 0.0])
    for dtype in (torch.float32, torch.float64, torch.bfloat16, torch.float16):
        s = stats_of(x.to(dtype), zeros=True)
        assert s is not None and s.zeros == 3, dtype
    relu = torch.relu(torch.randn(10_000, generator=torch.Generator().manual_seed(0)))
    s = stats_of(relu, mean=True, zeros=True)
    assert s is not None and s.zeros == int((relu == 0).sum()) and s.min == 0.0
    assert s.mean == pytest.approx(relu.double().mean().item(), rel=1e-6)  # float32 cascade sums: ~1e-7 relative


def test_a_relus_range_comes_from_its_input_and_equals_a_full_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """``relu`` and ``relu_`` of a finite value whose stats are known take only the norm (``RELU``); the stats are
    those a full pass gives, for inputs all negative, all positive, mixed, and not finite (then taken in full)."""
    cases = [torch.tensor([-3.0, -1.0]), torch.tensor([0.5, 2.0]), torch.tensor([-2.0, 0.0, 5.0, -0.0]),
             torch.tensor([1.0, float("nan"), -float("inf"), 4.0]), torch.tensor([-1.0, float("inf")])]
    for x in cases:
        with dt.capture(values="stats") as g:
            a = x.clone()
            b = torch.relu(a)
            a.relu_()
        relu, relu_ = g.find_ops("aten.relu.default")[0], g.find_ops("aten.relu_.default")[0]
        for ref, value in ((relu.outputs[0], b), (relu_.mutated[0], a)):
            got, full = g.stats[ref.id], stats_of(value)
            assert got == full, (x, got, full)
    with dt.capture(values="stats", stats="zeros") as z:  # with an extra: the full pass, zeros counted
        torch.relu(torch.tensor([-1.0, 2.0]).clone())
    assert z.stats[z.ops[-1].outputs[0].id].zeros == 1
    ranges: list[int] = []
    aminmax = torch.aminmax
    monkeypatch.setattr(torch, "aminmax", lambda *a, **k: ranges.append(1) or aminmax(*a, **k))
    x = torch.tensor([-1.0, 2.0])
    with dt.capture(values="stats") as one:
        torch.relu(x.clone())
    assert len(one.stats) == 3 and len(ranges) == 1  # x, first read (the clone shares its stats): not the ReLU
