"""render.html without a browser: the payload's structure and size, and a page that names nothing it could fetch."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import models
import pytest
from models import needs_node_hook
from viewer_page import payload_rows

import dispatchtrace as dt
from dispatchtrace.cli import main
from dispatchtrace.render import _formats as formats
from dispatchtrace.render._html import SCRIPTS, WORKER, HtmlOptions, page, payload
from dispatchtrace.views import foldable_runs, noise_ops


def embedded(text: str) -> dict:
    """The payload as the page holds it (what the page's script parses)."""
    m = re.search(r'<script type="application/json" id="dt-data">(.*?)</script>', text, re.S)
    assert m is not None
    return json.loads(m.group(1))


def test_payload_holds_every_call_and_op_with_their_costs(cool: dt.Graph) -> None:
    p = payload(cool, HtmlOptions())
    c = cool.costs()
    calls, ops = payload_rows(p, "c"), payload_rows(p, "o")
    assert len(calls) == len(cool.calls) + 1 and len(ops) == len(cool.ops)
    for row, call in zip(calls[1:], cool.calls, strict=True):
        parent = row["parent"]
        assert row["path"] == call.path and row["type"] == call.type and (row["index"], row["repeat"]) == (call.index, call.repeat)
        assert (calls[parent]["path"] if parent else "") == (call.parent.path if call.parent is not cool.root else "")
        k = c.call(call)
        assert row["m"] == {"flops": k.flops, "self_flops": k.self_flops, "bytes": k.bytes, "self_bytes": k.self_bytes,
                            "params": k.params, "self_params": k.self_params}
    for row, op in zip(ops, cool.ops, strict=True):
        assert row["name"] == op.name and row["target"] == op.target and row["phase"] == "forward"
        assert row["m"] == {"flops": c.op(op).flops, "bytes": c.op(op).bytes}
        assert row["outs"] == [r.shape_text for r in op.outputs]
    assert p["noise"] == sorted(op.index for op in noise_ops(cool))


def test_edges_are_the_collapsed_graphs_op_level_dependencies(cool: dt.Graph) -> None:
    p = payload(cool, HtmlOptions())
    n = len(cool.ops)
    ends = {(p["e"][k], p["e"][k + 1]) for k in range(0, len(p["e"]), 3)}
    cg = cool.collapse("ops")
    want = set()
    for e in cg.edges:
        a = e.src.op.index if e.src.op is not None else -1
        b = e.dst.op.index if e.dst.op is not None else n
        want.add((a, b))
    assert ends == want
    add = cool.find_ops("aten.add*")[0]  # the merge of CoolCNN's two branches reads both max_pools
    assert sorted(cool.ops[a].target for a, b in ends if b == add.index) == ["aten.max_pool2d_with_indices.default"] * 2


def test_fold_runs_and_open_depth_come_from_the_views(resnet50: dt.Graph) -> None:
    p = payload(resnet50, HtmlOptions())
    ids = {id(call): i for i, call in enumerate(resnet50.calls, 1)}
    assert p["fold"] == [[ids[id(c)] for c in run.calls] for run in foldable_runs(resnet50, lambda _: True)]
    layer1 = [resnet50.calls[i - 1].path for i in next(r for r in p["fold"] if resnet50.calls[r[0] - 1].path == "layer1.1")]
    assert layer1 == ["layer1.1", "layer1.2"]
    assert p["open"] == 2  # ResNet's layers open, their bottlenecks closed
    assert payload(resnet50, HtmlOptions(fold=False))["fold"] == []
    assert payload(resnet50, HtmlOptions(depth=1))["open"] == 1
    assert payload(resnet50, HtmlOptions(depth="ops"))["open"] == -1


def test_resnet50_payload_is_compact(resnet50: dt.Graph) -> None:
    text = page(resnet50, HtmlOptions())
    data = len(json.dumps(embedded(text), separators=(",", ":")))
    assert data / len(resnet50.ops) < 300  # the target, before compression
    assert len(text.encode()) < data + 150_000  # the rest: script, styles and dagre (~50 KB)


def test_page_fetches_nothing_and_inlines_all_its_parts(cool: dt.Graph) -> None:
    text = page(cool, HtmlOptions(title="Cool <CNN>"))
    assert "<title>Cool &lt;CNN&gt; · dispatchtrace</title>" in text
    assert not re.search(r"<\w[^<>]*\s(src|href|srcset|action|poster|data)\s*=", text, re.I)  # no tag loads anything
    assigned = re.findall(r"\.(?:src|href)\s*=\s*([^;]+);", text)  # only the exports' own blob and data URLs
    assert sorted(assigned) == ['"data:image/svg+xml," + encodeURIComponent(DT.svgText(view))', "URL.createObjectURL(blob)"]
    # the layout worker is made from the page's own script elements, never from a file or URL
    assert re.findall(r"new Worker\(([^)]*)\)", text) == ["url"]
    assert 'URL.createObjectURL(new Blob([code], { type: "text/javascript" }))' in text
    assert not re.search(r"url\((?!#)", text) and "@import" not in text and "sourceMappingURL" not in text
    assert not re.search(r"\b(fetch|XMLHttpRequest|WebSocket|EventSource|importScripts|sendBeacon)\s*\(", text)
    urls = set(re.findall(r"\b(?:https?|wss?|ftp)://[^\s\"'<>)]+", text))
    assert urls == {"http://www.w3.org/2000/svg"}  # the SVG namespace name, never fetched
    assert text.count("<script") == 4 and "</script" not in text.split("<script>", 1)[1].replace("</script>", "")
    for name in (*SCRIPTS, WORKER):
        assert f"// ---- {name}" in text
    assert embedded(text) == json.loads(json.dumps(payload(cool, HtmlOptions(title="Cool <CNN>"))))


def test_render_and_the_cli_write_the_viewer(cool: dt.Graph, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert formats.for_path("m.html").name == "html" and formats.for_path("m.HTM").name == "html"
    out = cool.render(tmp_path / "cool.html", depth=1, fold=False)
    p = embedded(out.read_text(encoding="utf-8"))
    assert p["open"] == 1 and p["fold"] == [] and p["title"] == "CoolCNN"
    saved = cool.render(tmp_path / "cool.json")
    assert main(["render", str(saved), "-o", str(tmp_path / "again.html")]) == 0
    assert embedded((tmp_path / "again.html").read_text(encoding="utf-8"))["o"] == payload(cool, HtmlOptions())["o"]
    assert capsys.readouterr().out == f"wrote {tmp_path / 'again.html'}\n"


def test_a_notebook_shows_the_viewer_inline(cool: dt.Graph, monkeypatch: pytest.MonkeyPatch) -> None:
    from dispatchtrace.render import _notebook as notebook

    bundle = cool._repr_mimebundle_()  # `g` as a cell's last line
    m = re.fullmatch(r'<iframe srcdoc="([^"]*)" sandbox="allow-scripts allow-downloads" style="[^"]*"></iframe>', bundle["text/html"])
    assert m is not None and html.unescape(m.group(1)) == page(cool, HtmlOptions())
    assert bundle["text/plain"] == repr(cool)
    monkeypatch.setattr(notebook, "INLINE_MAX_OPS", len(cool.ops) - 1)  # too large to carry inline: the rest stays
    assert "text/html" not in cool._repr_mimebundle_() and "text/plain" in cool._repr_mimebundle_()


def test_an_op_that_is_not_forward_carries_its_phase(cool: dt.Graph, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every op row names its phase (the field ``phase`` of the payload's op rows)."""
    assert {row["phase"] for row in payload_rows(payload(cool, HtmlOptions()), "o")} == {"forward"}
    last = cool.ops[-1]
    monkeypatch.setattr(type(last), "phase", property(lambda op: "backward" if op is last else "forward"), raising=False)
    phases = [row["phase"] for row in payload_rows(payload(cool, HtmlOptions()), "o")]
    assert phases == ["forward"] * (len(cool.ops) - 1) + ["backward"]


@needs_node_hook
def test_the_viewer_shows_the_phase_it_is_given(tmp_path: Path) -> None:
    """A training step's page per phase: the backward page holds the backward ops under the calls they belong to."""
    import torch
    import torch.nn.functional as F

    model, x = models.CoolCNN(), torch.randn(1, 3, 32, 32)
    with dt.capture(model) as g:
        F.cross_entropy(model(x), torch.tensor([1])).backward()
    forward = embedded(g.render(tmp_path / "f.html").read_text())
    backward = embedded(g.render(tmp_path / "b.html", phase="backward").read_text())
    both = embedded(g.render(tmp_path / "a.html", phase="all").read_text())
    assert len(forward["o"]) == sum(op.phase == "forward" for op in g.ops)
    assert {row["phase"] for row in payload_rows(forward, "o")} == {"forward"}
    assert len(backward["o"]) == sum(op.phase == "backward" for op in g.ops)
    ops = payload_rows(backward, "o")
    assert {row["phase"] for row in ops} == {"backward"}
    conv = [c["path"] for c in payload_rows(backward, "c")].index("secondary_conv")
    assert any(row["call"] == conv and row["name"].startswith("convolution_backward") for row in ops)
    assert len(both["o"]) == len(g.ops) and backward["title"] == "CoolCNN (backward)" and forward["title"] == "CoolCNN"


def test_every_dropout_of_gpt2_in_eval_stands_on_its_tensors_path() -> None:
    """GPT-2's eval Dropouts (transformer.drop, attn.resid_dropout, mlp.dropout) run no op: each has edges in and out."""
    import torch

    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=100, n_positions=16)
    model = transformers.GPT2LMHeadModel(config).eval()
    with torch.no_grad(), dt.capture(model) as g:
        model(torch.zeros(1, 4, dtype=torch.int64))
    p, n = payload(g, HtmlOptions()), len(g.ops)
    ends = [(p["e"][k], p["e"][k + 1]) for k in range(0, len(p["e"]), 3)]
    drops = [i for i, c in enumerate([g.root, *g.calls]) if c.type == "Dropout" and not c.children]
    assert {"transformer.drop", "transformer.h.0.attn.resid_dropout"} <= {g.calls[i - 1].path for i in drops}
    for i in drops:
        assert any(b == n + 1 + i for _, b in ends) and any(a == n + 1 + i for a, _ in ends), g.calls[i - 1].path
