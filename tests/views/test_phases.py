"""Phase views (views/phases.py): forward, backward or both of a training step, in every view and the CLI."""

import json
import re

import pytest
import torch
import torch.nn.functional as F
from models import needs_node_hook
from torch.utils.flop_counter import FlopCounterMode
from vision import torchvision

import dispatchtrace as dt
from dispatchtrace import cli
from dispatchtrace._torch import NO_NODE_CREATION_HOOK, NODE_CREATION_HOOK
from dispatchtrace.graph import PHASE_VIEWS, Call, Op
from dispatchtrace.models import CoolCNN
from dispatchtrace.render._dot import PHASE_FILL
from dispatchtrace.views import costs, phase_graph
from dispatchtrace.views._phases import PhaseGraph, check_phase


def _step(model, x, y, opt):
    F.cross_entropy(model(x), y).backward()
    opt.step()
    opt.zero_grad()


@pytest.fixture(scope="module")
def cool_step():
    torch.manual_seed(0)
    model, x, y = CoolCNN(), torch.randn(2, 3, 32, 32), torch.tensor([1, 2])
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with dt.capture(model) as g:
        _step(model, x, y, opt)
    return g, model


def test_forward_only_capture_is_its_own_view_under_every_phase():
    model, x = CoolCNN(), torch.randn(1, 3, 32, 32)
    with torch.no_grad(), dt.capture(model) as g:
        model(x)
    base = (str(g.tree()), str(g.summary()), g.to_dot().source, str(g.collapse(1)))
    for phase in ("forward", "all"):
        assert phase_graph(g, phase) is g
        assert (str(g.tree(phase=phase)), str(g.summary(phase=phase)), g.to_dot(phase=phase).source,
                str(g.collapse(1, phase=phase))) == base
    with pytest.raises(ValueError, match="no backward phase in this capture"):  # not the forward, quietly
        phase_graph(g, "backward")
    assert set(PHASE_VIEWS) == {"forward", "backward", "all"}
    assert not g.summary().training and "Bwd FLOPs" not in str(g.summary())


def test_bad_phase_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="'forward', 'backward', 'all'"):
        check_phase("both")


def test_forward_view_holds_the_forward_ops_where_they_ran(cool_step):
    g, _ = cool_step
    view = phase_graph(g, "forward")
    assert isinstance(view, PhaseGraph) and view.base is g
    assert [o.name for o in view.ops] == [o.name for o in g.ops if o.phase == "forward"]
    for op in view.ops:
        assert view.original[op.call] is view.source_op[op].call
    assert [c.label for c in view.calls] == [c.label for c in g.calls]


def test_backward_view_puts_each_op_under_its_origin(cool_step):
    g, _ = cool_step
    view = phase_graph(g, "backward")
    wanted = [o for o in g.ops if o.phase in ("backward", "recompute")]
    assert sorted(o.name for o in view.ops) == sorted(o.name for o in wanted)
    assert [o.index for o in view.ops] == list(range(len(view.ops)))  # renumbered in walk order
    assert [o.name for o in view.root.all_ops()] == [o.name for o in view.ops]
    for op in view.ops:
        src = view.source_op[op]
        home = view.original[op.call]
        if src.origin is not None:
            assert home is src.origin
        elif src.param is not None:  # gradient accumulation: with the module owning the parameter
            assert home.path == src.param.rpartition(".")[0]
        else:
            assert home is g.root
    assert any(view.source_op[o].param for o in view.ops)
    # edges are the backward's own data dependencies: every producer is a backward op of the view
    for op in view.ops:
        for p in op.producers:
            assert p in view.source_op and view.source_op[p] in view.source_op[op].producers


