"""Summary table: one row per module call, in order, with shapes, parameters, FLOPs, bytes and attributes.

>>> import torch, dispatchtrace as dt
>>> model, x = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU()), torch.ones(8, 64)
>>> with dt.capture(model) as g:
...     y = model(x)
>>> print(summary(g))
Call        Type        Input       Output      Params  Trainable  Frozen      FLOPs  Out bytes  Written  Attributes
Sequential  Sequential  f32[8, 64]  f32[8, 32]   2.1 k      2.1 k       0  33 kFLOPs     1.0 kB   2.0 kB
  0         Linear      f32[8, 64]  f32[8, 32]   2.1 k      2.1 k       0  33 kFLOPs     1.0 kB   1.0 kB
  1         ReLU        f32[8, 32]  f32[8, 32]       0          0       0          -     1.0 kB   1.0 kB
Total                   f32[8, 64]               2.1 k      2.1 k       0  33 kFLOPs     1.0 kB   2.0 kB
>>> summary(g).rows()[1]["flops"]
32768
"""

from __future__ import annotations

import html
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._text import human, shapes  # noqa: F401 - human: views/_costs.py reads it from here for now
from ..graph import Depth, check_depth
from ._attrs import attributes, attributes_text
from ._metrics import Metric, metrics
from ._phases import PhaseGraph, has_training, phase_graph

if TYPE_CHECKING:
    from ..graph import Call, Graph, PhaseView

LIVE_FIELDS = ("trainable", "frozen", "attrs")
"""``rows()`` keys read from the live modules when the summary is made: ``None`` on a loaded capture."""


@dataclass(frozen=True, slots=True)
class Row:
    """One module call in the summary; plain values (``None`` where unknown).

    ``label`` names the call fully (``transformer.h.3.ln_1``, ``layer1.0.relu#2`` when the module
    ran more than once). ``input``: the shapes the call was given. ``attrs``: the module attributes of
    ``views/_attrs.py``'s ``ATTRIBUTES`` it has (``{"kernel_size": (3, 3), "stride": (2, 2), ...}``), read
    from the live module when the summary is made, ``None`` once it is gone (a loaded capture).
    ``metrics``: the value of each metric that applies (``views/_metrics.py``), by name, also read as
    an attribute (``row.flops``): ``params``, ``trainable`` / ``frozen`` (parameter elements that require
    grad and that do not, ``None`` on a loaded capture), ``flops``, ``output_bytes``, ``bytes`` (``None`` when
    an op inside has a shape that cannot be sized); on a training step ``forward_flops``, ``backward_flops``
    (the backward and recompute ops that belong to the call or to a call inside it: ``views/_phases.py``)
    and ``saved`` (``views/_memory.py``); with ``capture(values="stats")`` ``norm`` (the L2 norm of the
    call's first output) and ``nonfinite`` (the NaN and Inf elements of its outputs).
    """

    label: str
    path: str
    index: int
    type: str
    depth: int
    output: str
    input: str = ""
    attrs: dict[str, Any] | None = None
    metrics: dict[str, Any] = field(default_factory=dict)

    def __getattr__(self, name: str) -> Any:
        """A metric's value by its name (``row.flops``); ``None`` for a metric that does not apply."""
        if name.startswith("__") or name == "metrics":
            raise AttributeError(name)
        return self.metrics.get(name)


def _shape(call: Call) -> str:
    outs = [r.shape_text for r in call.outputs]
    if len(outs) > 2:
        return f"{outs[0]} (+{len(outs) - 1})"
    return ", ".join(outs)


def _inputs(refs: Any) -> str:
    return shapes([r.shape_text for r in refs], limit=2)


