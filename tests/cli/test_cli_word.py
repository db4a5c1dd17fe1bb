"""The command line keeps its word: nothing to compare, a phase that is not there, notes worth reading."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn as nn
from models import needs_node_hook

import dispatchtrace as dt
from dispatchtrace import cli


def _saved(tmp_path: Path, name: str, *, train: bool = False) -> Path:
    net, x = nn.Sequential(nn.Linear(4, 3), nn.ReLU()), torch.randn(2, 4)
    with dt.capture(net) as g:
        out = net(x)
        if train:
            out.sum().backward()
    path = tmp_path / name
    g.save(path)
    return path


def test_mismatch_of_captures_without_collectives_says_there_is_nothing_to_compare(tmp_path, capsys) -> None:  # noqa: ANN001
    for rank in (0, 1):
        _saved(tmp_path, f"trace.rank{rank}.json")
    assert cli.main(["mismatch", str(tmp_path / "trace.rank*.json")]) == 3
    out = capsys.readouterr().out
    assert out.startswith("nothing to compare: none of the 2 ranks' captures holds a collective") and "agree" not in out


def test_mismatch_of_one_file_is_a_usage_error(tmp_path, capsys) -> None:  # noqa: ANN001
    path = _saved(tmp_path, "trace.rank0.json")
    assert cli.main(["mismatch", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dispatchtrace: error: 1 rank file (rank 0): a mismatch needs the files of two ranks or more")
    assert "1 ranks" not in err


@pytest.mark.parametrize("where", ["trace", "render"])
def test_phase_backward_without_a_backward_says_so(tmp_path, capsys, where: str) -> None:  # noqa: ANN001
    argv = ["coolcnn", "--phase", "backward"] if where == "trace" else \
        ["render", str(_saved(tmp_path, "fwd.json")), "--phase", "backward"]
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("dispatchtrace: error: --phase backward: there is no backward phase in this capture; ")
    assert ("--train" in captured.err) and captured.err.count("\n") == 1


def test_phase_backward_in_python_raises_saying_how_to_get_one() -> None:
    net, x = nn.Linear(4, 3), torch.randn(2, 4)
    with dt.capture(net) as g:
        net(x)
    with pytest.raises(ValueError, match="no backward phase in this capture.*loss.backward"):
        g.tree(phase="backward")
    assert str(g.tree(phase="all")) == str(g.tree())


def test_phase_backward_of_a_training_capture_still_works(tmp_path, capsys) -> None:  # noqa: ANN001
    assert cli.main(["render", str(_saved(tmp_path, "step.json", train=True)), "--phase", "backward", "--ops"]) == 0
    assert "aten::threshold_backward" in capsys.readouterr().out


@needs_node_hook
def test_a_train_run_prints_no_note_about_the_optimizer(capsys) -> None:  # noqa: ANN001
    assert cli.main(["coolcnn", "--train", "--depth", "1"]) == 0
    err = capsys.readouterr().err
    assert "note" not in err and "optimizer" not in err


def test_every_note_of_render_has_the_prefix(tmp_path, capsys) -> None:  # noqa: ANN001
    saved = str(_saved(tmp_path, "t.json"))
    assert cli.main(["render", saved, "-o", str(tmp_path / "a.dot"), "-o", str(tmp_path / "a.txt"), "--statements"]) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if "note:" in line]
    assert notes and all(line.startswith("dispatchtrace: note: ") for line in notes)


def test_a_builder_returning_an_int_reads_an_int(tmp_path, capsys) -> None:  # noqa: ANN001
    (tmp_path / "build.py").write_text("def make():\n    return 3\n")
    assert cli.main([f"{tmp_path / 'build.py'}:make"]) == 2
    err = capsys.readouterr().err
    assert "returned an int, not an nn.Module" in err


def test_an_output_with_a_trailing_slash_is_refused_before_any_work(tmp_path, capsys) -> None:  # noqa: ANN001
    # -o dir.svg/ wrote a file dir.svg and reported "wrote dir.svg/"; a trailing slash names a folder
    assert cli.main(["coolcnn", "-o", f"{tmp_path / 'dir.svg'}/"]) == 2
    err = capsys.readouterr().err
    assert "ends with a slash, so it names a folder" in err and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []
