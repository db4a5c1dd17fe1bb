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
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from .._text import human, shapes
from ..graph import Depth, check_depth
from ._attrs import attributes, attributes_text, trainable_frozen
from ._costs import costs
from ._phases import PhaseGraph, has_backward, has_training, phase_graph

if TYPE_CHECKING:
    from ..graph import Call, Graph, PhaseView

TRAINING_FIELDS = ("forward_flops", "backward_flops", "saved")
"""``Row`` fields of a training step (``Summary.training``); ``rows()`` leaves them out otherwise."""

LIVE_FIELDS = ("trainable", "frozen", "attrs")
VALUES_FIELDS = ("norm", "nonfinite")
"""The fields of a capture with ``values="stats"``: the L2 norm of a call's first output, its outputs' NaN and Inf."""
"""``Row`` fields read from the live modules when the summary is made: ``None`` on a loaded capture."""


@dataclass(frozen=True, slots=True)
class Row:
    """One module call in the summary; plain values (``None`` where unknown).

    ``label`` names the call fully (``transformer.h.3.ln_1``, ``layer1.0.relu#2`` when the module
    ran more than once). ``input``: the shapes the call was given. ``trainable`` / ``frozen``:
    parameter elements that require grad and that do not, and ``attrs`` the module attributes of
    ``views/_attrs.py``'s ``ATTRIBUTES`` it has (``{"kernel_size": (3, 3), "stride": (2, 2), ...}``); these
    three are read from the live module when the summary is made, ``None`` once it is gone (a
    loaded capture). ``bytes`` is ``None`` when an op inside has a shape that cannot be sized.
    On a training step (a capture with ops outside the forward):
    ``forward_flops`` the call's forward ops, ``backward_flops`` the backward and recompute ops that
    belong to it or to a call inside it (``op.origin``, gradient accumulation with its parameter's
    module: ``views/_phases.py``), ``saved`` the bytes autograd saved for backward inside it
    (``views/_memory.py``); ``None`` otherwise. With ``capture(values="stats")``: ``norm`` the L2 norm of the
    call's first output, ``nonfinite`` the NaN and Inf elements of its outputs (``None``: no stats).
    """

    label: str
    path: str
    index: int
    type: str
    depth: int
    output: str
    params: int | None
    flops: int | None
    output_bytes: int | None
    bytes: int | None
    input: str = ""
    trainable: int | None = None
    frozen: int | None = None
    attrs: dict[str, Any] | None = None
    forward_flops: int | None = None
    backward_flops: int | None = None
    saved: int | None = None
    norm: float | None = None
    nonfinite: int | None = None


def _shape(call: Call) -> str:
    outs = [r.label for r in call.outputs]
    if len(outs) > 2:
        return f"{outs[0]} (+{len(outs) - 1})"
    return ", ".join(outs)


def _inputs(refs: Any) -> str:
    return shapes([r.label for r in refs], limit=2)


def _known(n: int | None, unit: str = "") -> str:
    """``human(n)``, with ``?`` for an unknown count (``-`` stays for FLOPs: no formula)."""
    return "?" if n is None else human(n, unit)


