"""The nested tree view: golden text, branch structure, fallback, noise, notebooks."""

from pathlib import Path

import pytest
import torch
import torch.nn as nn
from golden_text import GOLDEN, golden
from models import coolcnn as seed_coolcnn
from vision import AVAILABLE, torchvision

import dispatchtrace as dt
from dispatchtrace.models import CoolCNN
from dispatchtrace.views import Tree
from dispatchtrace.views._tree import TreeNode


def run(model: nn.Module, *inputs: torch.Tensor, train: bool = False) -> dt.Graph:
    model.train(train)
    with torch.set_grad_enabled(train), dt.capture(model) as g:
        model(*inputs)
    return g


def texts(node: TreeNode) -> list[str]:
    return [c.text for c in node.children]


@pytest.fixture(scope="module")
def resnet50() -> dt.Graph:
    """ResNet-50 in train mode without grad on a 64x64 image (overrides the shared eval one at 224: the goldens were drawn from this one)."""
    return run(torchvision.models.resnet50(weights=None), torch.randn(1, 3, 64, 64))


# ---- golden text -------------------------------------------------------------------------------

def test_golden_coolcnn_depth1(cool):
    golden("tree_coolcnn_depth1.txt", str(cool.tree(1)))


def test_golden_coolcnn_depth1_ops(cool):
    golden("tree_coolcnn_depth1_ops.txt", str(cool.tree(1, ops=True)))


def test_golden_resnet18_depth3():
    g = run(torchvision.models.resnet18(weights=None), torch.randn(1, 3, 64, 64))
    golden("tree_resnet18_depth3.txt", str(g.tree(3)))


def test_golden_bottleneck_with_downsample_ops():
    block = torchvision.models.resnet50(weights=None).layer2[0]
    g = run(block, torch.randn(1, 256, 16, 16))
    golden("tree_bottleneck_ops.txt", str(g.tree(ops=True)))


# ---- structure ---------------------------------------------------------------------------------

def test_coolcnn_two_branches_then_merge(cool):
    root = cool.tree(1).root
    assert root.kind == "call" and root.call is cool.calls[0] and root.text == "CoolCNN"
    par, *rest = root.children
    assert par.kind == "parallel" and par.text == "2 parallel branches"
    assert [b.kind for b in par.children] == ["branch", "branch"]
    assert texts(par.children[0]) == ["initial_conv (Conv2d)", "aten::relu", "max_pool#0 (MaxPool2d)"]
    assert texts(par.children[1]) == ["parallel_conv (Conv2d)", "aten::relu", "max_pool#1 (MaxPool2d)"]
    assert [n.text for n in rest] == [
        "aten::add", "aten::div", "secondary_conv (Conv2d)", "aten::relu", "max_pool#2 (MaxPool2d)",
        "aten::view", "fully_connected1 (Linear)", "aten::relu", "output_layer (Linear)",
    ]
    assert rest[0].note == "joins 2 branches" and rest[0].op.short == "aten::add"
    assert all(n.note == "" for n in rest[1:])
    assert par.children[0].children[2].shape == "f32[1, 16, 16, 16]"
    assert root.shape == "f32[1, 10]"


def test_every_resnet50_bottleneck_shows_its_residual_branches(resnet50):
    t = resnet50.tree(3)
    blocks = [n for n in t.walk() if n.kind == "call" and n.call.type == "Bottleneck"]
    assert len(blocks) == 16
    for b in blocks:
        par, add, relu = b.children
        main, side = par.children
        p = b.call.path
        assert texts(main) == [f"{p}.conv1 (Conv2d)", f"{p}.bn1 (BatchNorm2d)", f"{p}.relu#0 (ReLU)",
                               f"{p}.conv2 (Conv2d)", f"{p}.bn2 (BatchNorm2d)", f"{p}.relu#1 (ReLU)",
                               f"{p}.conv3 (Conv2d)", f"{p}.bn3 (BatchNorm2d)"]
        if p.endswith(".0"):  # first block of a stage: the identity path is the downsample
            assert side.kind == "branch" and texts(side) == [f"{p}.downsample (Sequential)"]
        else:
            assert side.kind == "skip"
        assert add.op.short == "aten::add_" and add.note == "joins 2 branches"
        assert relu.text == f"{p}.relu#2 (ReLU)"


