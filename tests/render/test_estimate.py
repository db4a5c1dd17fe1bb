"""The dot-time estimate: grows with edges and their reach, refuses a diagram dot cannot lay out in time, unless forced."""

from __future__ import annotations

import shutil
from pathlib import Path

import graphviz
import pytest
import torch
from models import coolcnn

import dispatchtrace as dt
from dispatchtrace.render import DiagramTooLargeError, mimebundle
from dispatchtrace.render._diagram import run_dot
from dispatchtrace.render._dot import digraph
from dispatchtrace.render._estimate import MAX_LAYOUT_SECONDS, check_layout_cost, estimate_seconds, layout_seconds


def test_estimate_grows_with_edges_and_span() -> None:
    assert estimate_seconds(edges=0, span=0) == 0.0
    sizes = [(100, 150), (1_000, 1_500), (10_000, 15_000), (20_000, 30_000)]
    times = [estimate_seconds(edges=e, span=s) for e, s in sizes]
    assert times == sorted(times) and times[0] < 0.1 and times[-1] > MAX_LAYOUT_SECONDS  # an 18k-edge chain took 178 s
    assert estimate_seconds(edges=2_500, span=185_000) > 10 * estimate_seconds(edges=2_500, span=5_000)


def _dense(n: int) -> dt.Graph:
    """Every step concatenates all the earlier ones, as a DenseNet block: long edges everywhere."""
    x = torch.ones(1, 1)
    with dt.capture() as g:
        feats = [x]
        for _ in range(n):
            feats.append(torch.cat(feats, 1).sum(1, keepdim=True))
    return g


def test_digraph_and_collapsed_graph_give_one_estimate() -> None:
    g = _dense(40)
    cg = g.collapse("ops")
    assert layout_seconds(cg) == pytest.approx(layout_seconds(digraph(cg)))


def test_large_diagram_is_refused_before_dot_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    g = _dense(220)
    started: list[str] = []
    monkeypatch.setattr(graphviz.Digraph, "pipe", lambda self, **kw: started.append(kw["format"]) or b"")
    with pytest.raises(DiagramTooLargeError) as info:
        g.render(tmp_path / "dense.svg", depth="ops")
    assert started == [] and not (tmp_path / "dense.svg").exists()
    message = str(info.value)
    assert info.value.seconds > MAX_LAYOUT_SECONDS and f"about {info.value.seconds:.0f} s" in message
    assert "smaller depth" in message and "fold=True" in message and ".txt tree" in message and "force=True" in message
    assert g.render(tmp_path / "dense.dot", depth="ops").exists()  # DOT source needs no layout: never refused
    assert g.render(tmp_path / "forced.svg", depth="ops", force=True).exists() and started == ["svg"]
    assert "image/svg+xml" not in mimebundle(g)  # no module calls: auto is "ops"; a notebook falls back to text


def test_cli_says_what_to_do(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from dispatchtrace.cli._errors import CliError
    from dispatchtrace.cli._options import write_output as write

    with pytest.raises(CliError, match="smaller depth"):
        write(_dense(220), tmp_path / "dense.png", depth="ops")


@pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz's dot is not installed")
def test_a_small_real_diagram_passes_and_draws() -> None:
    cool = coolcnn()
    dot = cool.to_dot("ops", fold=False)
    assert check_layout_cost(dot) < 1
    assert run_dot(dot, "svg").lstrip().startswith(b"<?xml")


def test_the_cli_writes_every_output_it_can_and_names_the_refused_one(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    # the refusal of one diagram does not abort the command: .dot and .txt are written, the .svg is named
    from dispatchtrace.cli import main

    saved = _dense(220).render(tmp_path / "dense.json")
    outs = [tmp_path / "a.svg", tmp_path / "a.dot", tmp_path / "a.txt"]
    assert main(["render", str(saved), "--depth", "ops", *[a for o in outs for a in ("-o", str(o))]]) == 2
    err = capsys.readouterr().err.splitlines()
    assert not outs[0].exists() and outs[1].exists() and outs[2].exists()
    assert err[0].startswith(f"dispatchtrace: error: {outs[0]} not written: dot would take about ")
    assert "or add --force to draw it anyway" in err[0]
    assert err[-1] == f"dispatchtrace: error: not written: {outs[0]}, too large for dot (the other outputs were " \
                      "written); --force draws it anyway"
    # --force goes to the images that take it, and is an error where nothing does
    assert main(["render", str(saved), "--force", "-o", str(tmp_path / "b.txt")]) == 2
    assert "--force would change nothing" in capsys.readouterr().err
