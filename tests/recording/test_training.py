"""Training steps: every op of the block in g.ops with its phase, attributed to the forward call, op or parameter."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from models import needs_node_hook
from torch.nn.modules import module as module_hooks
from torch.optim import optimizer as optim_hooks
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.checkpoint import checkpoint

import dispatchtrace as dt
from dispatchtrace._torch import NO_NODE_CREATION_HOOK, NODE_CREATION_HOOK, running_node
from dispatchtrace.graph import Call, Graph, Op


def _mlp() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))


def _step(model: nn.Module, *inputs: torch.Tensor, opt: torch.optim.Optimizer | None = None) -> Graph:
    with dt.capture(model) as g:
        model(*inputs).sum().backward()
        if opt is not None:
            opt.step()
            opt.zero_grad()
    g.lint()
    return g


def _backward(g: Graph) -> list[Op]:
    return [op for op in g.ops if op.phase == "backward"]


# ---- the private call, in its one place ---------------------------------------------------------

def test_running_node_is_the_node_whose_backward_dispatched_the_op() -> None:
    seen: list[tuple[str, str | None]] = []

    class Look(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN202
            node = running_node()
            seen.append((str(func), None if node is None else type(node).__name__))
            return func(*args, **(kwargs or {}))

    w = torch.ones(3, requires_grad=True)
    with Look():
        (w.exp() * 2).sum().backward()
    assert running_node() is None
    assert [n for f, n in seen if f == "aten.exp.default"] == [None]  # forward: no node runs
    assert ("aten.mul.Tensor", "ExpBackward0") in seen  # exp's backward multiplies by its saved result
    assert [n for f, n in seen if f == "aten.detach.default"][-1] == "AccumulateGrad"


# ---- phases, attribution, edges ---------------------------------------------------------------------

@needs_node_hook
def test_every_op_is_in_g_ops_in_order_with_its_phase_and_attribution() -> None:
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    g = _step(model, torch.randn(2, 3), opt=opt)
    phases = [op.phase for op in g.ops]
    assert phases.index("backward") < phases.index("optimizer") and "recompute" not in phases
    assert phases[phases.index("backward"):].count("forward") <= 4  # the profiler's record_function markers only
    relu, lin0, lin2 = g.calls[2], g.calls[1], g.calls[3]
    threshold = g.op("threshold_backward")
    assert threshold.origin is relu and threshold.grad_of is g.op("relu") and threshold.call is g.root
    assert {op.origin for op in _backward(g) if op.target == "aten.mm.default"} == {lin0, lin2}
    assert {op.param for op in _backward(g) if op.param} == {"0.weight", "0.bias", "2.weight", "2.bias"}
    assert all(op.origin is None and op.grad_of is None for op in _backward(g) if op.param)
    assert all(op.origin is None and op.grad_of is None and op.param is None for op in g.ops if op.phase != "backward")
    assert [c.label for c in g.calls] == ["Sequential", "0", "1", "2"]  # backward made no call
    assert g.notes == []  # a note says what is missing or what to do: an optimizer step is neither


@needs_node_hook
def test_backward_ops_read_saved_activations_and_gradients_flow_op_to_op() -> None:
    g = _step(_mlp(), torch.randn(2, 3))
    relu = g.op("relu")
    threshold = g.op("threshold_backward")
    grad, saved = threshold.inputs[0], threshold.inputs[1]
    # the saved result: autograd's detach of relu's output, unpacked (another detach) in backward
    assert saved.storage == relu.outputs[0].storage and saved.version == relu.outputs[0].version
    chain, at = [], saved.producer
    while at is not None and at is not relu:
        assert at.is_view and at.target == "aten.detach.default"
        chain.append(at.phase)
        at = at.inputs[0].producer
    assert at is relu and chain == ["backward", "forward"]
    assert grad.producer is not None and grad.producer.phase == "backward"  # the mm that computed d(relu out)
    assert grad.producer.target == "aten.mm.default" and grad.producer.origin is g.calls[3]
    # the weight gradient of the first Linear reads threshold_backward's output
    assert {u.origin for u in threshold.users} == {g.calls[1]}  # the first Linear's t, mm, sum


@needs_node_hook
def test_str_names_the_phase_and_what_a_backward_op_belongs_to() -> None:
    g = _step(_mlp(), torch.randn(2, 3))
    text = str(g)
    assert "threshold_backward" in text and "# <capture> [backward of 1]" in text
    assert "# <capture> [backward of 0.weight]" in text
    assert str(g.ops[0]).endswith("# 0")


def test_optimizer_state_from_before_the_block_is_named_after_its_parameter() -> None:
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    _step(model, torch.randn(2, 3), opt=opt)  # the momentum buffers exist now
    g = _step(model, torch.randn(2, 3), opt=opt)
    names = {r.name for op in g.ops if op.phase == "optimizer" for r in op.inputs}
    assert {"0.weight", "0.weight.momentum_buffer", "2.bias.momentum_buffer"} <= names
    assert [r.name for r in g.inputs] == ["input"]  # state read by the step is no input of the forward
    assert {r.kind for op in g.ops if op.phase == "optimizer" for r in op.inputs if r.name and ".momentum" in r.name} == {"constant"}


@pytest.mark.parametrize("make", [
    lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, foreach=False),
    lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, foreach=True),
    lambda ps: torch.optim.Adam(ps, lr=0.1, foreach=True),
    lambda ps: torch.optim.AdamW(ps, lr=0.1, foreach=True),
    lambda ps: torch.optim.AdamW(ps, lr=0.1, fused=True),
], ids=["sgd-momentum", "sgd-foreach", "adam-foreach", "adamw-foreach", "adamw-fused"])
def test_optimizer_ops_name_the_parameters_they_update(make) -> None:  # noqa: ANN001
    model = _mlp()
    opt = make(model.parameters())
    g = _step(model, torch.randn(2, 3), opt=opt)
    step = [op for op in g.ops if op.phase == "optimizer"]
    assert step and all(op.call is g.root for op in step)
    written = {r.name for op in step for r in op.mutated if r.kind == "parameter"}
    assert written == {"0.weight", "0.bias", "2.weight", "2.bias"}
    grads = {r.producer.param for op in step for r in op.inputs if r.producer is not None and r.producer.param}
    assert grads == written  # the step reads the gradients the backward accumulated, by edge
    if "foreach" in opt.defaults and opt.defaults["foreach"]:
        lists = [op for op in step if op.target.startswith("aten._foreach_")]
        assert any([a.name for a in op.args[0]] == ["0.weight", "0.bias", "2.weight", "2.bias"]
                   for op in lists if isinstance(op.args[0], list))
    after = model(torch.randn(2, 3))  # the model still trains normally after the capture
    assert after.shape == (2, 2)


# ---- hooks are removed on every exit path ---------------------------------------------------------

def _no_hooks_left() -> bool:
    w = torch.ones(2, requires_grad=True)
    y = w * 2
    return (not optim_hooks._global_optimizer_pre_hooks and not optim_hooks._global_optimizer_post_hooks
            and not module_hooks._global_forward_pre_hooks and not module_hooks._global_forward_hooks
            and not any(str(k).startswith("dispatchtrace") for k in y.grad_fn.metadata))


@pytest.mark.parametrize("error", [ValueError, KeyboardInterrupt])
def test_hooks_are_removed_however_the_block_exits(error: type[BaseException]) -> None:
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    assert _no_hooks_left()
    with pytest.raises(error), dt.capture(model) as g:
        model(torch.randn(2, 3)).sum().backward()
        opt.step()
        raise error("stop")
    assert _no_hooks_left() and g.complete and isinstance(g.error, error)
    g.lint()
    with dt.capture(model) as g2:
        model(torch.randn(2, 3)).sum().backward()
    assert _no_hooks_left() and _backward(g2)


@needs_node_hook
def test_an_optimizer_step_outside_the_block_records_nothing() -> None:
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with dt.capture(model) as g:
        model(torch.randn(2, 3)).sum().backward()
    n, notes = len(g.ops), list(g.notes)
    opt.step()
    assert g.ops[-1].phase == "backward" and len(g.ops) == n and g.notes == notes
    assert not any("optimizer" in note for note in notes)


def test_a_training_step_keeps_its_phases_on_every_torch_and_says_what_it_could_not_attribute() -> None:
    """On a torch without the node creation hook (before 2.14) the step is captured with its phases and
    the ``AccumulateGrad`` parameters; its backward ops carry no forward call, and one note says why."""
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with dt.capture(model) as g:
        model(torch.randn(2, 3)).sum().backward()
        opt.step()
    phases = [op.phase for op in g.ops]
    assert phases.index("backward") > phases.index("forward") and phases.index("optimizer") > phases.index("backward")
    assert sorted({op.param for op in g.ops if op.param}) == ["0.bias", "0.weight", "2.bias", "2.weight"]
    backward = [op for op in g.ops if op.phase == "backward" and op.param is None]
    missing = [n for n in g.notes if "node_creation_hook" in n]
    if NODE_CREATION_HOOK:
        assert any(op.origin is not None for op in backward) and missing == [] and g.saved
    else:
        assert all(op.origin is None and op.grad_of is None for op in backward) and not g.saved
        assert missing == [NO_NODE_CREATION_HOOK] and "\n" not in missing[0]


# ---- checkpointing ---------------------------------------------------------------------------------

class Checkpointed(nn.Module):
    def __init__(self, reentrant: bool) -> None:
        super().__init__()
        self.block = nn.Sequential(nn.Linear(3, 3), nn.Tanh(), nn.Linear(3, 3))
        self.head = nn.Linear(3, 1)
        self.reentrant = reentrant

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(checkpoint(self.block, x, use_reentrant=self.reentrant))


@pytest.mark.parametrize("reentrant", [False, True], ids=["non-reentrant", "reentrant"])
@needs_node_hook
def test_checkpoint_recomputation_is_attributed_to_the_calls_it_recomputes(reentrant: bool) -> None:
    model = Checkpointed(reentrant)
    g = _step(model, torch.randn(2, 3, requires_grad=True))
    assert [c.label for c in g.calls] == ["Checkpointed", "block", "block.0", "block.1", "block.2", "head"]  # no new calls
    recomputed = [op for op in g.ops if op.phase == "recompute"]
    by_call = {c.label: c for c in g.calls}
    assert {op.origin.label for op in recomputed if op.origin is not None and op.target == "aten.tanh.default"} == {"block.1"}
    assert [op.target for op in recomputed if op.origin is by_call["block.0"]][-1] == "aten.addmm.default"
    assert all(op.call is g.root for op in recomputed)
    tanh_bw = g.op("tanh_backward")
    assert tanh_bw.phase == "backward" and tanh_bw.origin is by_call["block.1"]
    # the recomputed tanh output is what tanh_backward reads (the forward's was not kept)
    at = tanh_bw.inputs[1].producer
    while at is not None and at.is_view:
        at = at.inputs[0].producer
    assert at is not None and at.target == "aten.tanh.default" and at.phase == "recompute"


# ---- autograd.grad, retain_graph, double backward, hooks, autocast --------------------------------

@needs_node_hook
def test_autograd_grad_at_the_top_level_is_backward_and_accumulates_nothing() -> None:
    model = _mlp()
    x = torch.randn(2, 3, requires_grad=True)
    with dt.capture(model) as g:
        (gx,) = torch.autograd.grad(model(x).sum(), x)
    g.lint()
    bw = _backward(g)
    assert bw and not any(op.param for op in bw) and model[0].weight.grad is None
    assert gx.shape == x.shape and {op.origin.label for op in bw if op.origin is not None} == {"0", "1", "2"}


@needs_node_hook
def test_retain_graph_backward_twice_records_both_in_order() -> None:
    model = _mlp()
    with dt.capture(model) as g:
        loss = model(torch.randn(2, 3)).sum()
        loss.backward(retain_graph=True)
        loss.backward()
    g.lint()
    thresholds = [op for op in g.ops if op.target == "aten.threshold_backward.default"]
    assert len(thresholds) == 2 and all(op.grad_of is g.op("relu") for op in thresholds)
    accumulate = [op for op in _backward(g) if op.param == "0.weight"]
    assert [op.target for op in accumulate] == ["aten.detach.default", "aten.add_.Tensor"]  # then accumulates


@needs_node_hook
def test_double_backward_attributes_the_second_order_ops_to_the_forward_call() -> None:
    lin = nn.Linear(3, 1)
    x = torch.randn(4, 3, requires_grad=True)
    with dt.capture(lin) as g:
        (gx,) = torch.autograd.grad(torch.tanh(lin(x)).sum(), x, create_graph=True)
        gx.pow(2).sum().backward()
    g.lint()
    bw = _backward(g)
    # tanh's node runs in both backwards (its saved result depends on the input through it)
    tanh = [op for op in bw if op.target == "aten.tanh_backward.default" and op.grad_of is g.op("tanh")]
    assert len(tanh) == 2 and all(op.origin is None for op in tanh)  # torch.tanh ran outside any module call
    second = [op for op in bw if op.grad_of is not None and op.grad_of.phase == "backward"]
    assert second, "the second backward runs nodes the first one built"
    assert {op.param for op in bw if op.param} == {"weight", "bias", "input"}  # x is named by Linear.forward


def test_tensor_hooks_run_in_backward_and_their_ops_are_recorded() -> None:
    model = _mlp()
    x = torch.randn(2, 3, requires_grad=True)
    with dt.capture(model) as g:
        h = model[0](x)
        h.register_hook(lambda grad: grad * 3)
        model[2](model[1](h)).sum().backward()
    g.lint()
    scaled = [op for op in _backward(g) if op.target == "aten.mul.Tensor" and 3 in op.args]
    assert len(scaled) == 1 and scaled[0].call is g.root


def test_cpu_autocast_bfloat16_step() -> None:
    model = _mlp()
    with dt.capture(model) as g, torch.autocast("cpu", dtype=torch.bfloat16):
        model(torch.randn(2, 3)).float().sum().backward()
    g.lint()
    assert any(op.target == "aten._to_copy.default" and op.outputs[0].dtype == "bfloat16" for op in g.ops)
    mms = [op for op in _backward(g) if op.target == "aten.mm.default"]
    assert mms and {op.outputs[0].dtype for op in mms} == {"bfloat16"} and model[0].weight.grad.dtype == torch.float32


# ---- autograd inside forward: part of what the forward computes, replayed ---------------------------

class InnerStep(nn.Module):
    """A MAML-style inner step: the forward differentiates its own loss and steps the weight."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        loss = (self.lin(x) ** 2).mean()
        (grad,) = torch.autograd.grad(loss, self.lin.weight, create_graph=True)
        return x @ (self.lin.weight - 0.1 * grad).t()


