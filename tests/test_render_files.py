"""render.files and render.notebook: every suffix, bad suffixes, and life without graphviz's ``dot``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from models import coolcnn

import dispatchtrace as dt
from dispatchtrace.render import DotFailedError, DotNotFoundError
from dispatchtrace.render.files import SUFFIXES, run_dot
from dispatchtrace.render.notebook import mimebundle

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz's dot program is not installed")


@pytest.fixture(scope="module")
def cool() -> dt.Graph:
    return coolcnn()


@needs_dot
def test_svg_pdf_png_by_suffix(cool: dt.Graph, tmp_path: Path) -> None:
    svg = cool.render(tmp_path / "cool.svg", depth=1)
    assert svg == tmp_path / "cool.svg"
    nodes = [g for g in ET.parse(svg).getroot().iter("{http://www.w3.org/2000/svg}g") if g.get("class") == "node"]
    assert len(nodes) == len(cool.collapse(1)) == 17
    assert cool.render(tmp_path / "cool.pdf", depth=1).read_bytes().startswith(b"%PDF")
    assert cool.render(tmp_path / "sub" / "dir" / "cool.PNG").read_bytes().startswith(b"\x89PNG")


def test_dot_and_gv_are_source_only(cool: dt.Graph, tmp_path: Path) -> None:
    for name in ("cool.dot", "cool.gv"):
        path = cool.render(tmp_path / name, depth="ops", fold=False)
        assert path.read_text(encoding="utf-8") == cool.to_dot("ops", fold=False).source


def test_txt_is_the_tree(cool: dt.Graph, tmp_path: Path) -> None:
    pytest.importorskip("dispatchtrace.views.tree")
    path = cool.render(str(tmp_path / "cool.txt"), depth=1)
    assert path.read_text(encoding="utf-8") == str(cool.tree(1)) + "\n"
    assert "max_pool" in path.read_text(encoding="utf-8")


def test_each_format_takes_its_own_options(cool: dt.Graph, tmp_path: Path) -> None:
    txt = cool.render(tmp_path / "cool.txt", depth=1, fold=True, rankdir="LR", ops=True, statements=True)
    assert txt.read_text(encoding="utf-8") == str(cool.tree(1, ops=True, statements=True)) + "\n"
    dot = cool.render(tmp_path / "cool.dot", depth=1, fold=False, ops=True, at="max_pool#2")
    assert dot.read_text(encoding="utf-8") == cool.to_dot(1, fold=False).source
    for name in ("cool.txt", "cool.dot", "cool.json"):
        with pytest.raises(TypeError, match="unexpected keyword argument 'colour'.*fold"):
            cool.render(tmp_path / "new" / name, colour="red")
    assert not (tmp_path / "new").exists()


def test_json_is_the_saved_capture(cool: dt.Graph, tmp_path: Path) -> None:
    path = cool.render(tmp_path / "cool.json")
    json.loads(path.read_text(encoding="utf-8"))
    assert len(dt.load(path).ops) == len(cool.ops)


def test_unknown_suffix_lists_the_supported_ones(cool: dt.Graph, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"\.svg, \.pdf, \.png, \.dot, \.gv, \.txt, \.json"):
        cool.render(tmp_path / "cool.jpg")
    with pytest.raises(ValueError, match="suffix"):
        cool.render(tmp_path / "cool")
    assert not list(tmp_path.iterdir())
    assert SUFFIXES == (".svg", ".pdf", ".png", ".dot", ".gv", ".txt", ".json")


@needs_dot
def test_dot_failure_is_reported(cool: dt.Graph) -> None:
    dot = cool.to_dot(0)
    dot.attr(layout="no-such-layout-engine")
    with pytest.raises(DotFailedError, match="`dot` failed to draw"):
        run_dot(dot, "svg")


@needs_dot
def test_notebook_bundle_has_svg_and_text(cool: dt.Graph) -> None:
    bundle = cool._repr_mimebundle_()
    assert set(bundle) == {"image/svg+xml", "text/plain"}
    assert bundle["text/plain"] == repr(cool)
    assert bundle["image/svg+xml"].lstrip().startswith("<?xml")
    assert set(mimebundle(cool, exclude=["image/svg+xml"])) == {"text/plain"}
    assert set(mimebundle(cool, include=["image/svg+xml"])) == {"image/svg+xml"}


NO_DOT_SCRIPT = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    import torch
    import dispatchtrace as dt
    from dispatchtrace.render import DotNotFoundError

    out = Path(sys.argv[1])
    lin, x = torch.nn.Linear(4, 2), torch.ones(1, 4)
    with dt.capture(lin) as g:
        lin(x)
    print("dot:", g.render(out / "lin.dot").read_text().startswith("digraph"))
    print("txt:", g.render(out / "lin.txt").exists())
    print("bundle:", sorted(g._repr_mimebundle_()))
    try:
        g.render(out / "lin.svg")
    except DotNotFoundError as exc:
        print("error:", isinstance(exc, RuntimeError), exc)
    print("svg written:", (out / "lin.svg").exists())
    """
)


def test_without_dot_images_fail_with_install_hint_and_text_works(tmp_path: Path) -> None:
    bindir = str(Path(sys.executable).parent)
    if shutil.which("dot", path=bindir):
        pytest.skip("dot lives next to the python executable; cannot hide it with PATH")
    env = {**os.environ, "PATH": bindir}
    run = subprocess.run([sys.executable, "-c", NO_DOT_SCRIPT, str(tmp_path)], env=env, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "dot: True" and lines[1] == "txt: True"
    assert lines[2] == "bundle: ['text/plain']"
    error = lines[3]
    assert error.startswith("error: True graphviz's `dot` program was not found")
    for hint in ("apt-get install graphviz", "brew install graphviz", "conda install graphviz", ".dot, .txt and .json"):
        assert hint in error
    assert lines[4] == "svg written: False"
    assert issubclass(DotNotFoundError, RuntimeError)
