"""render.files, render.formats and render.notebook: every format, the registry, bad suffixes, life without ``dot``."""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
import shutil
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch

import dispatchtrace as dt
from dispatchtrace.cli import main
from dispatchtrace.cli._render import parser as render_parser
from dispatchtrace.render import DotFailedError, DotNotFoundError, mimebundle, render
from dispatchtrace.render import _formats as formats
from dispatchtrace.render import _notebook as notebook
from dispatchtrace.render._diagram import ImageOptions, run_dot
from dispatchtrace.render._dot import DiagramOptions
from dispatchtrace.render._formats import Format, NoOptions
from dispatchtrace.render._text import TreeOptions

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz's dot program is not installed")


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
    pytest.importorskip("dispatchtrace.views")
    path = cool.render(str(tmp_path / "cool.txt"), depth=1)
    assert path.read_text(encoding="utf-8") == str(cool.tree(1)) + "\n"
    assert "max_pool" in path.read_text(encoding="utf-8")


def test_each_format_takes_its_own_options_and_refuses_the_others(cool: dt.Graph, tmp_path: Path) -> None:
    txt = cool.render(tmp_path / "cool.txt", depth=1, ops=True, statements=True)
    assert txt.read_text(encoding="utf-8") == str(cool.tree(1, ops=True, statements=True)) + "\n"
    dot = cool.render(tmp_path / "cool.dot", depth=1, fold=False)
    assert dot.read_text(encoding="utf-8") == cool.to_dot(1, fold=False).source
    # an option the format does not take is an error naming the formats that take it, never dropped in silence
    with pytest.raises(ValueError, match=r"the tree format \(\.txt\) takes no rankdir \(svg, pdf, png, dot take it\)"):
        cool.render(tmp_path / "new" / "cool.txt", depth=1, rankdir="LR")
    with pytest.raises(ValueError, match=r"the dot format \(\.dot \.gv\) takes no ops \(tree takes it\); at \(tree"):
        cool.render(tmp_path / "new" / "cool.dot", ops=True, at="max_pool#2")
    with pytest.raises(ValueError, match=r"takes no force \(svg, pdf, png take it\)"):
        cool.render(tmp_path / "new" / "cool.dot", force=True)
    with pytest.raises(ValueError, match=r"the capture format \(\.json\) takes no depth .* it takes no options"):
        cool.render(tmp_path / "new" / "cool.json", depth=1)
    for name in ("cool.txt", "cool.dot", "cool.json"):
        with pytest.raises(TypeError, match="no format takes an option 'colour'; the options are: at, depth"):
            cool.render(tmp_path / "new" / name, colour="red")
    with pytest.raises(TypeError, match="to_dot takes no option 'ops'"):
        cool.to_dot(1, ops=True)
    assert not (tmp_path / "new").exists()


def test_format_overrides_the_suffix(cool: dt.Graph, tmp_path: Path) -> None:
    dot = cool.render(tmp_path / "diagram", format="dot", depth=1)
    assert dot == tmp_path / "diagram" and dot.read_text(encoding="utf-8") == cool.to_dot(1).source
    txt = cool.render(tmp_path / "tree.dot", format="tree", depth=1)
    assert txt.read_text(encoding="utf-8") == str(cool.tree(1)) + "\n"
    with pytest.raises(ValueError, match="unknown format 'jpeg'; use one of: svg, pdf, png, dot, tree, capture"):
        cool.render(tmp_path / "x.svg", format="jpeg")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["diagram", "tree.dot"]


def test_render_and_to_dot_take_what_the_formats_declare() -> None:
    # one declaration per format (its options class); Graph.render, render() and to_dot spell no list of their own
    for fn in (dt.Graph.render, render):
        params = list(inspect.signature(fn).parameters.values())
        assert [p.name for p in params][-2:] == ["format", "options"] and params[-1].kind is params[-1].VAR_KEYWORD
    assert [p.name for p in inspect.signature(dt.Graph.to_dot).parameters.values()] == ["self", "depth", "options"]
    assert inspect.signature(dt.Graph.render).return_annotation == "Path"
    assert [f.name for f in dataclasses.fields(ImageOptions)] == [f.name for f in dataclasses.fields(DiagramOptions)] + ["force"]


def test_one_default_depth_for_the_tree_and_one_for_pictures() -> None:
    # the tree (g.tree(), .txt, the CLI's printed tree) opens every call; a picture must fit, so it opens "auto"
    assert inspect.signature(dt.Graph.tree).parameters["depth"].default == "all" == TreeOptions().depth
    for fmt in formats.formats():
        fields = {f.name: f.default for f in dataclasses.fields(fmt.options)}
        if "depth" in fields and fmt.name != "tree":
            assert fields["depth"] == "auto", fmt.name


