"""A metric declared once shows in every view that shows numbers, and goes when it is unregistered: the example
to follow for a new per-op or per-call number (docs/architecture.md, "Where new things go")."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import torch
import torch.nn as nn
from viewer_page import payload_rows

import dispatchtrace as dt
from dispatchtrace.render._html import HtmlOptions, payload
from dispatchtrace.render._model_explorer import ModelExplorerOptions, model_explorer
from dispatchtrace.views import all_metrics, metrics


def out_elems_of_op(graph: dt.Graph, op: dt.Op) -> int:
    """The computation of an op: ``(graph, op) -> value``."""
    return sum(r.numel for r in op.outputs)


def out_elems_of_call(graph: dt.Graph, call: dt.Call) -> int:
    """The computation of a call (``graph.root`` too: the total), ``(graph, call) -> value``."""
    return sum(r.numel for r in (graph.outputs if call.parent is None else call.outputs))


OUT_ELEMS = dt.Metric(name="out_elems", header="Out elems", unit="el", title="elements of the results",
                      op=out_elems_of_op, call=out_elems_of_call)


@pytest.fixture
def registered() -> Iterator[dt.Metric]:
    metric = dt.register_metric(OUT_ELEMS)
    try:
        yield metric
    finally:
        if "out_elems" in {m.name for m in all_metrics()}:
            dt.unregister_metric("out_elems")


@pytest.fixture(scope="module")
def g() -> dt.Graph:
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 8))
    with dt.capture(model) as g:
        model(torch.ones(4, 64))
    return g


def _everywhere(g: dt.Graph) -> dict[str, object]:
    """The metric's traces in every place that lists metrics."""
    s = g.summary()
    p = payload(g, HtmlOptions())
    mx = json.loads(model_explorer(g, ModelExplorerOptions()))["graphs"][0]
    return {"text": str(s).splitlines()[0], "rows": s.rows()[0], "html": s._repr_html_(), "markdown": s.markdown(),
            "payload": [m["name"] for m in p["metrics"]], "calls": payload_rows(p, "c")[2]["m"], "ops": next(o for o in payload_rows(p, "o") if o["name"] == "addmm")["m"],
            "mx ops": dict((a["key"], a["value"]) for a in next(n for n in mx["nodes"] if n["id"] == "addmm")["attrs"]),
            "mx calls": mx["groupNodeAttributes"]["Sequential/0"]}


def test_a_registered_metric_shows_everywhere_and_goes_when_unregistered(g: dt.Graph, registered: dt.Metric) -> None:
    first = g.calls[1]  # the first Linear: 4 x 32 outputs
    there = _everywhere(g)
    assert there["text"].split()[-2:] == ["elems", "Attributes"] and "Out elems" in there["text"]  # the last column
    assert "     128 el" in str(g.summary()).splitlines()[2]  # human(128, "el"), right-aligned
    assert there["rows"]["out_elems"] == 8 * 4 and g.summary().total.out_elems == 8 * 4
    assert ">Out elems</th>" in there["html"] and ">128 el</td>" in there["html"]
    assert "| Out elems |" in there["markdown"]
    assert "out_elems" in there["payload"] and there["calls"]["out_elems"] == 4 * 32 and there["ops"]["out_elems"] == 4 * 32
    assert there["mx ops"]["out_elems"] == str(4 * 32) and there["mx calls"]["out_elems"] == str(4 * 32)
    assert first.outputs[0].numel == 4 * 32
    dt.unregister_metric("out_elems")
    gone = _everywhere(g)
    assert "Out elems" not in gone["text"] and "out_elems" not in gone["rows"] and "Out elems" not in gone["html"]  # type: ignore[operator]
    assert "Out elems" not in gone["markdown"] and "out_elems" not in gone["payload"]  # type: ignore[operator]
    assert "out_elems" not in gone["calls"] and "out_elems" not in gone["ops"]  # type: ignore[operator]
    assert "out_elems" not in gone["mx ops"] and "out_elems" not in gone["mx calls"]  # type: ignore[operator]


def test_when_decides_which_captures_a_metric_applies_to(g: dt.Graph) -> None:
    dt.register_metric(dt.Metric(name="only_big", header="Big", call=out_elems_of_call, when=lambda graph: len(graph.ops) > 100))
    try:
        assert "only_big" not in {m.name for m in metrics(g)} and "Big" not in str(g.summary())
    finally:
        dt.unregister_metric("only_big")


def test_the_built_in_columns_are_metrics_and_the_summary_names_none() -> None:
    names = [m.name for m in all_metrics()]
    assert names[:12] == ["params", "self_params", "trainable", "frozen", "flops", "self_flops", "output_bytes", "bytes",
                          "self_bytes", "forward_flops", "backward_flops", "saved"]
    assert {"norm", "nonfinite"} <= set(names)


def test_registering_wrongly_says_what_to_do(registered: dt.Metric) -> None:
    with pytest.raises(ValueError, match=r"a metric named 'out_elems' is already registered; unregister it first \(dt.unregister_metric"):
        dt.register_metric(OUT_ELEMS)
    with pytest.raises(ValueError, match="no metric named 'nope' is registered; the metrics are: params, "):
        dt.unregister_metric("nope")
    with pytest.raises(ValueError, match="computes nothing: give it op=.* and/or call="):
        dt.register_metric(dt.Metric(name="empty", header="Empty"))
    with pytest.raises(ValueError, match="must be an identifier"):
        dt.register_metric(dt.Metric(name="two words", header="X", call=out_elems_of_call))
    with pytest.raises(TypeError, match="call must be a function, got int 3"):
        dt.register_metric(dt.Metric(name="bad", header="X", call=3))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="shown must be a tuple of 'summary', 'viewer', 'model_explorer'"):
        dt.register_metric(dt.Metric(name="bad", header="X", call=out_elems_of_call, shown=("tree",)))
    with pytest.raises(TypeError, match="register_metric takes a dt.Metric, got str"):
        dt.register_metric("flops")  # type: ignore[arg-type]
    assert "bad" not in {m.name for m in all_metrics()}
