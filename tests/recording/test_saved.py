"""What autograd saves for backward, per call: recorded through saved-tensor hooks that change nothing."""

from __future__ import annotations

import gc
import json
import sys
from pathlib import Path

import pytest
import torch
import torch.nn as nn
from models import CountOps, needs_node_hook
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils.checkpoint import checkpoint

import dispatchtrace as dt
from dispatchtrace.serialize import FormatError, loads, to_json

pytestmark = needs_node_hook  # g.saved stands on torch.autograd.graph.node_creation_hook (torch 2.14+)
_top_hooks = torch._C._autograd._top_saved_tensors_default_hooks


class Block(nn.Module):
    """In-place ReLU (saves its result), Hardswish in place (saves a clone of its input), sigmoid, mul_."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3, padding=1)
        self.bn = nn.BatchNorm2d(6)
        self.relu = nn.ReLU(inplace=True)
        self.hs = nn.Hardswish(inplace=True)
        self.fc = nn.Linear(6, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.hs(self.relu(self.bn(self.conv(x))) + 1)
        gate = torch.sigmoid(y.mean((2, 3)))
        return self.fc((gate * 2).mul_(gate))


def _storages_saved(fn) -> dict[int, int]:  # type: ignore[no-untyped-def]
    """An independent count: every storage autograd saves while ``fn`` runs, by address, with its size."""
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        st = t.untyped_storage()
        seen.setdefault(st._cdata, st.nbytes())
        return t.detach()

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return seen


def test_each_saved_storage_counts_once_with_parameters_apart() -> None:
    torch.manual_seed(0)
    net, x = Block(), torch.randn(2, 3, 5, 5)
    with dt.capture(net) as g:
        net(x)
    g.lint()
    expected = _storages_saved(lambda: net(x))
    assert len(g.saved) == len(expected) and sum(s.bytes for s in g.saved) == sum(expected.values())
    assert len({s.storage for s in g.saved}) == len(g.saved) and None not in {s.storage for s in g.saved}
    kinds = {}
    for op in g.ops:
        for r in (*op.inputs, *op.outputs):
            kinds.setdefault(r.storage, r.kind)
    params = sum(p.numel() * p.element_size() for p in net.parameters())
    m = g.memory()
    external = sum(s.bytes for s in g.saved if kinds[s.storage] != "activation")
    assert m.call(g.root).saved_external == external and 0 < external <= params + x.numel() * 4
    assert m.call(g.root).saved == sum(s.bytes for s in g.saved) - external
    # own bytes add up to the inclusive ones, per call
    for call in [g.root, *g.calls]:
        subs = [c for c in call.children if isinstance(c, dt.Call)]
        assert m.call(call).saved == m.call(call).self_saved + sum(m.call(c).saved for c in subs)
    by_label = {c.label: m.call(c) for c in g.calls}
    assert by_label["relu"].self_saved == 2 * 6 * 5 * 5 * 4  # its result
    assert by_label["hs"].self_saved == 2 * 6 * 5 * 5 * 4  # the clone of its input
    assert by_label["fc"].self_saved == 2 * 6 * 4 and by_label["fc"].saved_external == 6 * 3 * 4  # its input, weight.t()


def test_capture_changes_neither_the_ops_nor_the_gradients() -> None:
    torch.manual_seed(0)
    net, x = Block(), torch.randn(2, 3, 5, 5)
    state = {k: v.clone() for k, v in net.state_dict().items()}
    net(x).square().sum().backward()
    plain = [p.grad.clone() for p in net.parameters()]
    net.zero_grad()
    net.load_state_dict(state)
    with CountOps() as counted:
        net(x)
    net.load_state_dict(state)
    with dt.capture(net) as g:
        out = net(x)
    out.square().sum().backward()
    assert len(g.ops) == counted.n and len(g.saved) > 0
    for a, p in zip(plain, net.parameters(), strict=True):
        torch.testing.assert_close(p.grad, a, rtol=0, atol=0)


def test_backward_runs_the_same_ops_with_the_hooks_as_without() -> None:
    """With hooks set, autograd detaches each saved tensor it unpacks; without, it hands over the tensor
    itself (inputs, leaves): those detaches are the hooks' own and are not recorded."""
    torch.manual_seed(0)
    net, x = Block(), torch.randn(2, 3, 5, 5, requires_grad=True)
    with CountOps() as counted:
        net(x).square().sum().backward()
    with dt.capture(net) as g:
        net(x).square().sum().backward()
    recorded = len(g.ops) + len(getattr(g, "backward_ops", ()))  # backward ops kept apart, or in g.ops
    assert recorded == counted.n