@needs_node_hook
def test_autograd_inside_forward_is_recorded_inside_the_call_and_replays_on_a_new_input() -> None:
    torch.manual_seed(0)
    model, x = InnerStep(), torch.randn(4, 3)
    with dt.capture(model) as g:
        model(x)
    g.lint()
    top = g.calls[0]
    inner = [op for op in g.ops if op.phase == "backward"]
    assert inner and all(op.call is top for op in inner)  # a record of time: they ran inside the forward
    assert {op.origin.label for op in inner if op.origin is not None} == {"InnerStep", "lin"}
    gm = g.to_fx(model)
    other = torch.randn(4, 3) * 5
    assert torch.allclose(gm(other), model(other)) and not torch.allclose(gm(other), gm(x))
    assert torch.allclose(gm(x), model(x))


def test_replay_of_a_training_step_is_the_forward_only() -> None:
    model, x = _mlp(), torch.randn(2, 3)
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    with dt.capture(model) as g:
        y = model(x)
        y.sum().backward()
        opt.step()
    gm = g.to_fx(model)
    replayed = {n.meta["dispatchtrace_op"] for n in gm.graph.nodes if "dispatchtrace_op" in n.meta}
    assert all(g.ops[i].phase == "forward" for i in replayed) and len(replayed) < len(g.ops)
    x = torch.randn(5, 3)
    assert torch.allclose(gm(x), model(x))