def test_densenet_falls_back_to_call_order_with_reads():
    g = run(torchvision.models.densenet121(weights=None), torch.randn(1, 3, 64, 64))
    t = g.tree(3)
    block = next(n for n in t.walk() if n.kind == "call" and n.call.path == "features.denseblock1")
    assert [c.kind for c in block.children] == ["call"] * 6 + ["op"]
    notes = [c.note for c in block.children]
    assert notes[0] == "<- input"
    assert notes[1] == "<- input, denselayer1"
    assert notes[5] == "<- input, denselayer1, denselayer2, denselayer3, denselayer4, denselayer5"
    cat = block.children[6]
    assert cat.text.startswith("aten::cat %cat") and notes[6].endswith("denselayer5, denselayer6")
    # the rest of DenseNet is series-parallel: features is a plain chain
    features = next(n for n in t.walk() if n.kind == "call" and n.call.path == "features")
    assert all(c.kind == "call" and c.note == "" for c in features.children)


class Bridge(nn.Module):
    """a reads x; b reads x and a; c reads a and b: the smallest graph that is not series-parallel."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Bilinear(4, 4, 4)
        self.c = nn.Bilinear(4, 4, 4)

    def forward(self, x):
        a = self.a(x)
        return self.c(a, self.b(x, a))


def test_bridge_lists_reads_instead_of_branches():
    g = run(Bridge(), torch.randn(2, 4))
    assert [(c.text, c.note) for c in g.tree().root.children] == [
        ("a (Linear)", "<- input"), ("b (Bilinear)", "<- input, a"), ("c (Bilinear)", "<- a, b"),
    ]


def test_modules_without_ops_pass_their_input_on():
    model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(), nn.Identity(), nn.ReLU())
    g = run(model, torch.randn(2, 4))
    assert [(c.kind, c.text) for c in g.tree().root.children] == [
        ("call", "0 (Linear)"), ("call", "1 (Dropout)"), ("call", "2 (Identity)"), ("call", "3 (ReLU)"),
    ]


class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.body, self.left, self.right = nn.Linear(4, 4), nn.Linear(4, 2), nn.Linear(4, 3)

    def forward(self, x):
        h = self.body(x)
        return self.left(h), self.right(h)


def test_outputs_that_never_join_end_in_branches():
    root = run(TwoHeads(), torch.randn(1, 4)).tree().root
    assert texts(root) == ["body (Linear)", "2 parallel branches"]
    assert [texts(b) for b in root.children[1].children] == [["left (Linear)"], ["right (Linear)"]]
    assert root.shape == "f32[1, 2], f32[1, 3]"


def test_capture_with_code_outside_the_model_has_a_capture_root():
    model, x = nn.Linear(4, 2), torch.randn(1, 4)
    with torch.no_grad(), dt.capture(model) as g:
        model(x * 2)
    root = g.tree().root
    assert root.text == "<capture>"
    assert [c.text for c in root.children] == ["aten::mul", "Linear"]


# ---- ops, depth, noise -------------------------------------------------------------------------

def test_ops_true_full_depth_shows_every_op_once(resnet50):
    shown = [n.op for n in resnet50.tree(ops=True, noise=True).walk() if n.kind == "op"]
    assert len(shown) == len(set(shown)) == len(resnet50.ops)
    assert [op.index for op in sorted(shown, key=lambda o: o.index)] == list(range(len(resnet50.ops)))


def test_ops_at_depth_limit_are_listed_flat(cool):
    fc1 = next(n for n in cool.tree(1, ops=True).walk() if n.text == "fully_connected1 (Linear)")
    assert [(c.kind, c.text) for c in fc1.children] == [("op", "aten::t"), ("op", "aten::addmm")]


def test_weight_only_ops_sit_before_their_consumer_not_in_a_branch():
    g = run(nn.Linear(4, 2), torch.randn(1, 4))
    assert texts(g.tree(ops=True).root) == ["aten::t", "aten::addmm"]


def test_depth_limits_the_tree(resnet50):
    assert resnet50.tree(0).root.children == ()
    assert all(not c.children for c in resnet50.tree(1).root.children)
    deepest = max(n.call.depth for n in resnet50.tree(2).walk() if n.kind == "call")
    assert deepest == 2
    for bad in (None, -1, "foo", True, 1.5):
        with pytest.raises(ValueError, match="depth must be an int >= 0 .*'auto', 'ops' or 'all'"):
            resnet50.tree(bad)


def test_named_depths_mean_what_they_mean_everywhere(resnet50, cool):
    assert str(resnet50.tree("all")) == str(resnet50.tree())
    assert str(resnet50.tree("ops")) == str(resnet50.tree(ops=True)) == str(resnet50.tree("all", ops=True))
    auto = resnet50.tree("auto")  # the deepest depth within the line budget
    depth = max(n.call.depth for n in auto.walk() if n.kind == "call")
    assert str(auto) == str(resnet50.tree(depth))
    assert len(auto.lines()) <= 150 < len(resnet50.tree(depth + 1).lines())
    assert str(cool.tree("auto")) == str(cool.tree("all"))  # small enough to show whole


def test_autograd_detach_is_hidden_unless_asked(cool):
    torch.manual_seed(0)
    g = run(CoolCNN(), torch.randn(1, 3, 32, 32), train=True)
    assert any(op.short == "aten::detach" for op in g.ops)
    assert str(g.tree(1)) == str(cool.tree(1))
    shown = str(g.tree(1, noise=True))
    assert shown.count("aten::detach") == 4
    with pytest.raises(ValueError, match="noise must be True"):
        g.tree(noise="show")


# ---- display -----------------------------------------------------------------------------------

def test_tree_displays_in_notebooks(cool):
    t = cool.tree(1)
    assert isinstance(t, Tree)
    html = t._repr_html_()
    assert html.startswith("<pre") and "max_pool#2 (MaxPool2d)" in html and "<capture>" not in html

    class P:
        text_ = ""

        def text(self, s):
            self.text_ += s

    p = P()
    t._repr_pretty_(p, False)
    assert p.text_ == str(t)
    assert repr(t).startswith("<dispatchtrace.Tree 'CoolCNN'")
    assert str(t).splitlines() == t.lines()


def test_html_escapes_capture_root():
    model, x = nn.Linear(4, 2), torch.randn(1, 4)
    with torch.no_grad(), dt.capture(model) as g:
        model(x + 1)
    assert "&lt;capture&gt;" in g.tree()._repr_html_()


def test_tree_at_a_call_counts_depth_from_it(resnet50):
    t = resnet50.tree(1, at="layer2.0")
    assert t.root.text == "layer2.0 (Bottleneck)"
    par, add, relu = t.root.children
    assert [c.text for c in par.children[1].children] == ["layer2.0.downsample (Sequential)"]
    assert par.children[1].children[0].children == ()  # depth 1 from the Bottleneck: downsample closed
    assert resnet50.tree(at="layer2.0.relu#2").root.text == "layer2.0.relu#2 (ReLU)"  # as the tree prints it
    with pytest.raises(KeyError, match=r"write 'layer2.0.relu#2', with no space before #"):
        resnet50.tree(at="layer2.0.relu #2")
    assert resnet50.tree(at=resnet50.calls[3]).root.call is resnet50.calls[3]
    with pytest.raises(KeyError, match=r"no module call labelled 'layer9'; labels are dotted paths with #N"):
        resnet50.tree(at="layer9")
    with pytest.raises(KeyError, match=r"called 3 times \(layer2.0.relu#0, layer2.0.relu#1"):
        resnet50.tree(at="layer2.0.relu")


def test_a_model_called_twice_on_the_same_input_gives_two_branches():
    lin, x = nn.Linear(4, 4), torch.randn(1, 4)
    with torch.no_grad(), dt.capture(lin) as g:
        lin(x)
        lin(x)
    root = g.tree().root
    assert root.text == "<capture>" and [c.kind for c in root.children] == ["parallel"]
    assert [texts(b) for b in root.children[0].children] == [["Linear#0"], ["Linear#1"]]


# ---- statements=True ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def seed() -> dt.Graph:
    """The seed's CoolCNN (``dispatchtrace.models``): its forward is user code, so its lines are sources."""
    return seed_coolcnn()