def test_saved_tensors_stay_no_longer_than_autograd_keeps_them() -> None:
    lin = nn.Linear(4, 4)
    x = torch.randn(2, 4)
    with dt.capture(lin) as g:
        y = torch.sigmoid(lin(x))  # sigmoid saves its output: a hook handing it back would leak it
    assert g.saved
    weak = StorageWeakRef(y.untyped_storage())
    del y
    gc.collect()
    assert weak.expired()
    with dt.capture(lin) as g:
        y = torch.sigmoid(lin(x))
        y.sum().backward()
    weak = StorageWeakRef(y.untyped_storage())
    del y
    assert weak.expired()


def test_an_inplace_change_of_a_saved_tensor_is_still_caught() -> None:
    x = torch.randn(3, requires_grad=True)
    with dt.capture() as g:
        y = torch.sigmoid(x)
        y.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation.*version 1; expected version 0"):
        y.sum().backward()
    assert g.saved
    with pytest.raises(RuntimeError, match="modified by an inplace operation.*version 1; expected version 0"):
        with dt.capture():
            z = torch.sigmoid(x)
            z.add_(1)
            z.sum().backward()


class Boom(nn.Module):
    def __init__(self, error: type[BaseException]) -> None:
        super().__init__()
        self.error = error

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        torch.sigmoid(x)
        raise self.error("stop")


@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
def test_hooks_are_removed_however_the_block_exits(error: type[BaseException]) -> None:
    x = torch.randn(3, requires_grad=True)
    outer = (lambda t: t.detach(), lambda t: t)
    with torch.autograd.graph.saved_tensors_hooks(*outer):
        with pytest.raises(error), dt.capture(Boom(error)) as g:
            Boom(error)(x)
        assert _top_hooks(False) == outer
    assert _top_hooks(False) is None and len(g.saved) == 1 and g.saved[0].call.type == "Boom"
    with dt.capture() as g:
        torch.sigmoid(x)
    assert _top_hooks(False) is None and len(g.saved) == 1


def test_hooks_are_removed_when_entering_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(self: object) -> None:
        raise RuntimeError("no mode")

    monkeypatch.setattr(sys.modules["dispatchtrace.recording._capture"].OpMode, "__enter__", fail)
    with pytest.raises(RuntimeError, match="no mode"), dt.capture():
        pass
    assert _top_hooks(False) is None


def test_enclosing_hooks_and_captures_keep_working() -> None:
    torch.manual_seed(0)
    net, x = Block(), torch.randn(2, 3, 5, 5)
    with dt.capture(net) as outer:
        with dt.capture(net) as inner:
            net(x)
    assert len(inner.saved) == len(outer.saved) > 0
    assert [s.bytes for s in inner.saved] == [s.bytes for s in outer.saved]
    net(x).sum().backward()
    plain = [p.grad.clone() for p in net.parameters()]
    net.zero_grad()
    with torch.autograd.graph.save_on_cpu(), dt.capture(net) as g:  # the user's hooks still get every tensor
        out = net(x)
    out.sum().backward()
    assert g.saved and all(torch.equal(p.grad, a) for a, p in zip(plain, net.parameters(), strict=True))


def test_torch_func_grad_needs_saved_false() -> None:
    f = torch.func.grad(lambda t: t.sin().sum())
    x = torch.randn(3)
    with pytest.raises(RuntimeError, match="saved tensor hooks") as refused, dt.capture():
        f(x)
    assert any("saved=False" in note for note in refused.value.__notes__)  # the error says what to do
    with dt.capture(saved=False) as g:
        f(x)
    assert g.saved == [] and len(g.ops) > 0

    def inside(t: torch.Tensor) -> torch.Tensor:
        with dt.capture() as g:
            out = t.sin().sum()
        captured.append(g)
        return out

    captured: list[dt.Graph] = []
    torch.func.grad(inside)(x)
    assert captured[0].saved == [] and any("saved-tensor hooks are disabled" in n for n in captured[0].notes)


