"""verify: capture, replay, compare, and name the first op that differs."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from vision import needs_torchvision, torchvision

import dispatchtrace as dt
from dispatchtrace.replay._verify import VerifyReport


class Hidden(nn.Module):
    """Writes its input through numpy: no ATen op sees that write, so replay cannot repeat it."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x.detach().numpy()[:] = -1.0
        return x + 1


class Outer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.block = nn.Sequential(nn.ReLU(), Hidden(), nn.ReLU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.block(self.lin(x)) * 2


def test_a_torchvision_model_verifies() -> None:
    model = torchvision.models.mobilenet_v3_small(weights=None, num_classes=10).eval()
    report = dt.verify(model, torch.randn(1, 3, 32, 32))
    assert isinstance(report, VerifyReport) and report
    assert report.ops > 100 and report.calls > 50 and report.outputs == 1
    assert report.max_diff == 0.0 and report.mismatch is None
    assert str(report).startswith(f"MobileNetV3: {report.ops} ops, {report.calls} calls, 1 output: replay ok")


def test_the_first_differing_op_is_named_with_its_call_and_source_line() -> None:
    report = dt.verify(Outer(), torch.randn(2, 4))
    assert not report
    assert report.error is not None and report.error.startswith("output differs: ")
    m = report.mismatch
    assert m is not None
    assert (m.op, m.target, m.call, m.path) == ("add", "aten.add.Tensor", "block.1", "block.1")
    assert m.source is not None and "test_verify.py" in m.source and "return x + 1" in m.source
    text = str(report)
    assert "replay FAILED" in text and "first differing op: %add = aten.add.Tensor in block.1 at " in text
    assert "module path: block.1" in text


_GENERATOR = torch.Generator().manual_seed(0)  # a generator verify cannot find in the model: not reset


class Noise(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.rand(x.shape, generator=_GENERATOR)


class Noisy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.noise = Noise()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.noise(x.relu())


def test_a_random_op_that_cannot_match_is_named_with_its_call() -> None:
    report = dt.verify(Noisy(), torch.randn(3))
    assert not report and report.mismatch is not None, str(report)
    m = report.mismatch
    assert (m.target, m.call, m.path) == ("aten.rand.generator", "noise", "noise")
    assert "a random op" in m.detail
    assert "first differing op: %rand = aten.rand.generator in noise at " in str(report)


def test_random_ops_draw_the_same_numbers_in_every_run_and_the_global_state_is_left_alone() -> None:
    class Random(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = torch.nn.functional.dropout(x, 0.5, training=True)
            return torch.bernoulli(y.sigmoid()) + torch.randn_like(y)

    torch.manual_seed(3)
    x = torch.randn(16, 16)
    state = torch.get_rng_state()
    report = dt.verify(Random(), x)
    assert report and report.max_diff == 0.0, str(report)
    assert torch.equal(torch.get_rng_state(), state)


def test_keyword_tensors_are_inputs_literals_are_recorded_and_attributes_come_from_the_eager_run() -> None:
    class Scaled(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            # a plain tensor attribute over the constants= limit (8 KiB > 4 KiB): a constant with no recorded value
            self.table = torch.arange(2048.0).reshape(1024, 2)

        def forward(self, x: torch.Tensor, *, scale: torch.Tensor) -> torch.Tensor:
            return x * scale + torch.tensor([1.0, 2.0]) + self.table[3]

    report = dt.verify(Scaled(), torch.randn(3, 2), scale=torch.tensor(4.0))
    assert report, str(report)
    assert report.constants == 1
    assert "1 constants taken from the eager run" in str(report)


def test_inputs_mutated_in_forward_are_left_alone() -> None:
    class AddInPlace(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.add_(1) * 2

    x = torch.zeros(3)
    assert dt.verify(AddInPlace(), x)
    assert x.tolist() == [0.0, 0.0, 0.0]


def test_meta_tensors_compare_shapes_only() -> None:
    with torch.device("meta"):
        model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU())
        report = dt.verify(model, torch.empty(1, 3, 8, 8))
    assert report and report.max_diff is None and report.no_values == "meta tensors hold no values"
    assert str(report).endswith("replay ok (shapes, dtypes and strides only: meta tensors hold no values)")


def test_look_alike_reads_after_a_shared_write_verify_without_an_eager_run() -> None:
    class SharedWrite(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = x * 1
            a, b = y.chunk(2)
            y.add_(1)
            return a - 2 * b

    report = dt.verify(SharedWrite(), torch.randn(4, 3))
    assert report and report.max_diff == 0.0, str(report)
    assert str(report) == "SharedWrite: 5 ops, 1 calls, 1 output: replay ok (max abs diff 0)"


class Boxes(nn.Module):
    """A dict of lists with non-tensor leaves; ``hide`` zeroes one nested tensor behind the replay's back."""

    def __init__(self, hide: bool = False) -> None:
        super().__init__()
        self.hide = hide

    def forward(self, x: torch.Tensor) -> dict[str, object]:
        scores = x.sigmoid()
        if self.hide:
            scores.detach().numpy()[:] = 0.0
        return {"boxes": [x * 2, None], "scores": [scores], "n": 3}


def test_nested_outputs_are_compared_leaf_by_leaf() -> None:
    report = dt.verify(Boxes(), torch.randn(2, 4))
    assert report and report.outputs == 2 and report.max_diff == 0.0, str(report)
    bad = dt.verify(Boxes(hide=True), torch.randn(2, 4))
    assert not bad and bad.error is not None
    assert bad.error.startswith("output['scores'][0] differs: "), bad.error


def test_a_capture_that_cannot_be_replayed_says_why() -> None:
    class Unregistered(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.__dict__["hidden"] = nn.Linear(3, 3)  # used in forward, not a submodule

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.hidden(x)

    report = dt.verify(Unregistered(), torch.randn(2, 3))
    assert not report
    assert report.error is not None and report.error.startswith("cannot build the replay: ")
    assert "parameter hidden.weight (f32[3, 3], not in the model passed to to_fx)" in report.error  # named where called


def test_verify_needs_a_module() -> None:
    with pytest.raises(TypeError, match="needs an nn.Module"):
        dt.verify(torch.relu, torch.ones(2))  # type: ignore[arg-type]


@needs_torchvision
def test_the_verify_command_prints_the_report(capsys: pytest.CaptureFixture[str]) -> None:
    from dispatchtrace.cli import main

    assert main(["verify", "resnet18", "--input", "1x3x32x32"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("resnet18: ") and out.rstrip().endswith("1 output: replay ok (max abs diff 0)")


def test_the_verify_command_fails_with_the_first_differing_op(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: ANN001
    from dispatchtrace.cli import main

    source = tmp_path / "hidden.py"
    source.write_text(
        "import torch\n"
        "class Net(torch.nn.Module):\n"
        "    input_shape = (2, 4)\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.lin = torch.nn.Linear(4, 4)\n"
        "    def forward(self, x):\n"
        "        y = self.lin(x)\n"
        "        y.numpy()[:] = 0.0\n"
        "        return y.relu()\n"
    )
    assert main(["verify", f"{source}:Net"]) == 1
    out = capsys.readouterr().out
    assert "replay FAILED" in out
    assert "first differing op: %relu = aten.relu.default in Net at hidden.py:10 in Net.forward: return y.relu()" in out
    assert "module path: (the model)" in out


@needs_torchvision
def test_the_verify_command_reports_a_bad_input_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from dispatchtrace.cli import main

    assert main(["verify", "resnet18", "--input", "1x3x64"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dispatchtrace: error: the forward pass of resnet18 on input 1x3x64 raised RuntimeError")


def test_probe_sees_the_ops_the_capture_records() -> None:
    """verify locates a difference by op index, so its probe and the capture must share one dispatch mode."""
    from dispatchtrace.recording import OpMode
    from dispatchtrace.replay._locate import _probe

    model, x = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2)), torch.ones(2, 4, requires_grad=True)
    with dt.capture(model) as g:
        model(x).sum().backward()
    seen: list[tuple[int, str]] = []
    _probe(model, (x,), {}, lambda i, func, a, k, out: seen.append((i, str(func))) or i >= 3)
    assert seen == [(i, op.target) for i, op in enumerate(g.ops[:4])]
    forward, backward = [], []
    model.zero_grad(set_to_none=True)
    x.grad = None  # as before the capture: accumulation starts with a detach again, not an add_
    with OpMode(lambda func, a, k, out: forward.append(str(func)), lambda func, a, k, out: backward.append(str(func))):
        model(x).sum().backward()
    assert forward + backward == [op.target for op in g.ops] and backward == [op.target for op in g.ops
                                                                               if op.phase == "backward"] != []


# ---- verify touches nothing --------------------------------------------------------------------

def _state(m: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in m.state_dict().items()}


def _same_state(m: nn.Module, before: dict[str, torch.Tensor]) -> None:
    after = m.state_dict()
    assert list(after) == list(before)
    for k, v in before.items():
        assert torch.equal(after[k], v), k


class Settles(nn.Module):
    """Changes itself on every call: a buffer in place, a flag, a list, an attribute it adds; raises when told."""

    def __init__(self, fail: bool = False) -> None:
        super().__init__()
        self.register_buffer("n", torch.zeros(()))
        self.ready = False
        self.seen: list[int] = []
        self.fail = fail

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.n.add_(1)
        self.seen.append(len(self.seen))
        self.cache = x.detach()
        if self.fail:
            raise ValueError("told to fail")
        if not self.ready:
            self.ready = True
            x = x.relu()
        return x * self.n


def test_attributes_buffers_and_lists_are_put_back_after_verify() -> None:
    m = Settles()
    n, seen = m.n, m.seen
    report = dt.verify(m, torch.randn(3))
    assert report, str(report)
    assert m.n is n and float(m.n) == 0.0
    assert m.seen is seen and seen == []
    assert m.ready is False and not hasattr(m, "cache")


def test_the_model_is_put_back_when_the_forward_raises() -> None:
    m = Settles(fail=True)
    with pytest.raises(ValueError, match="told to fail"):
        dt.verify(m, torch.randn(3))
    assert float(m.n) == 0.0 and m.seen == [] and not hasattr(m, "cache")


def test_an_output_that_is_a_buffer_is_compared_as_the_capture_returned_it() -> None:
    class Count(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("n", torch.zeros(2))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.n.add_(x)

    m = Count()
    report = dt.verify(m, torch.ones(2))
    assert report and report.max_diff == 0.0, str(report)
    assert m.n.tolist() == [0.0, 0.0]


def test_autograd_graphs_made_before_verify_still_run_backward() -> None:
    m, x = nn.Sequential(nn.Linear(4, 3), nn.Tanh()), torch.randn(2, 4)
    y = m(x)
    versions = [p._version for p in m.parameters()]
    assert dt.verify(m, x)
    assert [p._version for p in m.parameters()] == versions
    y.sum().backward()  # would raise if verify had written the saved weight in place
    assert m[0].weight.grad is not None


def test_a_lazy_module_must_run_once_first() -> None:
    m = nn.Sequential(nn.LazyLinear(3))
    with pytest.raises(ValueError, match=r"0 \(LazyLinear\).*run the model once first"):
        dt.verify(m, torch.randn(2, 4))
    m(torch.randn(2, 4))
    assert dt.verify(m, torch.randn(2, 4))


_CALLS: list[int] = []  # state outside the model: verify cannot put it back


class Global(nn.Module):
    """Takes a set-up branch on the first call of the process only; ``table`` is a constant of the capture."""

    def __init__(self, constant: bool) -> None:
        super().__init__()
        self.table = torch.arange(2048.0).reshape(2, 1024) if constant else None  # over the constants= limit

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _CALLS.append(1)
        if len(_CALLS) == 1:
            x = x.relu()
        return (x + self.table[0, :3] if self.table is not None else x * 2).neg()


def test_runs_that_differ_in_structure_say_where_they_part() -> None:
    _CALLS.clear()
    report = dt.verify(Global(constant=True), torch.randn(3))
    assert not report and report.error is not None, str(report)
    assert report.error.startswith("the forward does not run the same ops each time"), report.error
    assert "they part at op 0" in report.error
    m = report.mismatch
    assert m is not None and (m.op, m.target, m.call) == ("relu", "aten.relu.default", "Global")
    assert m.detail.startswith("the runs part here: another run issued aten.select.int as op 0 at test_verify.py:")


def test_without_another_run_the_capture_is_compared_with_its_own_output() -> None:
    _CALLS.clear()
    report = dt.verify(Global(constant=False), torch.randn(3))
    assert report and report.max_diff == 0.0, str(report)


def test_multiscale_roialign_fills_its_scales_on_every_run_and_verifies() -> None:
    MultiScaleRoIAlign = torchvision.ops.MultiScaleRoIAlign

    torch.manual_seed(0)
    m = MultiScaleRoIAlign(["feat1", "feat3"], 3, 2)
    feats = {"feat1": torch.rand(1, 5, 64, 64), "feat2": torch.rand(1, 5, 32, 32), "feat3": torch.rand(1, 5, 16, 16)}
    boxes = torch.rand(6, 4) * 256
    boxes[:, 2:] += boxes[:, :2]
    report = dt.verify(m, feats, [boxes], [(512, 512)])
    assert report and report.max_diff == 0.0, str(report)
    assert m.scales is None and m.map_levels is None  # as a fresh module has them


def test_train_mode_resnet18_verifies_and_keeps_its_state_dict() -> None:
    torch.manual_seed(0)
    m = torchvision.models.resnet18(weights=None, num_classes=10).train()
    before = _state(m)
    report = dt.verify(m, torch.randn(2, 3, 32, 32))
    assert report and report.max_diff == 0.0, str(report)
    _same_state(m, before)
    assert int(m.bn1.num_batches_tracked) == 0


@pytest.mark.slow
def test_train_mode_timm_efficientnet_verifies_and_keeps_its_state_dict() -> None:
    timm = pytest.importorskip("timm")
    torch.manual_seed(0)
    m = timm.create_model("efficientnet_b0", pretrained=False, num_classes=10, drop_rate=0.2).train()
    before = _state(m)
    report = dt.verify(m, torch.randn(2, 3, 32, 32))
    assert report and report.max_diff == 0.0, str(report)
    _same_state(m, before)


@pytest.mark.slow
def test_a_fresh_detection_model_verifies_and_keeps_its_state() -> None:
    torch.manual_seed(0)
    m = torchvision.models.detection.fasterrcnn_mobilenet_v3_large_320_fpn(
        weights=None, weights_backbone=None, num_classes=5).eval()
    before = _state(m)
    with torch.no_grad():
        report = dt.verify(m, [torch.rand(3, 320, 320)])
    assert report and report.max_diff == 0.0, str(report)
    _same_state(m, before)
    assert m.roi_heads.box_roi_pool.scales is None


def test_a_tensor_attribute_written_in_place_by_its_first_read_replays_from_its_value_before() -> None:
    class Accumulates(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.kv = (torch.zeros(2),)  # a plain attribute in a tuple: a constant of the capture

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.kv[0].add_(x) * 2

    m = Accumulates()
    report = dt.verify(m, torch.ones(2))
    assert report and report.max_diff == 0.0 and report.constants == 1, str(report)
    assert m.kv[0].tolist() == [0.0, 0.0]