def shown(t: Tree) -> list:
    return [n.call or n.op for n in t.walk() if n.kind in ("call", "op")]


def test_golden_coolcnn_depth1_statements(seed):
    golden("tree_coolcnn_depth1_statements.txt", str(seed.tree(1, statements=True)))


def test_coolcnn_statements_name_branches_and_group_lines(seed):
    root = seed.tree(1, statements=True).root
    par, avg, conv, view, fc1, out = root.children
    main, side = par.children
    assert main.kind == side.kind == "branch"
    assert main.text == "main_path = self.max_pool(torch.relu(self.initial_conv(x)))"
    assert main.where == f"coolcnn.py:{main.source.line}" and main.line.endswith(main.where)
    assert texts(main) == ["initial_conv (Conv2d)", "aten::relu", "max_pool#0 (MaxPool2d)"]
    assert side.text == "parallel_path = self.max_pool(torch.relu(self.parallel_conv(x)))"
    assert (avg.kind, avg.text) == ("statement", "x = (main_path + parallel_path) / 2")
    assert texts(avg) == ["aten::add", "aten::div"] and avg.children[0].note == "joins 2 branches"
    assert conv.text == "x = self.max_pool(torch.relu(self.secondary_conv(x)))" and len(conv.children) == 3
    assert (view.kind, view.text) == ("op", "aten::view")  # a statement of one item stays ungrouped
    assert fc1.text == "x = torch.relu(self.fully_connected1(x))"
    assert texts(fc1) == ["fully_connected1 (Linear)", "aten::relu"]
    assert (out.kind, out.text) == ("call", "output_layer (Linear)")
    # the same calls and ops as the plain tree, in the same order
    for kw in ({}, {"ops": True}, {"depth": 1, "ops": True}):
        assert shown(seed.tree(statements=True, **kw)) == shown(seed.tree(**kw))


