"""Summary table: one row per module call, in order, with output shape, parameters, FLOPs and bytes.

>>> import torch, dispatchtrace as dt
>>> model, x = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU()), torch.ones(8, 64)
>>> with dt.capture(model) as g:
...     y = model(x)
>>> print(summary(g))
Call        Type        Output      Params      FLOPs  Out bytes  Written
Sequential  Sequential  f32[8, 32]   2.1 k  33 kFLOPs     1.0 kB   2.0 kB
  0         Linear      f32[8, 32]   2.1 k  33 kFLOPs     1.0 kB   1.0 kB
  1         ReLU        f32[8, 32]       0          -     1.0 kB   1.0 kB
Total                                2.1 k  33 kFLOPs     1.0 kB   2.0 kB
>>> summary(g).rows()[1]["flops"]
32768
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from ..depth import Depth, check_depth
from .costs import costs

if TYPE_CHECKING:
    from ..graph import Call, Graph

_PREFIXES = ("", "k", "M", "G", "T", "P", "E")


def human(n: int | None, unit: str = "") -> str:
    """A count in SI units with two or three significant digits; ``None`` is ``-``.

    >>> human(4_089_184_256, "FLOPs"), human(98_000_000, "B"), human(512, "B"), human(None)
    ('4.1 GFLOPs', '98 MB', '512 B', '-')
    >>> human(25_557_032)
    '25.6 M'
    """
    if n is None:
        return "-"
    value, i = float(n), 0
    while abs(value) >= 999.5 and i < len(_PREFIXES) - 1:
        value /= 1000
        i += 1
    if i == 0:
        text = str(n)
    elif abs(value) < 10 or (abs(value) < 100 and unit == ""):
        text = f"{value:.1f}"
    else:
        text = f"{value:.0f}"
    return f"{text} {_PREFIXES[i]}{unit}".rstrip()


@dataclass(frozen=True, slots=True)
class Row:
    """One module call in the summary; plain values (``None`` where unknown)."""

    label: str
    path: str
    index: int
    type: str
    depth: int
    output: str
    params: int | None
    flops: int | None
    output_bytes: int | None
    bytes: int


def _shape(call: Call) -> str:
    outs = [r.label for r in call.outputs]
    if len(outs) > 2:
        return f"{outs[0]} (+{len(outs) - 1})"
    return ", ".join(outs)


class Summary:
    """Rows of a capture's module calls and the capture's totals; ``str()`` is the table."""

    def __init__(self, rows: list[Row], total: Row) -> None:
        self._rows = rows
        self.total = total

    def __len__(self) -> int:
        return len(self._rows)

    def __iter__(self) -> Iterator[Row]:
        return iter(self._rows)

    def rows(self) -> list[dict[str, Any]]:
        """Every row as a plain dict: ``pandas.DataFrame(g.summary().rows())``."""
        return [asdict(r) for r in self._rows]

    def _cells(self, *, indent: bool = True) -> list[list[str]]:
        out = [["Call", "Type", "Output", "Params", "FLOPs", "Out bytes", "Written"]]
        for r in [*self._rows, self.total]:
            name = "  " * r.depth + _tail(r) if indent and r is not self.total else r.label
            out.append([name, r.type, r.output, human(r.params), human(r.flops, "FLOPs"),
                        human(r.output_bytes, "B"), human(r.bytes, "B")])
        return out

    def __str__(self) -> str:
        cells = self._cells()
        widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
        right = {3, 4, 5, 6}
        lines = []
        for row in cells:
            parts = [c.rjust(w) if i in right else c.ljust(w)
                     for i, (c, w) in enumerate(zip(row, widths, strict=True))]
            lines.append("  ".join(parts).rstrip())
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)

    def markdown(self) -> str:
        """The same table as GitHub markdown."""
        cells = self._cells(indent=False)
        lines = ["| " + " | ".join(cells[0]) + " |", "|" + "---|" * 3 + "---:|" * 4]
        lines += ["| " + " | ".join(c.strip().replace("|", "\\|") or " " for c in row) + " |" for row in cells[1:]]
        return "\n".join(lines)


def _tail(row: Row) -> str:
    """The last path component (the table indents by depth), with the call index when repeated."""
    base = row.path or row.type
    return base.rpartition(".")[2] + row.label[len(base):]


def summary(graph: Graph, depth: Depth = "all") -> Summary:
    """Table of the module calls at ``depth`` or shallower, in the order they ran.

    ``depth`` as in ``dispatchtrace.depth``; the table has no op rows, so ``"all"`` (the default),
    ``"ops"`` and ``"auto"`` all list every call.
    """
    check_depth(depth)
    c = costs(graph)
    rows = []
    for call in graph.calls:
        if isinstance(depth, int) and call.depth > depth:
            continue
        cost = c.call(call)
        rows.append(Row(call.label, call.path, call.index, call.type, call.depth, _shape(call),
                        cost.params, cost.flops, cost.output_bytes, cost.bytes))
    t = c.total
    total = Row("Total", "", 0, "", -1, "", t.params, t.flops, t.output_bytes, t.bytes)
    return Summary(rows, total)