def test_all_view_has_every_op_and_a_calls_backward_inside_it(cool_step):
    g, _ = cool_step
    view = phase_graph(g, "all")
    assert sorted(o.name for o in view.ops) == sorted(o.name for o in g.ops)
    conv = next(c for c in view.calls if c.path == "secondary_conv")
    phases = [o.phase for o in conv.ops]
    assert phases[0] == "forward" and "backward" in phases
    assert phases == sorted(phases, key=lambda p: p != "forward")  # forward first, then its backward
    assert "[backward]" in str(g.tree(phase="all", ops=True)) and "[backward]" not in str(g.tree(ops=True))


def test_diagrams_fill_backward_ops(cool_step, tmp_path):
    g, _ = cool_step
    src = g.to_dot("ops", phase="backward").source
    assert PHASE_FILL["backward"] in src and "convolution_backward" in src
    assert PHASE_FILL["backward"] not in g.to_dot("ops").source
    out = g.render(tmp_path / "bw.dot", depth="ops", phase="backward")
    assert out.read_text() == src
    g.render(tmp_path / "bw.txt", phase="backward")
    assert (tmp_path / "bw.txt").read_text() == f"{g.tree('auto', phase='backward')}\n"


def test_html_and_model_explorer_take_the_phase(cool_step, tmp_path):
    g, _ = cool_step
    def data(page: str) -> dict:
        return json.loads(re.search(r'id="dt-data">(.*?)</script>', page, re.S).group(1))

    bw = data(g.render(tmp_path / "bw.html", phase="backward").read_text())
    assert len(bw["o"]) == len(phase_graph(g, "backward").ops) and all(len(row) == len(bw["fields"]["o"]) for row in bw["o"])
    assert len(data(g.render(tmp_path / "fw.html").read_text())["o"]) == len(phase_graph(g, "forward").ops)
    mx = json.loads(g.render(tmp_path / "bw.mx.json", phase="backward").read_text())
    names = {n["label"] for n in mx["graphs"][0]["nodes"]}
    assert "convolution_backward" in names or any("convolution_backward" in n for n in names)


def test_summary_columns_split_forward_backward_and_saved(cool_step):
    g, _ = cool_step
    s = g.summary()
    assert s.training and "Bwd FLOPs" in str(s) and "Saved" in s.markdown()
    c = costs(g)
    mem = g.memory()
    for row, call in zip(s, g.calls, strict=True):
        inside = set(id(x) for x in call.walk())
        inside.add(id(call))
        fwd = [c.op(o).flops for o in call.all_ops() if o.phase == "forward"]
        bwd = [c.op(o).flops for o in g.ops if o.phase == "backward" and o.origin is not None and id(o.origin) in inside]
        fwd, bwd = [f for f in fwd if f], [f for f in bwd if f]
        assert row.forward_flops == (sum(fwd) if fwd else None)
        assert row.backward_flops == (sum(bwd) if bwd else None), row.label
        assert row.saved == mem.call(call).saved
    assert s.total.saved == mem.call(g.root).saved


def test_step_flops_under_all_equal_flop_counter_mode():
    torch.manual_seed(0)
    model, x, y = torchvision.models.resnet18(weights=None), torch.randn(2, 3, 64, 64), torch.tensor([3, 4])
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with dt.capture(model) as g:
        _step(model, x, y, opt)
    with FlopCounterMode(display=False) as counter:
        _step(model, x, y, opt)
    s = g.summary(phase="all")
    assert s.total.flops == counter.get_total_flops()
    assert s.total.forward_flops + s.total.backward_flops == counter.get_total_flops()
    assert g.summary().total.flops == s.total.forward_flops


