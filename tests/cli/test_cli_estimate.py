"""``dispatchtrace MODEL --estimate SPEC``: the estimate printed after the tree; a missing or unknown spec is one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import dispatchtrace as dt
from dispatchtrace import cli


def test_estimate_prints_the_calls_by_time(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["coolcnn", "--estimate", "h100", "--depth", "1"]) == 0
    out = capsys.readouterr().out
    first = next(line for line in out.splitlines() if line.startswith("Estimated time on"))
    assert "(h100-sxm)" in first
    assert "Share" in out and "Total " in out


def test_estimate_takes_a_spec_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = dt.DeviceSpec.named("l4").to_dict()
    data["name"] = "my-card"
    (tmp_path / "card.json").write_text(json.dumps(data))
    assert cli.main(["coolcnn", "--estimate", str(tmp_path / "card.json"), "--train", "--summary"]) == 0
    out = capsys.readouterr().out
    assert "(my-card)" in out and "backward" in out


def test_estimate_without_a_spec_or_with_an_unknown_one(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["coolcnn", "--estimate"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--estimate: expected one argument" in err
    assert cli.main(["coolcnn", "--estimate", "a10-80gb"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "did you mean" in err and "a100-40gb" in err


def test_estimate_columns_in_the_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["coolcnn", "--estimate", "h200", "--summary", "--depth", "1"]) == 0
    out = capsys.readouterr().out
    header = out.splitlines()[0]
    assert "Est. time" in header and "Bound" in header
