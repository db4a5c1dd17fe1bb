"""The HTML page of a diff (``dispatchtrace diff A.json B.json -o diff.html``, ``dt.write_diff(d, path)``: the ``diff`` format).

One self-contained page, like the viewer (it names no URL it could fetch): the aligned call tree, each
call coloured by the largest relative difference of its outputs (``CallDiff.error``, a log scale), the
structural differences marked (calls of one side only; ops added, removed or changed inside a call),
both sides' details for the selected call or op pair, and ``Diff.first`` marked with a button (key
``f``) that opens the calls around it and selects it. The page's script is ``render/viewer/diff.js``;
it shares ``stats.js`` (statistics as Python prints them) with the viewer.

>>> import torch, dispatchtrace as dt
>>> lin = torch.nn.Linear(2, 2)
>>> with torch.no_grad(), dt.capture(lin, values="stats") as a:
...     _ = lin(torch.ones(1, 2))
>>> p = diff_payload(dt.diff(a, a))
>>> [c["label"] for c in p["calls"]], [q["status"] for q in p["pairs"]], p["first"], p["agree"]
(['<capture>', 'Linear'], ['same', 'same', 'same'], None, True)
"""

from __future__ import annotations

import html
import json
import math
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any

from ..graph import Call
from ._html import _Strings
from ._html_stats import STATS_TABLES, stats_row

if TYPE_CHECKING:
    from ..graph import Graph, Op, TensorRef
    from ..views import Diff



@dataclass(frozen=True, slots=True, kw_only=True)
class DiffOptions:
    """The options of the diff page (the ``diff`` format): ``title`` (default: the model's type)."""

    title: str | None = None


#: the page's scripts, in load order
DIFF_SCRIPTS = ("rows.js", "stats.js", "diff.js")


def _num(v: float) -> float | str:
    """An error as JSON holds it: ``"inf"`` for one that is not finite (a NaN count or shape that differs)."""
    return v if math.isfinite(v) else "inf"


def _short(row: list[Any] | None) -> list[Any] | None:
    """A stats row with its floats to 8 significant digits: the page shows 4 (rounding twice changes none of them
    but a value within 1e-8 of a tie), the file is a fifth smaller."""
    return None if row is None else [float(f"{v:.8g}") if isinstance(v, float) else v for v in row]


def _tensors(g: Graph, refs: Any, s: _Strings) -> list[list[Any]]:
    return [[s(f"{r.text}: {r.shape_text}"), _short(stats_row(g.stats.get(r.id)))] for r in refs]


def _op(g: Graph, op: Op | None, s: _Strings) -> dict[str, Any] | None:
    """One side of an op pair; its texts (target, phase, call, source, tensors) index the string table ``s``."""
    if op is None:
        return None
    return {"name": op.name, "target": s(op.target), "phase": s(op.phase), "call": s(op.call.label),
            "src": None if op.source is None else s(str(op.source)),
            "outs": _tensors(g, (*op.outputs, *op.mutated), s), "ins": _tensors(g, op.inputs, s)}


def _whole(d: Diff, a: Op, b: Op, pair: dict[str, Any], s: _Strings) -> None:
    """A pair's tensors shown as a layout diff compares them: each parallel side's full value (``Diff.shown``)."""
    for key, ra_list, rb_list in (("outs", (*a.outputs, *a.mutated), (*b.outputs, *b.mutated)), ("ins", a.inputs, b.inputs)):
        if len(ra_list) != len(rb_list):
            continue
        rows = [d.shown(ra, rb) for ra, rb in zip(ra_list, rb_list, strict=True)]
        pair["a"][key] = [[s(f"{r.text}: {r.shape_text}"), _short(stats_row(x))] for r, (x, _) in zip(ra_list, rows, strict=True)]
        pair["b"][key] = [[s(f"{r.text}: {r.shape_text}" + (" (rank 0's part; stats of the whole)" if r.shape != ra.shape else "")), _short(stats_row(y))]
                          for r, ra, (_, y) in zip(rb_list, ra_list, rows, strict=True)]


def _call(g: Graph, c: Call, s: _Strings) -> dict[str, Any]:
    outs: tuple[TensorRef, ...] = g.outputs if c.parent is None else c.outputs
    return {"label": c.label, "type": c.type, "path": c.path, "index": c.index, "repeat": c.repeat,
            "src": None if c.source is None else str(c.source), "outs": _tensors(g, outs, s)}