class Summary:
    """Rows of a capture's module calls and the capture's totals; ``str()`` is the table."""

    def __init__(self, rows: list[Row], total: Row, columns: list[Metric] | tuple[Metric, ...] = (), *,
                 training: bool = False, values: bool = False) -> None:
        self._rows = rows
        self.total = total
        self.columns = tuple(columns)
        """The metrics of the table, in order: those that apply to the capture (``views/_metrics.py``)."""
        self.training = training
        """Whether the capture is a training step (the table then has ``Fwd FLOPs``, ``Bwd FLOPs``, ``Saved``)."""
        self.values = values
        """Whether the capture has statistics (the table then has ``Out norm``, ``NaN/Inf``: ``capture(values="stats")``)."""

    def __len__(self) -> int:
        return len(self._rows)

    def __iter__(self) -> Iterator[Row]:
        return iter(self._rows)

    def rows(self) -> list[dict[str, Any]]:
        """Every row as a plain dict: ``pandas.DataFrame(g.summary().rows())``, one key per metric that applies."""
        return [{"label": r.label, "path": r.path, "index": r.index, "type": r.type, "depth": r.depth,
                 "output": r.output, "input": r.input, **r.metrics, "attrs": r.attrs} for r in self._rows]

    def _cells(self, *, indent: bool = True) -> list[list[str]]:
        out = [["Call", "Type", "Input", "Output", *(m.header for m in self.columns), "Attributes"]]
        for r in [*self._rows, self.total]:
            name = "  " * r.depth + r.label if indent and r is not self.total else r.label
            attrs = "" if r is self.total else attributes_text(r.attrs)
            out.append([name, r.type, r.input, r.output, *(m.text(r.metrics.get(m.name)) for m in self.columns), attrs])
        return out

    def __str__(self) -> str:
        cells = self._cells()
        widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
        right = set(range(4, len(cells[0]) - 1))
        lines = []
        for row in cells:
            parts = [c.rjust(w) if i in right else c.ljust(w)
                     for i, (c, w) in enumerate(zip(row, widths, strict=True))]
            lines.append("  ".join(parts).rstrip())
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        """Jupyter display: the table as an HTML table (as a pandas DataFrame shows itself), each call
        indented by its depth, the counts right-aligned, the total row last; ``str()`` stays the text."""
        cells = self._cells(indent=False)
        right = set(range(4, len(cells[0]) - 1))

        def row(tag: str, values: list[str], depth: int = 0, *, total: bool = False) -> str:
            out = []
            for i, value in enumerate(values):
                style = ["text-align: right"] if i in right else ["text-align: left"]
                if i == 0 and depth > 0:
                    style.append(f"padding-left: {depth * 1.2 + 0.5:.1f}em")
                if total:
                    style.append("font-weight: bold")
                out.append(f'<{tag} style="{"; ".join(style)}">{html.escape(value.strip())}</{tag}>')
            return f"<tr>{''.join(out)}</tr>"

        depths = [r.depth for r in self._rows]
        body = [row("td", values, depth) for values, depth in zip(cells[1:-1], depths, strict=True)]
        body.append(row("td", cells[-1], total=True))
        return (f'<table class="dispatchtrace-summary">\n<thead>{row("th", cells[0])}</thead>\n'
                f"<tbody>\n{chr(10).join(body)}\n</tbody>\n</table>")

    def markdown(self) -> str:
        """The same table as GitHub markdown."""
        cells = self._cells(indent=False)
        lines = ["| " + " | ".join(cells[0]) + " |", "|" + "---|" * 4 + "---:|" * (len(cells[0]) - 5) + "---|"]
        lines += ["| " + " | ".join(c.strip().replace("|", "\\|") or " " for c in row) + " |" for row in cells[1:]]
        return "\n".join(lines)


def summary(graph: Graph, depth: Depth = "all", *, phase: PhaseView = "forward") -> Summary:
    """Table of the module calls at ``depth`` or shallower, in the order they ran.

    ``depth`` as in ``graph/_depth.py``; the table has no op rows, so ``"all"`` (the default),
    ``"ops"`` and ``"auto"`` all list every call. ``phase``: the rows and the ``FLOPs``, bytes
    columns of that phase view of a training step (``views/_phases.py``: ``"backward"`` lists the
    calls backward ops belong to, ``"all"`` counts every op, the total then equals
    ``FlopCounterMode``'s). The columns are the metrics that apply (``views/_metrics.py``): a training
    step also gets ``forward_flops``, ``backward_flops`` and ``saved``, whatever the phase.
    """
    check_depth(depth)
    view = phase_graph(graph, phase)
    columns = metrics(graph, "call", "summary")
    computed = [(m.name, m.call) for m in columns]
    rows = []
    groups = view.groups if isinstance(view, PhaseGraph) else set()
    for call in view.calls:
        if (isinstance(depth, int) and call.depth > depth) or call in groups:  # module calls only, not "all"'s groups
            continue
        values = {name: fn(view, call) for name, fn in computed}  # type: ignore[misc]
        rows.append(Row(call.label, call.path, call.index, call.type, call.depth, _shape(call), _inputs(call.inputs),
                        attributes(call.module), values))
    root = view.root
    total = Row("Total", "", 0, "", -1, "", _inputs(view.inputs), None,
                {name: fn(view, root) for name, fn in computed})  # type: ignore[misc]
    return Summary(rows, total, columns, training=has_training(graph), values=bool(graph.stats))
