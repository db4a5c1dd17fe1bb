"""Replay: a capture rebuilt as a torch.fx GraphModule of its ATen ops reproduces the forward."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn as nn
from vision import torchvision

import dispatchtrace as dt
from dispatchtrace._structure import tensor_leaves
from dispatchtrace.replay import ReplayError
from dispatchtrace.replay._emit import resolve_target
from dispatchtrace.replay._forward import output_structure


def _aten_targets(gm: torch.fx.GraphModule) -> list[str]:
    return [str(n.target) for n in gm.graph.nodes if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload)]


class Mutating(nn.Module):
    """Views, in-place ops, out= ops, a tensor created in forward, multi-output ops."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        a, b = x.chunk(2)
        c = torch.empty(2, 3)
        torch.add(a, b, out=c)
        c.relu_()
        v = c.view(-1)
        v.mul_(2)
        top, idx = torch.max(x, 1)
        return c + 1, v, top, idx


def test_resnet18_replays_its_outputs_with_the_models_parameters() -> None:
    model = torchvision.models.resnet18(weights=None, num_classes=10).eval()
    x = torch.randn(1, 3, 32, 32)
    with dt.capture(model) as g:
        y = model(x)
    gm = g.to_fx(model)
    assert _aten_targets(gm) == [op.target for op in g.ops]
    assert gm.conv1.weight is model.conv1.weight  # get_attr shares, never copies
    assert gm.meta["dispatchtrace_inputs"] == ["x"]
    out = gm(x)
    assert isinstance(out, torch.Tensor)  # the forward returned a tensor, so does the replay
    torch.testing.assert_close(out, y, rtol=0, atol=0)
    # a new input gives the model's answer for that input, not a recorded one
    x2 = torch.randn(1, 3, 32, 32)
    torch.testing.assert_close(gm(x2), model(x2), rtol=0, atol=0)


def test_views_inplace_and_out_ops_replay_as_they_ran() -> None:
    model = Mutating()
    x = torch.randn(4, 3)
    with dt.capture(model) as g:
        want = model(x)
    assert any(op.mutated for op in g.ops) and any(op.is_view for op in g.ops)
    got = g.to_fx(model)(x)
    assert type(got) is tuple and len(got) == len(want)
    for r, e in zip(got, want, strict=True):
        torch.testing.assert_close(r, e, rtol=0, atol=0)
    # the in-place write through the view reached the tensor returned first: 2 * relu(a + b) + 1
    a, b = x.chunk(2)
    torch.testing.assert_close(got[0], 2 * (a + b).relu() + 1)