def diff_payload(d: Diff) -> dict[str, Any]:
    """What the page shows: ``s`` the string table (an op's target, phase, call, source and tensor texts index it); ``calls`` (in the tree's order, each with its ``parent`` row, ``side`` ``"both"``,
    ``"a"`` or ``"b"`` (a call of one side only), ``error``, ``via``, the op pairs it aligns (``pairs``,
    indices into ``pairs``), ``changed`` counts and each side's details ``a`` / ``b``); ``pairs`` (``status``,
    ``error``, ``departs``, ``via``, each side's op or ``None``); ``first`` (a pair index or ``None``),
    ``report`` (``str(d)``), ``cause`` (``Diff.cause``: why the first departure starts there), ``counts``
    (``Diff.counts``: the calls that differ in structure and the ops inside them), ``stats_only``, ``agree``,
    ``rtol``, ``atol``, ``values`` (whether anything was compared); a call and a pair have ``departs``."""
    s = _Strings()
    pairs: list[dict[str, Any]] = []
    first = None
    by_a: dict[int, int] = {}
    by_b: dict[int, int] = {}
    rows: list[dict[str, Any]] = []
    for cd in d.calls:
        idx = []
        counts = {"added": 0, "removed": 0, "changed": 0, "layout": 0}
        for p in cd.ops:
            if p is d.first:
                first = len(pairs)
            idx.append(len(pairs))
            if p.status != "same":
                counts[p.status] += 1
            pair = {"status": p.status, "error": _num(p.error), "departs": p.departs, "via": p.via,
                    "a": _op(d.a, p.a, s), "b": _op(d.b, p.b, s)}
            if (d.layout_a is not None or d.layout_b is not None) and p.a is not None and p.b is not None:
                _whole(d, p.a, p.b, pair, s)  # a parallel job's side: the full values the diff compared
            pairs.append(pair)
        row = {"side": "both", "label": cd.label, "type": cd.a.type, "depth": cd.a.depth, "error": _num(cd.error),
               "via": cd.via, "departs": cd.departs, "pairs": idx, "changed": counts, "a": _call(d.a, cd.a, s), "b": _call(d.b, cd.b, s)}
        by_a[id(cd.a)] = by_b[id(cd.b)] = len(rows)
        rows.append(row)
    for row, cd in zip(rows, d.calls, strict=True):  # d.calls is a's pre-order: a parent's row comes first
        row["parent"] = -1 if cd.a.parent is None else by_a[id(cd.a.parent)]
    for side, tops in (("a", d.only_a), ("b", d.only_b)):  # each call of one side only, under the aligned call holding it
        g, by = (d.a, by_a) if side == "a" else (d.b, by_b)
        for c in tops:
            rows.append({"side": side, "parent": by.get(id(c.parent), 0), "label": c.label, "type": c.type,
                         "depth": c.depth, "error": None, "via": "none", "departs": False, "pairs": [],
                         "changed": {"added": 0, "removed": 0, "changed": 0}, "inner": sum(1 for _ in _walk(c)) - 1,
                         "a": _call(g, c, s) if side == "a" else None, "b": _call(g, c, s) if side == "b" else None})
    return {"title": _title(d), "s": s.items, "fields": {"st": [list(f) for f in STATS_TABLES["st"]]}, "calls": rows,
            "pairs": pairs, "first": first, "report": str(d), "cause": list(d.cause), "counts": d.counts,
            "stats_only": d.stats_only, "agree": d.agree, "rtol": d.rtol, "atol": d.atol,
            "values": any(v != "none" for v in d.via)}


def _walk(c: Call) -> Any:
    yield c
    for k in c.children:
        if isinstance(k, Call):
            yield from _walk(k)


def _title(d: Diff) -> str:
    name = lambda g: g.calls[0].type if g.calls else "capture"  # noqa: E731
    a, b = name(d.a), name(d.b)
    return a if a == b else f"{a} / {b}"


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath("viewer", name).read_text(encoding="utf-8")


def diff_page(d: Diff, *, title: str | None = None) -> str:
    """The whole page as text."""
    p = diff_payload(d)
    if title:
        p["title"] = title
    data = json.dumps(p, separators=(",", ":"), ensure_ascii=False).replace("<", "\\u003c")
    scripts = "\n".join(f"// ---- {name}\n{_asset(name)}" for name in DIFF_SCRIPTS).replace("</script", "<\\/script")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
            f"<title>{html.escape(p['title'])} · diff · dispatchtrace</title>\n<style>\n{_asset('diff.css')}</style>\n</head>\n"
            f"<body>\n{_asset('diff.html')}"
            f"<script type=\"application/json\" id=\"dt-diff\">{data}</script>\n"
            f"<script>\n{scripts}\n</script>\n</body></html>\n")
