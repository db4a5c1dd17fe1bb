"""The page of a diff without a browser: what its payload holds (aligned calls, one-side calls, op pairs, the
first departure), that it fetches nothing, and the ways to write it (``dt.write_diff``, ``dispatchtrace diff -o``)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
import torch
from test_viewer_scripts import defined, header, read, source
from torch import nn

import dispatchtrace as dt
from dispatchtrace import cli
from dispatchtrace.models import CoolCNN
from dispatchtrace.render._diff_page import DIFF_SCRIPTS, diff_page, diff_payload


def run(model: nn.Module, **kw: object) -> dt.Graph:
    with torch.no_grad(), dt.capture(model, values="stats", **kw) as g:  # type: ignore[arg-type]
        model(torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(0)))
    return g


def one_more_call() -> tuple[dt.Graph, dt.Graph]:
    """Two captures whose second has the first's two calls and one more (a call of one side)."""
    torch.manual_seed(0)
    a_model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    b_model = nn.Sequential(*copy.deepcopy(a_model), nn.Linear(4, 2))  # the same two calls, and one more
    x = torch.ones(1, 4)
    with torch.no_grad(), dt.capture(a_model, values="stats") as a:
        a_model(x)
    with torch.no_grad(), dt.capture(b_model, values="stats") as b:
        b_model(x)
    return a, b


@pytest.fixture(scope="module")
def perturbed() -> tuple[dt.Graph, dt.Graph]:
    torch.manual_seed(0)
    model = CoolCNN()
    other = copy.deepcopy(model)
    with torch.no_grad():
        other.secondary_conv.weight[0, 0, 0, 0] += 0.5
    return run(model), run(other)


def embedded(text: str) -> dict:
    return json.loads(re.search(r'<script type="application/json" id="dt-diff">(.*?)</script>', text, re.S).group(1))


def test_the_payload_marks_the_first_departure_and_each_calls_error(perturbed: tuple[dt.Graph, dt.Graph]) -> None:
    a, b = perturbed
    d = dt.diff(a, b)
    p = diff_payload(d)
    assert d.first is not None and d.first.a is not None
    first = p["pairs"][p["first"]]
    assert first["a"]["name"] == d.first.a.name and first["departs"] and p["s"][first["a"]["call"]] == "secondary_conv"
    assert [c["label"] for c in p["calls"]] == [cd.label for cd in d.calls]  # every call aligned, in a's order
    assert [c["error"] for c in p["calls"]] == [cd.error for cd in d.calls]
    assert all(c["side"] == "both" for c in p["calls"]) and not p["agree"] and p["values"]
    sec = next(c for c in p["calls"] if c["label"] == "secondary_conv")
    assert p["first"] in sec["pairs"] and p["calls"][sec["parent"]]["label"] == "CoolCNN"
    assert sec["a"]["outs"][0][1][8] == pytest.approx(a.stats[d.first.a.outputs[0].id].norm)
    assert p["report"] == str(d)


def test_calls_of_one_side_and_changed_ops_are_marked() -> None:
    a, b = one_more_call()
    p = diff_payload(dt.diff(a, b))
    side = [c for c in p["calls"] if c["side"] != "both"]
    assert [(c["side"], c["label"], c["type"], p["calls"][c["parent"]]["label"]) for c in side] == [("b", "2", "Linear", "Sequential")]
    assert side[0]["a"] is None and p["s"][side[0]["b"]["outs"][0][0]] == "%addmm_1: f32[1, 2]"
    assert not p["agree"] and p["first"] is None  # the calls both ran agree


def test_a_meta_diff_is_structure_only() -> None:
    lin = nn.Linear(4, 2, device="meta")
    with dt.capture(lin, values="stats") as g:
        lin(torch.ones(1, 4, device="meta"))
    p = diff_payload(dt.diff(g, g))
    assert p["values"] is False and p["first"] is None and p["agree"]
    assert all(q["via"] == "none" for q in p["pairs"])


def test_the_page_fetches_nothing(perturbed: tuple[dt.Graph, dt.Graph]) -> None:
    text = diff_page(dt.diff(*perturbed), title="Cool <CNN>")
    assert "<title>Cool &lt;CNN&gt; · diff · dispatchtrace</title>" in text
    assert not re.search(r"<\w[^<>]*\s(src|href|srcset|action|poster|data)\s*=", text, re.I)
    assert not re.search(r"url\(|@import|sourceMappingURL", text)
    assert not re.search(r"\b(fetch|XMLHttpRequest|WebSocket|EventSource|importScripts|sendBeacon|Worker)\s*\(", text)
    assert not re.findall(r"\b(?:https?|wss?|ftp)://", text)
    assert text.count("<script") == 2 and "// ---- stats.js" in text and "// ---- diff.js" in text
    assert embedded(text)["title"] == "Cool <CNN>"


def test_write_diff_and_the_cli_write_the_page(perturbed: tuple[dt.Graph, dt.Graph], tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    a, b = perturbed
    dt.write_diff(dt.diff(a, b), tmp_path / "d.html")
    assert embedded((tmp_path / "d.html").read_text(encoding="utf-8"))["first"] is not None
    with pytest.raises(ValueError, match="name it like diff.html"):
        dt.write_diff(dt.diff(a, b), tmp_path / "d.svg")
    a.save(tmp_path / "a.json")
    b.save(tmp_path / "b.json")
    assert cli.main(["diff", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "-o", str(tmp_path / "cli.html")]) == 1
    assert f"wrote {tmp_path / 'cli.html'}" in capsys.readouterr().out
    assert embedded((tmp_path / "cli.html").read_text(encoding="utf-8"))["pairs"]
    assert cli.main(["diff", str(tmp_path / "a.json"), str(tmp_path / "a.json"), "-o", str(tmp_path / "same.html")]) == 0
    assert embedded((tmp_path / "same.html").read_text(encoding="utf-8"))["agree"] is True
    assert cli.main(["diff", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "-o", str(tmp_path / "d.png")]) == 2
    assert "name it like diff.html" in capsys.readouterr().err


def test_the_pages_scripts_declare_what_they_read_and_define() -> None:
    done: set[str] = set()
    for name in DIFF_SCRIPTS:
        text = source(name)
        assert header(text, "defines") == defined(text) and header(text, "reads") == read(text), name
        assert read(text) <= done, f"{name} reads what no earlier script of the page defines"
        done |= defined(text)


def test_a_layout_diffs_page_shows_the_full_values_it_compared() -> None:
    torch.manual_seed(0)
    model, x = nn.Sequential(nn.Linear(8, 16), nn.ReLU()), torch.randn(6, 8)

    def cap(inp: torch.Tensor) -> dt.Graph:
        with torch.no_grad(), dt.capture(model, values="stats") as g:
            model(inp)
        return g

    single = cap(x)
    d = dt.diff(single, {0: cap(x[:2]), 1: cap(x[2:])})  # a batch split over two "ranks"
    assert d.agree
    p = diff_payload(d)
    relu = next(q for q in p["pairs"] if p["s"][q["a"]["target"]] == "aten.relu.default")
    (a_name, a_row), = relu["a"]["outs"]
    (b_name, b_row), = relu["b"]["outs"]
    assert a_row[0] == b_row[0] == 6 * 16  # the whole value's numel on both sides, not rank 0's part
    assert p["s"][b_name].endswith("(rank 0's part; stats of the whole)") and "f32[2, 16]" in p["s"][b_name]
    assert relu["via"] == "stats" and not relu["departs"]