def test_options_from_takes_each_formats_own() -> None:
    assert formats.get("svg").options_from({"depth": 2, "fold": False, "rankdir": "LR", "force": True}) == \
        ImageOptions(depth=2, fold=False, rankdir="LR", force=True)
    assert formats.get("tree").options_from({"depth": 2, "ops": True, "at": "max_pool#2"}) == \
        TreeOptions(depth=2, ops=True, at="max_pool#2")
    assert formats.get("capture").options_from({}) == NoOptions()
    with pytest.raises(ValueError, match="takes no fold"):
        formats.get("tree").options_from({"depth": 2, "fold": False})


def test_suffixes_are_matched_longest_first_in_any_case() -> None:
    assert formats.for_path("a/b/Model.GV").name == "dot"
    assert formats.for_path("trace.json").name == "capture"
    assert formats.for_path(".json") is None and formats.for_path("json") is None
    assert formats.for_path("model.svg.bak") is None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class _ShoutOptions:
    title: str | None = None
    depth: formats.Depth = "auto"


def _shout(graph: dt.Graph, o: _ShoutOptions) -> bytes:
    return f"{o.title or 'untitled'} depth={o.depth}: {len(graph.ops)} OPS\n".upper().encode()


@pytest.fixture
def shout() -> Format[_ShoutOptions]:
    """A throwaway format, registered for one test: what a new format module plus one registration give."""
    fmt = formats.register(Format("shout", (".shout.txt",), _shout, _ShoutOptions, "the op count, loudly", "text/html"))
    yield fmt
    formats.unregister("shout")
    assert formats.for_path("x.shout.txt").name == "tree"