def test_cli_train_phase_backward_and_summary(capsys, tmp_path):
    assert cli.main(["coolcnn", "--train", "--phase", "backward", "--depth", "1"]) == 0
    out = capsys.readouterr().out
    assert "aten::threshold_backward [backward]" in out and "initial_conv (Conv2d)" in out
    assert cli.main(["coolcnn", "--train", "--summary"]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert "Fwd FLOPs" in head and "Bwd FLOPs" in head and "Saved" in head
    assert cli.main(["coolcnn", "--train", "-o", str(tmp_path / "t.json")]) == 0
    capsys.readouterr()
    assert cli.main(["render", str(tmp_path / "t.json"), "--summary", "--phase", "all"]) == 0
    assert "Bwd FLOPs" in capsys.readouterr().out


@needs_node_hook
def test_recompute_ops_go_under_the_call_they_recompute_and_an_inputs_gradient_to_the_root():
    from torch.utils.checkpoint import checkpoint

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)

        def forward(self, x):
            return self.b(torch.relu(self.a(x)))

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.block, self.head = Block(), torch.nn.Linear(8, 2)

        def forward(self, x):
            return self.head(checkpoint(self.block, x, use_reentrant=False))

    net, x = Net(), torch.randn(4, 8, requires_grad=True)
    with dt.capture(net) as g:
        net(x).sum().backward()
    view = phase_graph(g, "backward")
    recomputed = [o for o in view.ops if o.phase == "recompute"]
    assert recomputed and all(view.original[o.call] is view.source_op[o].origin for o in recomputed)
    assert {view.original[o.call].label for o in recomputed} <= {"block", "block.a", "block.b"}
    grads = {view.source_op[o].param: view.original[o.call] for o in view.ops if view.source_op[o].param}
    assert grads["x"] is g.root and grads["block.a.weight"].path == "block.a"
    assert "[recompute]" in str(g.tree(phase="backward", ops=True))
    assert not any(o.phase == "recompute" for o in phase_graph(g, "forward").ops)


def test_the_all_view_puts_optimizer_ops_under_the_module_they_update_and_names_the_loss_target():
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None)
    x, y = torch.randn(2, 3, 32, 32), torch.tensor([1, 3])
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with dt.capture(model) as g:
        F.cross_entropy(model(x), y).backward()
        opt.step()
    assert [r.name for r in g.inputs] == ["x", "target"]  # the loss's argument, not input_1
    view = phase_graph(g, "all")
    steps = [op for op in view.ops if op.phase == "optimizer"]
    assert len(steps) == len(list(model.parameters()))
    assert not [c for c in view.root.children if isinstance(c, Op) and c.phase == "optimizer"]
    for op in steps:  # in a box named after the parameter, in one named after its module, beside that module's call
        (written,) = op.mutated
        param, module = op.call, op.call.parent
        assert (param.path, param.type, module.type) == (written.name, "parameter", "optimizer")
        owner = written.name.rpartition(".")[0]
        assert module.path == f"optimizer: {owner}" and {param, module} <= view.groups
        assert any(view.original.get(c) is not None and view.original[c].path == owner for c in module.parent.children)
    (backward,) = [c for c in view.root.children if isinstance(c, Call) and c.path == "backward"]
    assert backward in view.groups and [o.short for o in backward.ops][0] == "aten::nll_loss_backward"
    assert not [c for c in view.root.children if isinstance(c, Op) and c.phase != "forward"]
    assert view.calls == [c for c in view.root.walk() if isinstance(c, Call)]
    assert [r.label for r in g.summary(phase="all")] == [c.label for c in g.calls]  # groups are no rows
    tree = str(g.tree(phase="all"))
    lines = [line.split("── ")[-1] for line in tree.splitlines()]
    assert {name for name, _ in model.named_parameters()} == {x.removesuffix(" (parameter)") for x in lines if x.endswith(" (parameter)")}
    if NODE_CREATION_HOOK:  # each backward op sits under the call it differentiates
        # the groups add a line each, and a parallel-branch split (two lines) inside a module's group of two parameters
        assert tree.count("\n") < 157 + len(view.groups) + 3 * sum(len(list(c.children)) == 2 for c in view.groups)
    else:  # no forward call to put a backward op under: the capture says why
        assert NO_NODE_CREATION_HOOK in g.notes
