"""render/_options.py: the TypedDicts of ``render`` and ``to_dot`` stay equal to the formats' options classes."""

from __future__ import annotations

import dataclasses
import inspect
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, ForwardRef

import pytest
import torch

import dispatchtrace as dt
from dispatchtrace.render import DotOptions, RenderOptions
from dispatchtrace.render import _formats as formats
from dispatchtrace.render._dot import DiagramOptions


def _spelled(annotation: Any) -> str:
    """An annotation as its source spells it (the modules use ``from __future__ import annotations``)."""
    return annotation.__forward_arg__ if isinstance(annotation, ForwardRef) else str(annotation)


def _typed(td: type) -> dict[str, str]:
    return {name: _spelled(a) for name, a in td.__annotations__.items()}


def test_render_options_are_every_option_of_every_format_with_its_type() -> None:
    declared: dict[str, str] = {}
    for fmt in formats.formats(None):  # a capture's, a diff's and the ranks' formats
        for f in dataclasses.fields(fmt.options):
            assert declared.setdefault(f.name, str(f.type)) == str(f.type), (fmt.name, f.name)  # one type a name
    assert _typed(RenderOptions) == declared
    assert RenderOptions.__total__ is False and DotOptions.__total__ is False


def test_dot_options_are_the_diagrams_but_depth() -> None:
    assert _typed(DotOptions) == {f.name: str(f.type) for f in dataclasses.fields(DiagramOptions) if f.name != "depth"}


def test_the_signatures_and_help_show_them() -> None:
    for method, td in ((dt.Graph.render, RenderOptions), (dt.Graph.to_dot, DotOptions)):
        options = inspect.signature(method).parameters["options"]
        assert options.kind is options.VAR_KEYWORD and options.annotation == f"Unpack[{td.__name__}]"
        doc = inspect.getdoc(method) or ""
        assert td.__name__ in doc and all(f"``{name}``" in doc for name in td.__annotations__), method.__name__


def test_an_unknown_option_is_still_an_error_naming_who_takes_it(tmp_path: Path) -> None:
    with dt.capture() as g:
        _ = torch.ones(2) + 1
    with pytest.raises(ValueError, match=r"takes no ops \(tree takes it\)"):
        g.render(tmp_path / "x.dot", ops=True)
    with pytest.raises(TypeError, match="no format takes an option 'colour'"):
        g.render(tmp_path / "x.dot", colour="red")  # type: ignore[call-arg]


@pytest.mark.slow
def test_mypy_checks_the_options_when_installed(tmp_path: Path) -> None:
    pytest.importorskip("mypy")
    snippet = tmp_path / "snippet.py"
    snippet.write_text(textwrap.dedent("""
        import dispatchtrace as dt
        g = dt.Graph()
        g.render("x.svg", depth=1, rankdir="LR", force=True)
        g.render("x.svg", rankdir="up")
        g.to_dot(1, colour="red")
    """))
    root = Path(dt.__file__).resolve().parent.parent
    run = subprocess.run([sys.executable, "-m", "mypy", "--follow-imports=silent", "--ignore-missing-imports",
                          str(snippet)], capture_output=True, text=True, cwd=root, timeout=600)
    assert 'snippet.py:5: error' in run.stdout and '"rankdir"' in run.stdout, run.stdout
    assert 'snippet.py:6: error' in run.stdout and '"colour"' in run.stdout, run.stdout
    assert "snippet.py:4:" not in run.stdout, run.stdout