def test_a_registered_format_is_written_by_render_and_the_cli(cool: dt.Graph, tmp_path: Path, shout: Format[_ShoutOptions],
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    path = cool.render(tmp_path / "cool.shout.txt", title="cool", depth=1)
    assert path.read_text() == f"COOL DEPTH=1: {len(cool.ops)} OPS\n"
    assert cool.render(tmp_path / "plain.txt", depth=1).read_text() == str(cool.tree(1)) + "\n"
    assert cool.render(tmp_path / "loud", format="shout").read_text().startswith("UNTITLED DEPTH=AUTO")
    assert ".shout.txt (the op count, loudly)" in " ".join(render_parser().format_help().split())
    saved = cool.render(tmp_path / "cool.json")
    assert main(["render", str(saved), "-o", str(tmp_path / "cli.shout.txt"), "--depth", "2"]) == 0
    assert (tmp_path / "cli.shout.txt").read_text() == f"UNTITLED DEPTH=2: {len(cool.ops)} OPS\n"
    assert capsys.readouterr().out == f"wrote {tmp_path / 'cli.shout.txt'}\n"


def test_registering_a_taken_name_or_suffix_is_refused(shout: Format[_ShoutOptions]) -> None:
    with pytest.raises(ValueError, match="already registered"):
        formats.register(dataclasses.replace(shout, suffixes=(".other",)))
    with pytest.raises(ValueError, match=r"the suffix \.json already means format 'capture'.*\.x\.json"):
        formats.register(Format("mx", (".json",), _shout, _ShoutOptions, "x"))
    with pytest.raises(ValueError, match="start with a dot"):
        formats.register(Format("bad", ("MX.JSON",), _shout, _ShoutOptions, "x"))
    assert [f.name for f in formats.formats()] == ["svg", "pdf", "png", "dot", "tree", "capture", "model-explorer", "html", "trace", "chakra", "shout"]


def test_notebook_shows_the_registry_formats(cool: dt.Graph, shout: Format[_ShoutOptions],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(notebook, "SHOWN", ("shout",))
    bundle = cool._repr_mimebundle_()
    assert bundle == {"text/html": f"UNTITLED DEPTH=AUTO: {len(cool.ops)} OPS\n", "text/plain": repr(cool)}
    assert mimebundle(cool, exclude=["text/html"]) == {"text/plain": repr(cool)}


def test_json_is_the_saved_capture(cool: dt.Graph, tmp_path: Path) -> None:
    path = cool.render(tmp_path / "cool.json")
    json.loads(path.read_text(encoding="utf-8"))
    assert len(dt.load(path).ops) == len(cool.ops)
    cool.save(tmp_path / "saved.json")
    assert path.read_bytes() == (tmp_path / "saved.json").read_bytes()


def test_render_and_save_of_a_capture_with_kept_values_write_the_same_files(tmp_path: Path) -> None:
    pytest.importorskip("safetensors")
    lin = torch.nn.Linear(4, 2)
    with torch.no_grad(), dt.capture(lin, keep="addmm*") as g:
        lin(torch.ones(3, 4))
    assert g.kept
    rendered, saved = tmp_path / "rendered", tmp_path / "saved"
    assert g.render(rendered / "t.json") == rendered / "t.json"
    g.save(saved / "t.json")
    files = sorted(p.name for p in saved.iterdir())
    assert files == ["t.json", "t.values.safetensors"] == sorted(p.name for p in rendered.iterdir())
    for name in files:
        assert (rendered / name).read_bytes() == (saved / name).read_bytes(), name
    back = dt.load(rendered / "t.json")
    assert torch.equal(back.value(back.ops[-1]), g.value(g.ops[-1]))


def test_a_format_of_several_files_writes_them_itself(cool: dt.Graph, tmp_path: Path) -> None:
    def both(graph: dt.Graph, o: _ShoutOptions, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_shout(graph, o).decode())
        path.with_suffix(".count").write_text(str(len(graph.ops)))

    formats.register(Format("pair", (".pair",), None, _ShoutOptions, "two files", write_files=both))
    try:
        assert cool.render(tmp_path / "sub" / "x.pair", title="t") == tmp_path / "sub" / "x.pair"
        assert (tmp_path / "sub" / "x.count").read_text() == str(len(cool.ops))
        with pytest.raises(TypeError, match="needs a write .* or a write_files"):
            formats.register(Format("neither", (".neither",), None, _ShoutOptions, "x"))
    finally:
        formats.unregister("pair")


def test_the_diff_and_the_ranks_pages_are_formats_of_their_own_subjects(cool: dt.Graph, tmp_path: Path) -> None:
    # three formats share .html, each for what it writes: a capture's viewer, a diff's page, several ranks' page
    assert [formats.for_path("x.html", s).name for s in (formats.GRAPH, formats.DIFF, formats.RANKS)] == \
        ["html", "diff", "ranks"]
    d = dt.diff(cool, cool)
    page = render(d, tmp_path / "d.html", title="T")
    assert "<title>T · diff · dispatchtrace</title>" in page.read_text(encoding="utf-8")
    assert dt.write_diff(d, tmp_path / "w.html", title="T") == tmp_path / "w.html"
    assert (tmp_path / "w.html").read_bytes() == page.read_bytes()
    ranks = render({0: cool, 1: cool}, tmp_path / "r.html", title="R", depth=1)  # the viewer's options, per rank
    assert "R · 2 ranks" in ranks.read_text(encoding="utf-8")
    with pytest.raises(ValueError, match=r"a diff .* renders to \.html \.htm .*name it like diff\.html"):
        render(d, tmp_path / "d.svg")
    with pytest.raises(ValueError, match=r"the diff format \(\.html \.htm\) takes no rankdir; it takes title"):
        render(d, tmp_path / "d.html", rankdir="LR")
    with pytest.raises(TypeError, match="the diff format writes a diff .*, not a capture"):
        cool.render(tmp_path / "x.html", format="diff")
    with pytest.raises(TypeError, match="cannot render a str: render writes a capture, a diff"):
        render("cool", tmp_path / "x.html")


def test_unknown_suffix_lists_the_supported_ones(cool: dt.Graph, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"\.svg, \.pdf, \.png, \.dot, \.gv, \.txt, \.json, \.mx\.json, \.html, \.htm, \.trace\.json, \.et \(or name it: format= one of svg"):
        cool.render(tmp_path / "cool.jpg")
    with pytest.raises(ValueError, match="suffix"):
        cool.render(tmp_path / "cool")
    assert not list(tmp_path.iterdir())
    assert formats.suffixes() == (".svg", ".pdf", ".png", ".dot", ".gv", ".txt", ".json", ".mx.json", ".html", ".htm", ".trace.json", ".et")


@needs_dot
def test_dot_failure_is_reported(cool: dt.Graph) -> None:
    dot = cool.to_dot(0)
    dot.attr(layout="no-such-layout-engine")
    with pytest.raises(DotFailedError, match="`dot` failed to draw"):
        run_dot(dot, "svg")


@needs_dot
def test_notebook_bundle_has_svg_and_text(cool: dt.Graph, tmp_path: Path) -> None:
    bundle = cool._repr_mimebundle_()
    assert set(bundle) == {"text/html", "image/svg+xml", "text/plain"}  # the viewer inline: tests/render/test_viewer.py
    assert bundle["text/plain"] == repr(cool)
    assert bundle["image/svg+xml"] == cool.render(tmp_path / "cool.svg").read_text(encoding="utf-8")
    assert set(mimebundle(cool, exclude=["image/svg+xml"])) == {"text/html", "text/plain"}
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
    assert lines[2] == "bundle: ['text/html', 'text/plain']"  # the viewer needs no dot
    error = lines[3]
    assert error.startswith("error: True graphviz's `dot` program was not found")
    for hint in ("apt-get install graphviz", "brew install graphviz", "conda install graphviz", ".dot, .txt and .json"):
        assert hint in error
    assert lines[4] == "svg written: False"
    assert issubclass(DotNotFoundError, RuntimeError)
