"""The HTML viewer (``.html``): one self-contained page that opens a capture collapsed and expands calls in place.

The page holds everything it needs: the capture as compact JSON (``payload``), the viewer's
own script and styles (``render/viewer/*.js``, ``*.css``, readable source files shipped as
package data) and the layout library (``render/viewer/vendor/dagre.min.js``, vendored by
``scripts/vendor-viewer.sh``). It names no URL it could fetch, so it opens from disk with the
network off. What the page decides is only how to draw: which calls fold (the views' fold
rule), the depth it opens at (``depth="auto"``'s choice), the edges (the collapsed graph's
op-level data dependencies) and the costs (``Graph.costs``) all come from Python.

>>> import torch, dispatchtrace as dt
>>> lin = torch.nn.Linear(4, 2)
>>> x = torch.ones(1, 4)
>>> with dt.capture(lin) as g:
...     _ = lin(x)
>>> p = payload(g, HtmlOptions())
>>> names = [f[0] for f in p["fields"]["o"]]  # the rows are positional; the payload names their fields
>>> [(o[names.index("name")], p["s"][o[names.index("target")]]) for o in p["o"]]
[('t', 'aten.t.default'), ('addmm', 'aten.addmm.default')]
>>> names[-2:], [m["name"] for m in p["metrics"]]
(['m.flops', 'm.bytes'], ['params', 'self_params', 'flops', 'self_flops', 'bytes', 'self_bytes'])
>>> e = p["e"]  # (producer, user, shape): an op's index, -1 the first input, 2 (one past the ops) the outputs (3 + i: call i ran no op)
>>> [(e[k], e[k + 1], p["s"][e[k + 2]]) for k in range(0, len(e), 3)]
[(-1, 1, 'input: f32[1, 4]'), (0, 1, 'f32[4, 2]'), (1, 2, 'f32[1, 2]')]
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any

from ..graph import AUTO_VIEWER_BOXES, Op, TensorRef
from ..views import call_label, collapse, foldable_runs, metrics, noise_ops, phase_graph, resolve_depth, run_label
from ._html_io import derived_io
from ._html_stats import STATS_TABLES, _num, values_payload

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..graph import Call, Depth, Graph, Op, PhaseView, TensorRef

#: the payload's layout version: bump when a field changes meaning (2: calls carry their labels, runs theirs;
#: 3: an edge end N + 1 + i is call i that ran no shown op; 4: rows are read through the field names in
#: ``fields``, the numbers of ``metrics`` among them)
PAYLOAD_VERSION = 4

#: The fields of the payload's rows, in order, each ``(name, kind)``: the one declaration that ``payload`` builds
#: the rows from and the page (``viewer/rows.js``) reads them through, sent in the payload as ``fields``. A kind
#: is ``""`` (the value as it is), ``"s"`` (an index into the string table ``s``, or null), ``"s*"`` (a list of
#: them), or another table's name (a row of it; ``*``: a list of rows). A call's and an op's row end with one
#: field per metric that applies (``m.<name>``; ``t.<name>``: its text, for a metric with its own ``format``).
CALL_FIELDS: tuple[tuple[str, str], ...] = (
    ("parent", ""), ("path", ""), ("type", "s"), ("index", ""), ("repeat", ""), ("src", "s"), ("ins", "s*"),
    ("outs", "s*"), ("label", "s"), ("title", "s"))
OP_FIELDS: tuple[tuple[str, str], ...] = (
    ("call", ""), ("name", ""), ("target", "s"), ("flags", ""), ("src", "s"), ("args", ""), ("outs", "s*"), ("phase", "s"))

#: the page's own script files, in the order they are inlined (each one defines part of ``DT``)
SCRIPTS = ("rows.js", "model.js", "stats.js", "layout.js", "draw.js", "map.js", "export.js", "time.js", "panel.js", "main.js")

#: the layout code that also runs in the page's Web Worker (with dagre), in its own script element
WORKER = "group.js"

FLAG_INPLACE, FLAG_VIEW = 1, 2


@dataclass(frozen=True, slots=True, kw_only=True)
class HtmlOptions:
    """What the viewer takes: the ``depth`` it opens at (``"auto"``: the deepest at which the picture
    has at most ``AUTO_VIEWER_BOXES`` boxes (``graph/_depth.py``), by the diagrams' rule), ``fold`` repeated blocks at first,
    ``noise`` ops shown, the page ``title``, the ``phase`` of a training step it shows (``views/_phases.py``)."""

    depth: Depth = "auto"
    fold: bool = True
    noise: bool = False
    title: str | None = None
    phase: PhaseView = "forward"


class _Strings:
    """One table of the strings the payload repeats (types, targets, shapes, sources); ints index it."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self.index: dict[str, int] = {}

    def __call__(self, s: str) -> int:
        k = self.index.get(s)
        if k is None:
            k = self.index[s] = len(self.items)
            self.items.append(s)
        return k


def _open_depth(graph: Graph, o: HtmlOptions) -> int:
    """Calls shallower than this are open when the page loads (``-1``: every call open, op level)."""
    depth, _ = resolve_depth(graph, o.depth, max_nodes=AUTO_VIEWER_BOXES, fold=o.fold, noise=o.noise)
    return -1 if depth == "ops" else int(depth)


def passes_on(hidden: frozenset[Op] | set[Op]) -> Callable[[Call], bool]:
    """The predicate of the calls the page draws on a tensor's path: leaf calls that ran no shown op (none
    but ``hidden``'s, the noise ops the page leaves out: a ``Dropout`` in eval), collapsed so that the edges
    run through them (``views/_collapse.py``)."""
    return lambda call: all(isinstance(x, Op) and x in hidden for x in call.children)


def payload(graph: Graph, o: HtmlOptions) -> dict[str, Any]:
    """The capture as the page reads it (the field list is in ``docs/viewer.md``)."""
    s = _Strings()
    op_metrics, call_metrics = metrics(graph, "op", "viewer"), metrics(graph, "call", "viewer")
    call_ids: dict[int, int] = {id(graph.root): 0}
    for i, call in enumerate(graph.calls, 1):
        call_ids[id(call)] = i

    def ref(r: TensorRef) -> int:
        return s(f"{r.name}: {r.shape_text}" if r.name and r.kind != "activation" else r.shape_text)

    def src(x: Op | Call) -> int | None:
        return None if x.source is None else s(str(x.source))

    def arg(v: Any) -> str:
        if isinstance(v, TensorRef):
            return f"${ref(v)}"
        if isinstance(v, (list, tuple)):
            inner = ", ".join(arg(x) for x in v)
            return f"[{inner}]" if isinstance(v, list) else f"({inner}{',' if len(v) == 1 else ''})"
        return repr(v) if isinstance(v, str) else str(v)

    hidden = frozenset() if o.noise else noise_ops(graph)
    io = derived_io(graph, hidden)  # a phase page's calls: what their ops read and leave (render/_html_io.py)
    def numbers(ms: Any, x: Op | Call, fn: str) -> list[Any]:
        out: list[Any] = []
        for m in ms:
            v = getattr(m, fn)(graph, x)
            j = _num(v) if type(v) is float else v  # JSON.parse reads no Infinity: "inf" as text
            out += [j, None if v is None else s(m.text(v))] if m.format is not None else [j]
        return out

    call_names, op_names = [n for n, _ in CALL_FIELDS], [n for n, _ in OP_FIELDS]
    calls = []
    for call in [graph.root, *graph.calls]:
        ins, outs = io.get(call) or ((graph.inputs, graph.outputs) if call.parent is None else (call.inputs, call.outputs))
        fields = {"parent": -1 if call.parent is None else call_ids[id(call.parent)], "path": call.path,
                  "type": s(call.type), "index": call.index, "repeat": call.repeat, "src": src(call),
                  "ins": [ref(r) for r in ins], "outs": [ref(r) for r in outs], "label": s(call.label),
                  "title": s(call_label(call))}
        calls.append([fields[n] for n in call_names] + numbers(call_metrics, call, "call"))
    ops = []
    for op in graph.ops:
        args = [arg(a) for a in op.args] + [f"{key}={arg(v)}" for key, v in op.kwargs.items()]
        fields = {"call": call_ids[id(op.call)], "name": op.name, "target": s(op.target),
                  "flags": (FLAG_INPLACE if op.mutated else 0) | (FLAG_VIEW if op.is_view else 0), "src": src(op),
                  "args": ", ".join(args), "outs": [ref(r) for r in op.outputs], "phase": s(op.phase)}
        ops.append([fields[n] for n in op_names] + numbers(op_metrics, op, "op"))
    # a leaf call that ran no shown op (a Dropout in eval) is a node on the path of the tensor it passes on,
    # as in the collapsed views: an edge end N + 1 + its call id (N: the outputs)
    cg = collapse(graph, "ops", noise=o.noise, predicate=passes_on(hidden))
    inputs = [n for n in cg.nodes if n.kind == "input"]
    end = {id(n): -1 - i for i, n in enumerate(inputs)}
    end.update({id(n): len(graph.ops) + 1 + call_ids[id(n.call)] for n in cg.nodes if n.kind == "call" and n.call is not None})
    edges: list[int] = []
    for e in cg.edges:
        a = e.src.op.index if e.src.op is not None else end.get(id(e.src))
        b = e.dst.op.index if e.dst.op is not None else (len(graph.ops) if e.dst.kind == "output" else end.get(id(e.dst)))
        if a is None or b is None:
            continue
        edges += [a, b, ref(e.tensors[0]) if e.tensors else -1]
    runs = foldable_runs(graph, lambda _: True)
    def metric_fields(ms: Any) -> list[tuple[str, str]]:
        return [f for m in ms for f in ((f"m.{m.name}", ""), *(((f"t.{m.name}", "s"),) if m.format is not None else ()))]

    return {
        "v": PAYLOAD_VERSION,
        "fields": {"c": [list(f) for f in (*CALL_FIELDS, *metric_fields(call_metrics))],
                   "o": [list(f) for f in (*OP_FIELDS, *metric_fields(op_metrics))],
                   **{k: [list(f) for f in v] for k, v in STATS_TABLES.items()}},
        "metrics": [{"name": m.name, "label": m.label, "unit": m.unit, "unknown": m.unknown, "op": m in op_metrics, "call": m in call_metrics,
                     "colour": m.colour, "fold": m.fold} for m in metrics(graph, None, "viewer")],
        "title": o.title or _title(graph),
        "s": s.items,
        "c": calls,
        "o": ops,
        "e": edges,
        "in": [ref(n.ref) for n in inputs if n.ref is not None],
        "out": [ref(r) for r in graph.outputs],
        "fold": [[call_ids[id(x)] for x in run.calls] for run in runs] if o.fold else [],
        "fl": [s(run_label(run.calls)) for run in runs] if o.fold else [],
        "noise": [] if o.noise else sorted(op.index for op in noise_ops(graph)),
        "open": _open_depth(graph, o),
        **values_payload(graph, s),  # vals, and with stats st, cst, nf (render/_html_stats.py)
    }


def _title(graph: Graph) -> str:
    """The model's type, with the phase shown when the graph is a phase view of a training step (``views/_phases.py``)."""
    name = graph.calls[0].type if graph.calls else "capture"
    phase = getattr(graph, "phase", "forward")
    return name if phase == "forward" else f"{name} ({phase})"


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath("viewer", name).read_text(encoding="utf-8")


def _inline(code: str) -> str:
    """Script text that is safe inside ``<script>``: no ``</script`` can end it early."""
    return code.replace("</script", "<\\/script").replace("</SCRIPT", "<\\/SCRIPT")


def page(graph: Graph, o: HtmlOptions) -> str:
    """The whole page as text."""
    # JSON with every "<" escaped: nothing in the data can close the script element
    data = json.dumps(payload(graph, o), separators=(",", ":"), ensure_ascii=False).replace("<", "\\u003c")
    title = html.escape(o.title or (graph.calls[0].type if graph.calls else "capture"))
    scripts = "\n".join(f"// ---- {name}\n{_asset(name)}" for name in SCRIPTS)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
        f"<title>{title} · dispatchtrace</title>\n"
        f"<style>\n{_asset('viewer.css')}</style>\n</head>\n<body>\n{_asset('body.html')}"
        f"<script type=\"application/json\" id=\"dt-data\">{data}</script>\n"
        f"<script id=\"dt-dagre\">\n// @dagrejs/dagre {_asset('vendor/VERSIONS').split()[-1]} (MIT licence, see dagre.LICENSE)\n"
        f"{_inline(_asset('vendor/dagre.min.js'))}\n</script>\n"
        f"<script id=\"dt-group\">\n// ---- {WORKER}\n{_inline(_asset(WORKER))}\n</script>\n"
        f"<script>\n{_inline(scripts)}\n</script>\n</body></html>\n"
    )


def write(graph: Graph, o: HtmlOptions) -> bytes:
    """The page's bytes (UTF-8), of the phase view ``o.phase`` of ``graph``."""
    return page(phase_graph(graph, o.phase), o).encode("utf-8")