class Checkpointed(nn.Module):
    def __init__(self, reentrant: bool | None) -> None:
        super().__init__()
        self.reentrant = reentrant
        self.block = nn.Sequential(nn.Linear(8, 32), nn.GELU(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.reentrant is None:
            return self.block(x)
        return checkpoint(self.block, x, use_reentrant=self.reentrant)


@pytest.mark.parametrize("reentrant", [False, True])
def test_a_checkpointed_block_saves_only_its_input(reentrant: bool) -> None:
    torch.manual_seed(0)
    x = torch.randn(4, 8, requires_grad=True)
    runs = {}
    for mode in (None, reentrant):
        net = Checkpointed(mode)
        torch.manual_seed(1)
        net.block.load_state_dict(Checkpointed(None).block.state_dict())
        with dt.capture(net) as g:
            out = net(x)
            out.sum().backward()
        m = g.memory()
        block = next(c for c in g.calls if c.path == "block")
        runs[mode] = (m.call(block).saved, m.call(g.root).saved + m.call(g.root).saved_external, g, x.grad.clone())
        x.grad = None
    plain, ckpt = runs[None], runs[reentrant]
    assert plain[0] > 0 and ckpt[0] == 0 and ckpt[1] < plain[1]
    torch.testing.assert_close(ckpt[3], plain[3])
    g = ckpt[2]
    if reentrant:  # CheckpointFunction saves the block's input, in the call that called checkpoint
        (saved,) = g.saved
        assert saved.call is g.calls[0] and saved.bytes == x.numel() * 4


def test_saved_survives_json() -> None:
    torch.manual_seed(0)
    net, x = Block(), torch.randn(2, 3, 5, 5)
    with dt.capture(net) as g:
        net(x)
    data = to_json(g)
    g2 = loads(json.dumps(data))
    assert [(s.storage, s.bytes, s.call.label) for s in g2.saved] == [(s.storage, s.bytes, s.call.label) for s in g.saved]
    m, m2 = g.memory(), g2.memory()
    assert m2.timeline == m.timeline and m2.peak == m.peak and m2.peak_op.name == m.peak_op.name
    assert [m2.call(c) for c in g2.calls] == [m.call(c) for c in g.calls]
    del data["saved"]  # an older file: nothing saved is known
    assert loads(json.dumps(data)).saved == []
    data["saved"] = [[0, -4, 1]]
    with pytest.raises(FormatError, match="saved entry"):
        loads(json.dumps(data))


class _Recorded(CountOps):
    """An empty dispatch mode that keeps each op's name."""

    def __init__(self) -> None:
        super().__init__()
        self.targets: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        self.targets.append(str(func))
        return super().__torch_dispatch__(func, types, args, kwargs)


class Tripled(torch.autograd.Function):
    """Saves its input and its output: only the output is kept detached by autograd."""

    @staticmethod
    def forward(ctx, a: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        out = a * 3
        ctx.save_for_backward(a, out)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        a, out = ctx.saved_tensors
        return grad * out / a


class Saving(nn.Module):
    """A block input made by the op just before a non-reentrant checkpoint, a custom Function, and
    in-place ops on a view (saving their result) and on a whole tensor (saving a clone of its input)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.block = nn.Sequential(nn.Linear(8, 8), nn.Tanh())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(x).exp()
        h = checkpoint(self.block, h, use_reentrant=False)
        h = Tripled.apply(h.sigmoid()) + 1
        h[0].sigmoid_()
        return nn.functional.hardswish(h * 2, inplace=True).sum(1)


def test_the_ops_are_those_of_a_plain_run_whatever_saves_the_tensor() -> None:
    torch.manual_seed(0)
    net, x = Saving(), torch.randn(3, 8)
    with _Recorded() as plain:
        net(x).sum().backward()
    grads = [p.grad.clone() for p in net.parameters()]
    net.zero_grad(set_to_none=True)
    with dt.capture(net, saved=False) as unhooked:
        net(x).sum().backward()
    net.zero_grad(set_to_none=True)
    with dt.capture(net) as g:
        net(x).sum().backward()
    assert [op.target for op in g.ops] == [op.target for op in unhooked.ops] == plain.targets
    assert plain.targets.count("aten.detach.default") > 0 and len(g.saved) > 0
    for a, p in zip(grads, net.parameters(), strict=True):
        torch.testing.assert_close(p.grad, a, rtol=0, atol=0)
    with dt.capture(net):  # no saved output outlives what autograd keeps
        out = net(x)
    weak = StorageWeakRef(out.untyped_storage())
    del out
    gc.collect()
    assert weak.expired()


class InnerStep(nn.Module):
    """MAML's inner loop: a gradient step taken inside forward with ``autograd.grad(create_graph=True)``,
    the fast weights then used for the query forward."""

    def __init__(self) -> None:
        super().__init__()
        self.w1 = nn.Parameter(torch.randn(4, 8) * 0.1)
        self.b1 = nn.Parameter(torch.zeros(8))
        self.w2 = nn.Parameter(torch.randn(8, 2) * 0.1)
        self.b2 = nn.Parameter(torch.zeros(2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        params = [self.w1, self.b1, self.w2, self.b2]
        support = torch.relu(x @ self.w1 + self.b1) @ self.w2 + self.b2
        grads = torch.autograd.grad((support ** 2).mean(), params, create_graph=True)
        w1, b1, w2, b2 = (p - 0.01 * g for p, g in zip(params, grads, strict=True))
        return torch.relu(x @ w1 + b1) @ w2 + b2


class _Unpacked(_Recorded):
    """Also notes, for each ``aten.detach`` run in backward, whether its argument requires grad."""

    def __init__(self) -> None:
        super().__init__()
        self.backward_detaches: list[tuple[int, bool]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        if func is torch.ops.aten.detach.default and torch._C._current_graph_task_id() != -1:
            self.backward_detaches.append((len(self.targets), args[0].requires_grad))
        return super().__torch_dispatch__(func, types, args, kwargs)


def test_an_inner_gradient_step_records_the_ops_an_empty_mode_sees_alone() -> None:
    """The capture's op sequence is an empty mode's on the same block when that mode runs alone."""
    torch.manual_seed(0)
    net, x = InnerStep(), torch.randn(5, 4)
    with _Recorded() as alone:
        want = net(x)
    with dt.capture(net) as g:
        got = net(x)
    assert [op.target for op in g.ops] == alone.targets
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    assert any(op.phase == "backward" for op in g.ops)  # autograd.grad ran inside forward, and was recorded


@pytest.mark.parametrize("nesting", ["mode inside the capture", "capture inside the mode"])
def test_an_empty_mode_beside_a_capture_sees_the_detaches_of_its_hooks_and_only_those(nesting: str) -> None:
    """While the capture's saved-tensor hooks are set, autograd runs one ``aten.detach`` on each saved
    tensor that requires grad the unpack hook hands back as packed (a node's inputs: pow's input, mm's
    operands, a parameter); without hooks it uses the saved tensor as it is. Those are the capture's own
    ops (docs/semantics.md, "Comparing with another dispatch mode"): an empty mode nested with the
    capture sees them, the capture does not record them; every other op is the same, in the same order."""
    torch.manual_seed(0)
    net, x = InnerStep(), torch.randn(5, 4)
    with _Recorded() as alone:
        net(x)
    beside = _Unpacked()
    if nesting == "mode inside the capture":
        with dt.capture(net) as g, beside:
            net(x)
    else:
        with beside, dt.capture(net) as g:
            net(x)
    ours = [i for i, grad in beside.backward_detaches if grad]
    assert ours and len(beside.targets) == len(g.ops) + len(ours)
    assert [t for i, t in enumerate(beside.targets) if i not in set(ours)] == [op.target for op in g.ops] == alone.targets
    with _Unpacked() as plain:  # no hooks: autograd detaches no saved tensor that requires grad in backward
        net(x)
    assert not [i for i, grad in plain.backward_detaches if grad]
    doc = (Path(__file__).resolve().parents[2] / "docs" / "semantics.md").read_text()
    assert "## Comparing with another dispatch mode" in doc
