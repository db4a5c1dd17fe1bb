"""``dispatchtrace MODEL --values stats``: the op that first made a NaN, or that all is finite."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dispatchtrace import cli

NAN_NET = """
import torch
import torch.nn as nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return torch.log(self.fc(x) - 100.0)
"""


def test_values_stats_names_the_op_that_made_the_nan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "nannet.py").write_text(NAN_NET)
    assert cli.main([f"{tmp_path / 'nannet.py'}:Net", "--input", "2x4", "--values", "stats", "--depth", "1",
                     "-o", str(tmp_path / "t.json"), "--tree"]) == 0
    out = capsys.readouterr().out
    assert "NaN/Inf first made by %log = aten.log.default in Net" in out and "nannet.py" in out
    assert json.loads((tmp_path / "t.json").read_text())["values"] == "stats"


@pytest.mark.parametrize("extra", [[], ["--train"]])
def test_values_stats_on_a_finite_model_says_so(extra: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["coolcnn", "--values", "stats", "--depth", "1", *extra]) == 0
    assert "no NaN or Inf: every value of the" in capsys.readouterr().out


def test_values_stats_on_meta_is_a_note(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["coolcnn", "--values", "stats", "--device", "meta", "--depth", "1"]) == 0
    captured = capsys.readouterr()
    assert "meta or fake" in captured.err and "NaN" not in captured.out


def test_stats_extras_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--stats mean zeros`` takes them beside the default statistics (saved with -o); without ``--values stats``
    it is a one-line error that says what to add."""
    out = tmp_path / "t.json"
    assert cli.main(["coolcnn", "--values", "stats", "--stats", "mean", "zeros", "-o", str(out)]) == 0
    rows = json.loads(out.read_text())["stats"]
    mean, zeros = 8, 5  # (the row: tensor, numel, nan, posinf, neginf, zeros, min, max, mean, norm)
    assert rows and all(r[mean] is not None and r[zeros] is not None for r in rows if r[1])
    assert cli.main(["coolcnn", "--values", "stats", "-o", str(out)]) == 0
    assert all(r[mean] is None and r[zeros] is None for r in json.loads(out.read_text())["stats"] if r[1])
    capsys.readouterr()
    assert cli.main(["coolcnn", "--stats", "mean"]) == 2
    err = capsys.readouterr().err
    assert "--stats mean adds to the statistics of --values stats: add --values stats" in err and len(err.splitlines()) == 1