def test_statements_on_a_loaded_capture(seed, tmp_path):
    seed.save(tmp_path / "cool.json")
    loaded = dt.load(tmp_path / "cool.json")
    assert str(loaded.tree(1, statements=True)) == str(seed.tree(1, statements=True))
    assert str(loaded.tree(ops=True, statements=True)) == str(seed.tree(ops=True, statements=True))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        h = torch.relu(self.lin(x))
        return h * 2


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b, self.head = Block(), Block(), nn.Linear(4, 2)

    def forward(self, x):
        y = self.a(x) + self.b(x)
        z = torch.sigmoid(self.head(y))
        return z


def test_user_defined_submodules_keep_their_own_lines():
    g = run(Net(), torch.randn(1, 4))
    root = g.tree(statements=True).root
    sum_, z = root.children
    # each Block call knows the line that called it (Call.source), so both join the statement
    assert (sum_.kind, sum_.text) == ("statement", "y = self.a(x) + self.b(x)")
    par, add = sum_.children
    assert par.kind == "parallel" and [b.text for b in par.children] == ["branch 1", "branch 2"]
    assert (add.kind, add.text) == ("op", "aten::add")
    assert (z.kind, z.text) == ("statement", "z = torch.sigmoid(self.head(y))")
    assert texts(z) == ["head (Linear)", "aten::sigmoid"]
    block = par.children[0].children[0]
    assert block.text == "a (Block)"
    h, mul = block.children
    assert (h.text, texts(h), mul.text) == ("h = torch.relu(self.lin(x))", ["a.lin (Linear)", "aten::relu"], "aten::mul")
    assert h.source.function == "Block.forward"
    # a closed call's ops are grouped by line, within one call of the class whose code has it
    flat = next(n for n in g.tree(1, ops=True, statements=True).walk() if n.text == "b (Block)")
    assert [(c.text, texts(c)) for c in flat.children] == [
        ("h = torch.relu(self.lin(x))", ["aten::t", "aten::addmm", "aten::relu"]), ("aten::mul", [])]