def test_replay_refuses_a_forward_op_that_reads_a_gradient() -> None:
    model, x = _mlp(), torch.randn(2, 3)
    with dt.capture(model) as g:
        model(x).sum().backward()
        model(model[0].weight.grad.sum(0, keepdim=True).expand(2, 3))  # a second forward reads a gradient
    with pytest.raises(dt.ReplayError, match=r"reads f32\[2, 3\] %expand_1, which replay leaves out \(it reads what a "
                                             r"backward op at the top level of the block produced\)"):
        g.to_fx(model)


# ---- attribution where ModTracker and FlopCounterMode get it wrong --------------------------------

class PositionNet(nn.Module):
    """``self.pos(torch.arange(T))``: a submodule whose input does not require grad."""

    def __init__(self, T: int = 4, d: int = 8) -> None:
        super().__init__()
        self.proj = nn.Linear(3, d)
        self.pos = nn.Embedding(T, d)
        self.head = nn.Linear(d, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.proj(x) + self.pos(torch.arange(x.shape[1])))


def _flops_by_module(g: Graph) -> dict[str, int]:
    """Forward ops by the call that ran them, backward ops by the call they differentiate, per path."""
    c = g.costs()
    out: dict[str, int] = {}
    for op in g.ops:
        owner: Call | None = op.call if op.phase == "forward" else op.origin
        flops = c.op(op).flops or 0
        while owner is not None and owner.parent is not None:
            out[owner.path] = out.get(owner.path, 0) + flops
            owner = owner.parent
    return out


