"""The viewer payload's values: each op's and call's statistics and the op that made the first NaN or Inf.

Added to ``payload`` (``render/_html.py``) as four fields, described in ``docs/viewer.md``: ``vals``
(``"stats"``, ``"none"`` when the capture took no values, ``"absent"`` when it asked for them and its
tensors had none: meta or fake); with ``"stats"``, ``st`` per op a row of table ``so`` (``[outputs, inputs]``),
each a list of rows of ``sp`` (``[tensor, stats]``, ``stats`` a row of ``st``: ``Stats``' fields in order,
``[numel, nan, posinf, neginf, zeros, min, max, mean, norm]``, a float that is not finite as the text ``"inf"``,
or ``None``), ``cst`` per call its outputs' stats, and ``nf`` the first non-finite value
(``views.first_nonfinite``): ``{"op": index or None, "text", "carried", "phase", "verdict", "why"}`` or ``None``. The three
tables' field names (``STATS_TABLES``) go in the payload's ``fields``, as the rows of calls and ops do.

>>> import torch, dispatchtrace as dt
>>> lin, x = torch.nn.Linear(2, 1), torch.tensor([[float("nan"), 1.0]])
>>> with torch.no_grad(), dt.capture(lin, values="stats") as g:
...     _ = lin(x)
>>> p = values_payload(g, str)
>>> p["vals"], p["nf"]["op"], p["nf"]["carried"], p["st"][1][0]
('stats', 1, True, [['%addmm: f32[1, 1]', [1, 1, 0, 0, None, None, None, None, None]]])
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..graph import Stats
from ..views import first_nonfinite

if TYPE_CHECKING:
    from ..graph import Graph

STATS_FIELDS = tuple(f.name for f in dataclasses.fields(Stats) if f.name != "fingerprint")
"""A stats row: the fields of the ``Stats`` record, in its order (the record is the one declaration), but the
fingerprint (64 bits: a JavaScript number holds 53; the page compares no bits)."""

STATS_TABLES: dict[str, tuple[tuple[str, str], ...]] = {
    "st": tuple((name, "") for name in STATS_FIELDS),
    "sp": (("tensor", "s"), ("stats", "st")),
    "so": (("outputs", "sp*"), ("inputs", "sp*")),
}
"""The payload's tables of values (``render/_html.py``'s ``fields``): a stats row, a ``[tensor, stats]`` pair,
an op's ``[outputs, inputs]``."""


def _num(v: float | None) -> float | str | None:
    """A float JSON can hold (``JSON.parse`` reads no ``Infinity``): ``"inf"``, ``"-inf"``, ``"nan"`` as text
    (a float64 sum that overflowed: ``mean inf``), as Python prints them."""
    return v if v is None or math.isfinite(v) else str(v)


def stats_row(s: Stats | None) -> list[Any] | None:
    """One ``Stats`` as the page reads it: a row of ``STATS_FIELDS``."""
    if s is None:
        return None
    return [_num(getattr(s, name)) for name in STATS_FIELDS]


def values_state(graph: Graph) -> str:
    """``"stats"``, ``"none"`` (``values="none"``) or ``"absent"`` (asked for, but meta or fake tensors have none)."""
    if graph.values != "stats":
        return "none"
    return "stats" if graph.stats or not graph.ops else "absent"


def values_payload(graph: Graph, string: Callable[[str], Any]) -> dict[str, Any]:
    """The payload's values fields for ``graph`` (a phase view reads its capture's stats); ``string`` puts a
    tensor's text (``"%addmm: f32[1, 2]"``, ``"fc.weight: f32[3, 3]"``) into the payload's string table."""
    base = getattr(graph, "base", None) or graph
    state = values_state(base)
    if state != "stats":
        return {"vals": state}
    stats = base.stats

    def pairs(refs: Any) -> list[list[Any]]:
        return [[string(f"{r.text}: {r.shape_text}"), stats_row(stats.get(r.id))] for r in refs]

    # an in-place op's result is both its output and what it wrote: shown once
    ops = [[pairs(dict.fromkeys((*op.outputs, *op.mutated)) if op.mutated else op.outputs), pairs(op.inputs)]
           for op in graph.ops]
    calls = [[stats_row(stats.get(r.id)) for r in (graph.outputs if c.parent is None else c.outputs)]
             for c in [graph.root, *graph.calls]]
    found = first_nonfinite(base)
    nf = None
    if found is not None:
        index = found.op.index
        if base is not graph:  # the op's copy in the view, if the view shows its phase
            copies = {id(o): v for v, o in getattr(graph, "source_op", {}).items()}
            view_op = copies.get(id(found.op))
            index = None if view_op is None else view_op.index
        nf = {"op": index, "name": found.op.name, "text": str(found), "carried": found.carried, "phase": found.op.phase,
              "verdict": found.verdict, "why": found.unsure}
    return {"vals": state, "st": ops, "cst": calls, "nf": nf}
