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