@needs_node_hook
def test_backward_of_a_module_whose_input_needs_no_grad_is_not_misattributed() -> None:
    from torch.distributed._tools.mod_tracker import ModTracker
    from torch.utils.flop_counter import FlopCounterMode

    torch.manual_seed(0)
    net, x = PositionNet(), torch.randn(2, 4, 3)
    with FlopCounterMode(display=False) as counter:
        net(x).sum().backward()
    theirs = {k: sum(v.values()) for k, v in counter.get_flop_counts().items()}
    net.zero_grad()
    g = _step(net, x)
    ours = _flops_by_module(g)
    assert theirs["PositionNet.pos"] > 0 and ours.get("pos", 0) == 0  # an embedding costs no FLOPs, its backward none
    assert theirs["PositionNet.pos"] == ours["proj"] - theirs["PositionNet.proj"] // 2  # proj's backward mm, counted twice
    assert ours["proj"] == theirs["PositionNet.proj"] and ours["head"] == theirs["PositionNet.head"]
    assert ours[""] == theirs["PositionNet"] == theirs["Global"]

    rows: list[tuple[str, set[str]]] = []

    class Look(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN202
            if tracker.is_bw:
                rows.append((str(func), set(tracker.parents)))
            return func(*args, **(kwargs or {}))

    net.zero_grad()
    tracker = ModTracker()
    with tracker, Look():
        net(x).sum().backward()
    proj_mm = [parents for func, parents in rows if func == "aten.mm.default" and "PositionNet.proj" in parents]
    assert proj_mm and all("PositionNet.pos" in parents for parents in proj_mm)  # ModTracker: pos still active
    ours_mm = [op for op in _backward(g) if op.target == "aten.mm.default" and op.origin is not None]
    assert {op.origin.path for op in ours_mm} == {"proj", "head"}


# ---- the forward-only views still work with backward ops present ------------------------------------

def test_views_and_files_work_on_a_training_step(tmp_path) -> None:  # noqa: ANN001
    model = _mlp()
    opt = torch.optim.AdamW(model.parameters(), lr=0.1, foreach=True)
    g = _step(model, torch.randn(2, 3), opt=opt)
    assert "Sequential" in str(g.tree()) and str(g.tree(ops=True))
    assert g.collapse(1) is not None and [r.label for r in g.summary()] == ["Sequential", "0", "1", "2"]
    for name in ("a.txt", "a.dot", "a.json", "a.html", "a.mx.json"):
        g.render(tmp_path / name)
    loaded = dt.load(tmp_path / "a.json")
    assert str(loaded) == str(g) and [op.phase for op in loaded.ops] == [op.phase for op in g.ops]


def test_verify_checks_the_forward_of_a_capture_whose_block_also_trained() -> None:
    from torch.utils.checkpoint import checkpoint as ckpt

    from dispatchtrace.replay._verify import check

    class Scaled(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(3, 3)
            self.scale = torch.tensor([2.0, 3.0, 4.0])  # a tensor attribute: a constant verify takes from a run

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return ckpt(self.lin, x * self.scale, use_reentrant=False)

    model, x = Scaled(), torch.randn(2, 3, requires_grad=True)
    with dt.capture(model) as g:
        out = model(x)
        out.sum().backward()
    assert any(op.phase == "recompute" for op in g.ops)
    report = check(g, model, out, (x,))
    assert report, str(report)
