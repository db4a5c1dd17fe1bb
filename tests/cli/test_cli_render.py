"""``dispatchtrace render``: a saved capture drawn, printed and summarized without the model."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from vision import needs_torchvision, torchvision

import dispatchtrace as dt
from dispatchtrace.cli import main
from dispatchtrace.cli._render import run


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dt.Graph]:
    model = torchvision.models.resnet18(weights=None).eval()
    x = torch.randn(1, 3, 64, 64)
    with dt.capture(model) as g:
        model(x)
    path = tmp_path_factory.mktemp("cli") / "trace.json"
    g.save(path)
    return path, g


@pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz's dot is not installed")
def test_render_svg_depth_2(trace: tuple[Path, dt.Graph], tmp_path: Path) -> None:
    path, g = trace
    out = tmp_path / "out.svg"
    assert run([str(path), "-o", str(out), "--depth", "2"]) == 0
    svg = out.read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    assert "layer1.0" in svg


def test_render_dot_equals_live_graph(trace: tuple[Path, dt.Graph], tmp_path: Path) -> None:
    path, g = trace
    out = tmp_path / "out.dot"
    assert main(["render", str(path), "-o", str(out), "--depth", "2", "--debug"]) == 0
    assert out.read_text() == g.to_dot(2).source


def test_outputs_go_through_the_registry(trace: tuple[Path, dt.Graph], tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    path, g = trace
    outs = [tmp_path / "a.gv", tmp_path / "a.txt", tmp_path / "copy.json"]
    assert run([str(path), *[a for o in outs for a in ("-o", str(o))], "--depth", "1"]) == 0
    assert capsys.readouterr().out.splitlines() == [f"wrote {o}" for o in outs]
    assert outs[0].read_text() == g.to_dot(1).source
    assert outs[1].read_text() == str(g.tree(1)) + "\n"
    assert outs[2].read_bytes() == g.render(tmp_path / "again.json").read_bytes()
    assert len(dt.load(outs[2]).ops) == len(g.ops)


def test_prints_tree_and_summary(trace: tuple[Path, dt.Graph], capsys: pytest.CaptureFixture[str]) -> None:
    path, g = trace
    assert run([str(path), "--depth", "1"]) == 0
    assert capsys.readouterr().out == str(g.tree(1)) + "\n"
    assert run([str(path), "--summary", "--depth", "1"]) == 0
    out = capsys.readouterr().out
    assert out == str(g.summary(1)) + "\n"
    assert "11.7 M" in out and "MFLOPs" in out


def test_bad_files_are_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["render", str(tmp_path / "missing.json")]) == 2
    assert "no such file" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "dispatchtrace", "version": 99}))
    assert main(["render", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "newer" in err
    bad.write_text('{"format": "dispatchtrace", "vers')
    assert main(["render", str(bad)]) == 2
    assert "truncated" in capsys.readouterr().err


def test_bad_suffix_is_refused_before_anything_is_written(trace: tuple[Path, dt.Graph], tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    path, g = trace
    assert main(["render", str(path), "-o", str(tmp_path / "out.dot"), "-o", str(tmp_path / "out.bmp")]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert captured.err.startswith("dispatchtrace: error: cannot tell the format of ") and ".svg" in captured.err
    assert not list(tmp_path.iterdir())


def test_console_script(trace: tuple[Path, dt.Graph], tmp_path: Path) -> None:
    path, g = trace
    script = Path(sys.executable).with_name("dispatchtrace")
    if not script.exists():
        pytest.skip("the dispatchtrace console script is not installed in this environment")
    out = tmp_path / "t.txt"
    proc = subprocess.run([str(script), "render", str(path), "-o", str(out), "--depth", "1"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert out.read_text() == str(g.tree(1)) + "\n"


@pytest.fixture(scope="module")
def saved_by_the_command(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "resnet18.json"
    assert main(["resnet18", "--input", "1x3x64x64", "-o", str(path)]) == 0
    return path


@pytest.mark.parametrize("view", [["--at", "layer2.0", "--depth", "1"], ["--at", "layer1.1.relu#1", "--noise"],
                                  ["--noise", "--ops", "--depth", "2"], ["--statements", "--at", "layer3"]])
@needs_torchvision
def test_view_options_print_what_the_main_command_prints(saved_by_the_command: Path, view: list[str],
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    path = saved_by_the_command
    capsys.readouterr()
    assert main(["resnet18", "--input", "1x3x64x64", *view]) == 0
    want = capsys.readouterr().out
    assert main(["render", str(path), *view]) == 0
    assert capsys.readouterr().out == want
    assert want.startswith(view[view.index("--at") + 1] if "--at" in view else "ResNet  f32[1, 1000]")


def test_render_at_writes_the_tree_from_that_call(trace: tuple[Path, dt.Graph], tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    path, g = trace
    out = tmp_path / "t.txt"
    assert main(["render", str(path), "--at", "layer4", "-o", str(out), "--summary"]) == 0
    assert out.read_text() == str(g.tree("all", at="layer4")) + "\n"
    assert capsys.readouterr().out == str(g.summary("all")) + "\n"  # the summary lists every call
    assert main(["render", str(path), "--at", "layer9"]) == 2
    assert "no module call labelled 'layer9'" in capsys.readouterr().err
