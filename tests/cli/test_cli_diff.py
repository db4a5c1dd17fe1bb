"""``dispatchtrace diff A.json B.json``: exit 0 when they agree, 1 when they differ, 2 on an error."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch

import dispatchtrace as dt
from dispatchtrace import cli
from dispatchtrace.models import CoolCNN


def _save(model: torch.nn.Module, path: Path) -> Path:
    with torch.no_grad(), dt.capture(model, values="stats") as g:
        model(torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(0)))
    g.save(path)
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    tmp = tmp_path_factory.mktemp("diff")
    torch.manual_seed(0)
    model = CoolCNN()
    other = copy.deepcopy(model)
    with torch.no_grad():
        other.secondary_conv.weight[0, 0, 0, 0] += 0.5
    return _save(model, tmp / "a.json"), _save(model, tmp / "a2.json"), _save(other, tmp / "b.json")


def test_identical_files_agree(files: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    a, a2, _ = files
    assert cli.main(["diff", str(a), str(a2)]) == 0
    assert "values: agree within tolerance" in capsys.readouterr().out


def test_files_that_differ_name_the_first_op(files: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    a, _, b = files
    assert cli.main(["diff", str(a), str(b), "--depth", "0"]) == 1
    out = capsys.readouterr().out
    assert "first departure: %convolution_2 / %convolution_2 = aten.convolution.default in secondary_conv" in out
    assert "max_pool#2" not in out  # --depth 0: the model's call only


def test_a_truncated_file_is_one_line_and_exit_2(files: tuple[Path, Path, Path], tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    a, _, _ = files
    cut = tmp_path / "cut.json"
    cut.write_text(a.read_text()[:500])
    assert cli.main(["diff", str(a), str(cut)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "looks truncated" in err
    assert cli.main(["diff", str(a), str(tmp_path / "missing.json")]) == 2


def test_a_missing_file_is_one_line_naming_it(files: tuple[Path, Path, Path], tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    a, _, _ = files
    missing = tmp_path / "missing.json"
    assert cli.main(["diff", str(missing), str(a)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == [err] and f"no such file: {missing}" in err and "Errno" not in err


def test_o_creates_missing_folders(files: tuple[Path, Path, Path], tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    a, _, b = files
    page = tmp_path / "new" / "folder" / "d.html"
    assert cli.main(["diff", str(a), str(b), "-o", str(page)]) == 1
    assert page.read_text().startswith("<!DOCTYPE html>") and f"wrote {page}" in capsys.readouterr().out


def test_a_bad_suffix_is_refused_before_any_work(files: tuple[Path, Path, Path], tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    a, _, b = files
    assert cli.main(["diff", str(a), str(b), "-o", str(tmp_path / "d.svg")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "name it like diff.html" in err  # no report printed first
    assert not (tmp_path / "d.svg").exists()


class _Relu(torch.nn.Module):  # the same op as nn.ReLU, under another class: a refactor
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def test_a_structural_difference_alone_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    torch.manual_seed(0)
    before = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    after = torch.nn.Sequential(torch.nn.Linear(4, 4), _Relu())
    after.load_state_dict(before.state_dict())
    x = torch.randn(2, 4)
    paths = []
    for name, model in (("before", before), ("after", after)):
        with torch.no_grad(), dt.capture(model, values="stats") as g:
            model(x)
        g.save(tmp_path / f"{name}.json")
        paths.append(str(tmp_path / f"{name}.json"))
    assert cli.main(["diff", *paths]) == 1  # the values agree; the module's type changed
    out = capsys.readouterr().out
    assert "type of 1: ReLU -> _Relu" in out and "values: agree within tolerance" in out
