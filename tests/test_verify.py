"""verify: capture, replay, compare, and name the first op that differs."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torchvision

import dispatchtrace as dt
from dispatchtrace.verify import VerifyReport


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


def test_random_ops_are_reported_as_the_difference() -> None:
    class Noisy(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.nn.functional.dropout(x.relu(), 0.5, training=True)

    report = dt.verify(Noisy(), torch.randn(64, 64))
    assert not report and report.mismatch is not None
    assert report.mismatch.target.startswith("aten.native_dropout") or report.mismatch.target.startswith("aten.bernoulli")


def test_keyword_tensors_and_tensors_made_in_forward_come_from_the_eager_run() -> None:
    class Scaled(nn.Module):
        def forward(self, x: torch.Tensor, *, scale: torch.Tensor) -> torch.Tensor:
            return x * scale + torch.tensor([1.0, 2.0])

    report = dt.verify(Scaled(), torch.randn(3, 2), scale=torch.tensor(4.0))
    assert report, str(report)
    assert report.constants == 2
    assert "2 constants taken from the eager run" in str(report)


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
    assert report and report.max_diff is None
    assert str(report).endswith("replay ok (shapes and dtypes only)")


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
    assert "parameter Linear.weight (f32[3, 3], not in the model passed to to_fx)" in report.error


def test_verify_needs_a_module() -> None:
    with pytest.raises(TypeError, match="needs an nn.Module"):
        dt.verify(torch.relu, torch.ones(2))  # type: ignore[arg-type]


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


def test_the_verify_command_reports_a_bad_input_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from dispatchtrace.cli import main

    assert main(["verify", "resnet18", "--input", "1x3x64"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dispatchtrace: error: the forward pass of resnet18 on input 1x3x64 raised RuntimeError")


def test_probe_sees_the_ops_the_capture_records() -> None:
    """verify locates a difference by op index, so its probe and the capture must share one dispatch mode."""
    from dispatchtrace.capture import OpMode
    from dispatchtrace.verify import _probe

    model, x = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2)), torch.ones(2, 4, requires_grad=True)
    with dt.capture(model) as g:
        model(x).sum().backward()
    seen: list[tuple[int, str]] = []
    _probe(model, (x,), {}, lambda i, func, a, k, out: seen.append((i, str(func))) or i >= 3)
    assert seen == [(i, op.target) for i, op in enumerate(g.ops[:4])]
    forward, backward = [], []
    with OpMode(lambda func, a, k, out: forward.append(str(func)), backward.append):
        model(x).sum().backward()
    assert forward == [op.target for op in g.ops] and len(backward) == len(g.backward_ops) > 0
