"""``dispatchtrace MODEL --time``: one warm-up forward uncaptured, then a timed capture; the summary shows the times."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import dispatchtrace as dt
from dispatchtrace import cli

WARM_UP = "dispatchtrace: --time: one warm-up forward ran uncaptured first"

COUNTED = """
from pathlib import Path

import torch
import torch.nn as nn

class Counted(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        with open(Path(__file__).with_suffix(".log"), "a") as log:
            log.write(f"forward {torch.is_grad_enabled()}\\n")
        return self.fc(x).relu()
"""


def test_time_prints_the_summary_with_times(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["coolcnn", "--time", "--depth", "1"]) == 0
    captured = capsys.readouterr()
    assert captured.err.count(WARM_UP) == 1 and len(captured.err.strip().splitlines()) == 1
    lines = captured.out.strip().splitlines()
    assert re.search(r"  Time  Own time  Share  Attributes$", lines[0])
    assert re.search(r"^  initial_conv .* (\d+(\.\d+)? (s|ms|µs))\s+\1\s+\d+(\.\d+)?%  k=3 p=1$", lines[2]), lines[2]
    assert re.fullmatch(r"measured time: \d+(\.\d+)? (s|ms|µs)", lines[-1])
    assert "├──" not in captured.out  # the summary instead of the tree (--tree adds it)


def test_time_runs_one_warm_up_forward_uncaptured(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "counted.py").write_text(COUNTED)
    assert cli.main([f"{tmp_path / 'counted.py'}:Counted", "--input", "2x4", "--time", "-o", str(tmp_path / "t.json"),
                     "--tree"]) == 0
    assert (tmp_path / "counted.log").read_text() == "forward False\n" * 2  # the warm-up, then the captured one
    g = dt.load(tmp_path / "t.json")
    assert g.timed and [c.label for c in g.calls] == ["Counted", "fc"]  # the warm-up is not in it
    assert all(op.time is not None for op in g.ops)
    out = capsys.readouterr().out
    assert "Counted" in out and "measured time:" in out
    assert json.loads((tmp_path / "t.json").read_text())["timed"] is True


def test_time_of_a_training_step_splits_the_phases(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["coolcnn", "--time", "--train", "--depth", "0"]) == 0
    out = capsys.readouterr().out
    assert "Fwd time  Bwd time" in out.splitlines()[0]
    assert re.search(r"^measured time: .* \(forward .*, backward .*, optimizer .*\)$", out, re.M)


def test_time_on_meta_is_a_note(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["coolcnn", "--time", "--device", "meta", "--depth", "0"]) == 0
    captured = capsys.readouterr()
    assert "ops ran on meta or fake tensors" in captured.err and "measured time" not in captured.out


def test_metrics_on_the_tree(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--metrics time`` writes each call's time on its line of the tree (and of ``-o tree.txt``); without ``--time``
    it is a one-line error saying what applies; with only a diagram it would change nothing: an error too."""
    assert cli.main(["coolcnn", "--time", "--tree", "--depth", "1", "--metrics", "time", "flops",
                     "-o", str(tmp_path / "t.txt")]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if "initial_conv (Conv2d)" in x)
    assert re.search(r"  Time: \d+(\.\d+)? (s|ms|µs), FLOPs: [\d.]+ [kMG]FLOPs$", line), line
    assert re.search(r"initial_conv \(Conv2d\)  f32\[1, 16, 32, 32\]  Time: .*, FLOPs: ", (tmp_path / "t.txt").read_text())
    assert cli.main(["coolcnn", "--depth", "1", "--metrics", "time"]) == 2
    err = capsys.readouterr().err
    assert "'time' does not apply to this capture" in err and "--time" in err and len(err.splitlines()) == 1
    assert cli.main(["coolcnn", "--estimate", "h100", "--metrics", "est_time", "-o", str(tmp_path / "c.svg")]) == 2
    assert "--metrics would change nothing" in capsys.readouterr().err