class Heads(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b, self.drop1, self.drop2 = nn.Linear(4, 4), nn.Linear(4, 4), nn.Dropout(), nn.Dropout()

    def forward(self, x):
        y = self.a(x) + self.b(x)
        y = self.drop2(self.b(self.drop1(torch.tanh(y))))
        return self.a(y), self.b(y)


def test_whole_parallel_blocks_and_opless_calls_join_their_statement():
    root = run(Heads(), torch.randn(1, 4)).tree(statements=True).root
    sum_, chain, ret = root.children
    assert sum_.text == "y = self.a(x) + self.b(x)"
    assert [c.kind for c in sum_.children] == ["parallel", "op"]
    assert [b.text for b in sum_.children[0].children] == ["branch 1", "branch 2"]  # not named again
    # eval Dropout runs no ops; the line that called it still places it in its statement
    assert chain.text == "y = self.drop2(self.b(self.drop1(torch.tanh(y))))"
    assert texts(chain) == ["aten::tanh", "drop1 (Dropout)", "b#1 (Linear)", "drop2 (Dropout)"]
    assert ret.kind == "statement" and ret.text == "return self.a(y), self.b(y)"
    assert [c.kind for c in ret.children] == ["parallel"]


def test_library_modules_group_nothing():
    # every op of an nn.Sequential / nn.TransformerEncoderLayer points at the one line that called it
    seq, x = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2)), torch.randn(1, 4)
    g = run(seq, x)
    assert str(g.tree(ops=True, statements=True)) == str(g.tree(ops=True))
    layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
    g = run(layer, torch.randn(1, 5, 16), train=True)
    assert str(g.tree(statements=True)) == str(g.tree())


def test_resnet50_bottleneck_lines_hold_one_item_each(resnet50):
    from dispatchtrace.views._statements import Statements

    # torchvision writes one call per line (out = self.conv1(x), out += identity): nothing to group
    assert str(resnet50.tree(statements=True)) == str(resnet50.tree())
    assert str(resnet50.tree(ops=True, statements=True)) == str(resnet50.tree(ops=True))
    lines = Statements()
    block = resnet50.find_calls("layer2.0")[0]
    got = [lines.of(c, block).text for c in block.children]
    assert got == ["out = self.conv1(x)", "out = self.bn1(out)", "out = self.relu(out)",
                   "out = self.conv2(out)", "out = self.bn2(out)", "out = self.relu(out)",
                   "out = self.conv3(out)", "out = self.bn3(out)", "identity = self.downsample(x)",
                   "out += identity", "out = self.relu(out)"]
    assert lines.of(resnet50.find_calls("layer2")[0], resnet50.calls[0]).text == "x = self.layer2(x)"


def test_cli_statements_flag(capsys, tmp_path):
    from dispatchtrace.cli import main

    model = str(Path(__file__).parents[1] / "models.py") + ":CoolCNN"
    out = tmp_path / "tree.txt"
    assert main([model, "--input", "1x3x32x32", "--depth", "1", "--statements", "-o", str(out), "--tree"]) == 0
    printed = capsys.readouterr().out
    assert printed == out.read_text(encoding="utf-8")
    assert printed == (GOLDEN / "tree_coolcnn_depth1_statements.txt").read_text(encoding="utf-8")


# ---- the torchvision zoo (slow) ----------------------------------------------------------------

ZOO = torchvision.models.list_models(module=torchvision.models) if AVAILABLE else []


@pytest.mark.slow
@pytest.mark.parametrize("name", ZOO)
def test_zoo_tree_shows_every_op_exactly_once(name):
    model = dt.models.build(name, device="meta").model  # the builder the CLI uses
    size = 299 if name == "inception_v3" else 224
    x = [torch.empty(1, 3, size, size, device="meta")]
    with torch.no_grad(), dt.capture(model) as g:
        model(*x)
    shown_ops = [n.op for n in g.tree(ops=True, noise=True).walk() if n.kind == "op"]
    assert len(shown_ops) == len(set(shown_ops)) == len(g.ops)
    calls = [n.call for n in g.tree().walk() if n.kind == "call"]
    assert len(calls) == len(set(calls)) == len(g.calls)
    # grouping by statement moves nothing: the same calls and ops in the same order
    assert shown(g.tree(ops=True, statements=True)) == shown(g.tree(ops=True))