def test_inputs_mutated_in_forward_are_mutated_by_the_replay_too() -> None:
    class AddInPlace(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x.add_(1)
            return x * 2

    model, x = AddInPlace(), torch.zeros(3)
    with dt.capture(model) as g:
        model(x)
    assert x.tolist() == [1.0, 1.0, 1.0]
    gm = g.to_fx(model)
    assert gm.meta["dispatchtrace_inputs"] == ["x"]
    fresh = torch.zeros(3)
    out = gm(fresh)
    assert fresh.tolist() == [1.0, 1.0, 1.0]
    assert out.tolist() == [2.0, 2.0, 2.0]


def test_buffers_written_in_forward_are_written_by_the_replay() -> None:
    bn = nn.BatchNorm1d(3)  # training: running stats and num_batches_tracked change in place
    x = torch.randn(8, 3)
    start = copy.deepcopy(bn.state_dict())
    with dt.capture(bn) as g:
        bn(x)
    after = copy.deepcopy(bn.state_dict())
    bn.load_state_dict(start)
    g.to_fx(bn)(x)
    for key, value in after.items():
        torch.testing.assert_close(bn.state_dict()[key], value, rtol=0, atol=0, msg=key)
    assert int(bn.num_batches_tracked) == 1


def test_constants_are_named_and_refused_unless_supplied() -> None:
    class WithConstant(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + torch.tensor([1.0, 2.0, 3.0])

    model, x = WithConstant(), torch.randn(2, 3)
    with dt.capture(model, constants=0) as g:  # values of literals not kept
        y = model(x)
    assert g.constants["_tensor_constant0"].values is None
    with pytest.raises(ReplayError, match=r"constant _tensor_constant0 \(f32\[3\], first read by %lift_fresh = "
                       r"aten\.lift_fresh\.default in WithConstant; no value recorded: recording constants is off"):
        g.to_fx(model)
    given = g.to_fx(model, constants={"_tensor_constant0": torch.tensor([1.0, 2.0, 3.0])})
    torch.testing.assert_close(given(x), y)
    as_inputs = g.to_fx(model, constants="inputs")
    assert as_inputs.meta["dispatchtrace_inputs"] == ["x", "_tensor_constant0"]
    torch.testing.assert_close(as_inputs(x, torch.tensor([1.0, 2.0, 3.0])), y)
    with pytest.raises(ReplayError, match="not in `constants`"):
        g.to_fx(model, constants={})


@pytest.mark.parametrize("limit", [12, 11])
def test_literal_constants_up_to_the_byte_limit_replay_from_the_record(limit: int) -> None:
    class WithConstant(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + torch.tensor([1.0, 2.0, 3.0])  # 12 bytes

    model, x = WithConstant(), torch.randn(2, 3)
    with dt.capture(model, constants=limit) as g:
        model(x)
    literal = g.constants["_tensor_constant0"]
    assert (literal.dtype, literal.shape) == ("float32", (3,))
    if limit == 12:
        assert literal.values == (1.0, 2.0, 3.0)
        x2 = torch.randn(2, 3)
        torch.testing.assert_close(g.to_fx(model)(x2), model(x2))
    else:
        assert literal.values is None and "12 bytes, over the capture limit of 11" in str(literal.why)
        with pytest.raises(ReplayError, match="over the capture limit of 11"):
            g.to_fx(model)


def test_parameters_of_another_model_are_refused_by_name() -> None:
    inner = nn.Linear(3, 2)
    with dt.capture(inner) as g:
        inner(torch.randn(1, 3))
    with pytest.raises(ReplayError, match=r"parameter weight \(f32\[2, 3\], not in the model passed to to_fx\)"):
        g.to_fx(nn.Identity())


class SharedWrite(nn.Module):
    """Two same-shaped chunks of one storage, read after an in-place write to that storage."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x * 1
        a, b = y.chunk(2)
        y.add_(1)
        return a - 2 * b


def test_look_alike_outputs_after_a_shared_write_replay_by_slot() -> None:
    model, x = SharedWrite(), torch.randn(4, 3)
    with dt.capture(model) as g:
        y = model(x)
    assert [op.name for op in g.ops] == ["mul", "split", "add_", "mul_1", "sub"]
    split, mul_1, sub = g.ops[1], g.ops[3], g.ops[4]
    # the refs read after the write are new versions, yet each keeps its position among split's outputs
    b_ref, a_ref = mul_1.inputs[0], sub.inputs[0]
    assert (a_ref.producer, a_ref.slot, b_ref.producer, b_ref.slot) == (split, 0, split, 1)
    assert a_ref not in split.outputs and b_ref not in split.outputs
    gm = g.to_fx(model)
    torch.testing.assert_close(gm(x), y, rtol=0, atol=0)
    # no swap is possible: a - 2*b, not b - 2*a
    a, b = (x + 1).chunk(2)
    torch.testing.assert_close(gm(x), a - 2 * b)
    assert not torch.allclose(gm(x), b - 2 * a)


def test_lstm_and_gru_cells_replay_from_the_record_alone() -> None:
    for rnn in (nn.LSTM(4, 6, num_layers=2), nn.GRU(4, 6, bidirectional=True)):
        x = torch.randn(3, 2, 4)
        with dt.capture(rnn) as g:
            want = rnn(x)
        got = g.to_fx(rnn)(x)
        torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_replay_refuses_a_capture_still_recording() -> None:
    lin = nn.Linear(2, 2)
    with dt.capture(lin) as g:
        lin(torch.ones(1, 2))
        with pytest.raises(ReplayError, match="still recording"):
            g.to_fx(lin)


def test_ops_with_optional_outputs_use_the_leaves_helper() -> None:
    mha = nn.MultiheadAttention(8, 2, batch_first=True).eval()
    x = torch.randn(2, 5, 8)
    with torch.no_grad():
        with dt.capture(mha) as g:
            want, _ = mha(x, x, x, need_weights=False)
        targets = [op.target for op in g.ops]
        assert "aten._native_multi_head_attention.default" in targets  # the fused fast path ran
        gm = g.to_fx(mha)
        assert tensor_leaves in [n.target for n in gm.graph.nodes]
        torch.testing.assert_close(gm(x, x, x), (want, None))  # need_weights: its default is what was passed
        torch.testing.assert_close(gm(x, x, x, need_weights=False), (want, None))
        assert gm.meta["dispatchtrace_inputs"] == ["query", "key", "value", "need_weights"]


def test_resolve_target_says_what_to_import() -> None:
    assert resolve_target("aten.add.Tensor") is torch.ops.aten.add.Tensor
    with pytest.raises(ReplayError, match="import the library"):
        resolve_target("nosuchlib.op.default")


class Detections(nn.Module):
    """Returns nested structure with non-tensor leaves, as detection models do."""

    def forward(self, x: torch.Tensor) -> dict[str, object]:
        double = x * 2
        return {"boxes": [double, None], "n": 3, "pair": (double, x.relu()), "label": "cat"}


def test_the_replay_returns_what_the_forward_returned_in_its_structure() -> None:
    model, x = Detections(), torch.randn(2, 3)
    with dt.capture(model) as g:
        want = model(x)
    structure = output_structure(g)
    assert list(structure) == ["boxes", "n", "pair", "label"] and structure["n"] == 3
    got = g.to_fx(model)(x)
    assert list(got) == ["boxes", "n", "pair", "label"]
    assert type(got["boxes"]) is list and type(got["pair"]) is tuple
    assert got["boxes"][1] is None and got["n"] == 3 and got["label"] == "cat"
    torch.testing.assert_close(got["boxes"], want["boxes"], rtol=0, atol=0)  # (assert_close refuses strings)
    torch.testing.assert_close(got["pair"], want["pair"], rtol=0, atol=0)
    assert got["boxes"][0] is got["pair"][0]  # one tensor returned twice stays one tensor
    assert dt.verify(model, x)


def test_namedtuples_come_back_as_dicts_of_their_fields() -> None:
    from collections import namedtuple

    Out = namedtuple("Out", ["logits", "hidden"])

    class Named(nn.Module):
        def forward(self, x: torch.Tensor) -> Out:
            return Out(x.relu(), [x + 1])

    model, x = Named(), torch.randn(3)
    with dt.capture(model) as g:
        want = model(x)
    got = g.to_fx(model)(x)
    assert list(got) == ["logits", "hidden"]
    torch.testing.assert_close(got, want._asdict(), rtol=0, atol=0)
    assert dt.verify(model, x)


def test_several_top_level_calls_replay_as_the_flat_tuple_of_their_outputs() -> None:
    a, b, x = nn.Linear(3, 3), nn.Linear(3, 2), torch.randn(1, 3)
    owner = nn.ModuleDict({"a": a, "b": b})
    with dt.capture(owner) as g:
        h = a(x)
        y = b(h)
    assert [c.path for c in g.root.children if isinstance(c, dt.Call)] == ["a", "b"]
    got = g.to_fx(owner)(x)
    assert type(got) is tuple and len(got) == 2
    torch.testing.assert_close(got, (h, y))


def test_under_fake_tensor_mode_a_literal_keeps_its_value_and_a_fake_constant_says_it_has_none() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    class Half(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.table = torch.arange(4.0)  # made under the mode: a fake constant, no value

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * torch.tensor(0.5) + self.table  # torch.tensor(0.5) is real Python data even here

    with FakeTensorMode():
        m, x = Half(), torch.randn(4)
        with dt.capture(m) as g:
            m(x)
    g.lint()
    assert g.constants["_tensor_constant0"].values == (0.5,)
    assert g.constants["_tensor_constant1"].why == "fake tensors hold no values"
    with pytest.raises(ReplayError, match=r"constant _tensor_constant1 \(f32\[4\], .*no value recorded: fake tensors hold no values"):
        g.to_fx(m)