class Summary:
    """Rows of a capture's module calls and the capture's totals; ``str()`` is the table."""

    def __init__(self, rows: list[Row], total: Row, *, training: bool = False, values: bool = False) -> None:
        self._rows = rows
        self.total = total
        self.training = training
        """Whether the table has the training columns (``Fwd FLOPs``, ``Bwd FLOPs``, ``Saved``)."""
        self.values = values
        """Whether the table has the statistics columns (``Out norm``, ``NaN/Inf``: ``capture(values="stats")``)."""

    def __len__(self) -> int:
        return len(self._rows)

    def __iter__(self) -> Iterator[Row]:
        return iter(self._rows)

    def rows(self) -> list[dict[str, Any]]:
        """Every row as a plain dict: ``pandas.DataFrame(g.summary().rows())`` (the training fields only on a training step)."""
        rows = [asdict(r) for r in self._rows]
        drop = (TRAINING_FIELDS if not self.training else ()) + (VALUES_FIELDS if not self.values else ())
        for row in rows:
            for name in drop:
                del row[name]
        return rows

    def _cells(self, *, indent: bool = True) -> list[list[str]]:
        extra = (["Fwd FLOPs", "Bwd FLOPs", "Saved"] if self.training else []) + (["Out norm", "NaN/Inf"] if self.values else [])
        out = [["Call", "Type", "Input", "Output", "Params", "Trainable", "Frozen", "FLOPs", "Out bytes", "Written",
                *extra, "Attributes"]]
        for r in [*self._rows, self.total]:
            name = "  " * r.depth + r.label if indent and r is not self.total else r.label
            attrs = "" if r is self.total else attributes_text(r.attrs)
            more = [human(r.forward_flops, "FLOPs"), human(r.backward_flops, "FLOPs"), human(r.saved, "B")] if self.training else []
            if self.values:
                more += ["-" if r.norm is None else f"{r.norm:.4g}", "-" if r.nonfinite is None else str(r.nonfinite)]
            out.append([name, r.type, r.input, r.output, _known(r.params), _known(r.trainable), _known(r.frozen),
                        human(r.flops, "FLOPs"), _known(r.output_bytes, "B"), _known(r.bytes, "B"), *more, attrs])
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
    ``FlopCounterMode``'s). A training step also gets the ``forward_flops``, ``backward_flops`` and
    ``saved`` columns (``Row``), whatever the phase.
    """
    check_depth(depth)
    view = phase_graph(graph, phase)
    c = costs(view)
    training = has_training(graph)
    split = _Split(graph) if training else None
    rows = []
    groups = view.groups if isinstance(view, PhaseGraph) else set()
    for call in view.calls:
        if (isinstance(depth, int) and call.depth > depth) or call in groups:  # module calls only, not "all"'s groups
            continue
        cost = c.call(call)
        module = call.module
        trainable, frozen = trainable_frozen(module)
        more = split.of(_original(view, call)) if split is not None else (None, None, None)
        rows.append(Row(call.label, call.path, call.index, call.type, call.depth, _shape(call),
                        cost.params, cost.flops, cost.output_bytes, cost.bytes if c.sized(call) else None,
                        _inputs(call.inputs), trainable, frozen, attributes(module), *more,
                        *_values(graph, call.outputs)))
    t = c.total
    trainable, frozen = _total_trainable(view)
    more = split.of(graph.root) if split is not None else (None, None, None)
    written = t.bytes if c.sized(view.root) else None
    total = Row("Total", "", 0, "", -1, "", t.params, t.flops, t.output_bytes, written,
                _inputs(view.inputs), trainable, frozen, None, *more, *_values(graph, view.outputs))
    return Summary(rows, total, training=training, values=bool(graph.stats))


def _values(graph: Graph, outputs: Any) -> tuple[float | None, int | None]:
    """``(norm, nonfinite)`` of a call's outputs from ``graph.stats`` (``None`` where there are none)."""
    found = [s for s in (graph.stats.get(r.id) for r in outputs) if s is not None]
    if not found:
        return None, None
    return found[0].norm, sum(s.nonfinite for s in found)


def _original(view: Graph, call: Call) -> Call:
    return view.original[call] if isinstance(view, PhaseGraph) else call


class _Split:
    """Forward FLOPs, backward FLOPs (by origin) and saved bytes of each capture call of a training step."""

    def __init__(self, graph: Graph) -> None:
        self.memory = graph.memory()
        self.flops: list[dict[Call, int | None]] = []
        for phase in ("forward", "backward") if has_backward(graph) else ("forward",):
            view = phase_graph(graph, phase)  # type: ignore[arg-type]
            c = costs(view)
            pairs = [(view.root, graph.root), *((v, _original(view, v)) for v in view.calls)]
            self.flops.append({orig: c.call(v).flops for v, orig in pairs})

    def of(self, call: Call) -> tuple[int | None, int | None, int | None]:
        back = self.flops[1].get(call) if len(self.flops) > 1 else None
        return self.flops[0].get(call), back, self.memory.call(call).saved


def _total_trainable(graph: Graph) -> tuple[int | None, int | None]:
    """Trainable and frozen elements of every called module's parameters, each tensor once."""
    seen: dict[int, Any] = {}
    groups = graph.groups if isinstance(graph, PhaseGraph) else set()
    for call in graph.calls:
        if call in groups:
            continue
        module = call.module
        if module is None:
            return None, None
        for p in module.parameters():
            seen[id(p)] = p
    trainable = sum(p.numel() for p in seen.values() if p.requires_grad)
    return trainable, sum(p.numel() for p in seen.values()) - trainable
