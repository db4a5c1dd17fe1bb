"""Several ranks' captures on one HTML page: a tab per rank (each the full viewer) and their collectives aligned.

``dispatchtrace render 'trace.rank*.json' -o ranks.html`` (or ``write_ranks(dt.load_ranks(...), path)``: the ``ranks`` format)
writes one self-contained page. Its top is a rank selector; each rank's tab is that rank's own viewer
page (``render/html.py``, in an ``iframe`` whose ``srcdoc`` holds it, so every viewer feature works
per rank). Below it, for each process group, a table aligns the collectives its member ranks issued
on it by position (the n-th on the group on each rank in one row, as the ranks must issue them);
a row where they differ (kind, reduce op, root, dtypes, shapes: the mismatch finder's rule) is
highlighted, the first such one (``views/_mismatch.py``) marked and named above the tables.

>>> import torch, dispatchtrace as dt
>>> with dt.capture() as g:
...     _ = torch.ones(2) + 1
>>> p = ranks_payload({0: g, 1: g})
>>> p["ranks"], p["groups"], p["mismatch"]
([0, 1], [], None)
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..views import RankEstimates, agreement_key, estimate_ranks, mismatch, sequences
from ._html import HtmlOptions, page

if TYPE_CHECKING:
    from ..graph import Graph
    from ..views import Collective


def _cell(c: Collective | None) -> dict[str, Any] | None:
    if c is None:
        return None
    serves = c.serves.label if c.serves is not None else c.op.call.label
    source = f"{c.op.source.file}:{c.op.source.line}" if c.op.source is not None else ""
    return {"op": c.op.name, "text": f"{c.kind}{' ' + c.reduce if c.reduce else ''} {c.shapes}",
            "phase": c.op.phase, "serves": serves, "params": list(c.params), "region": c.region or "",
            "source": source}


def ranks_payload(ranks: Mapping[int, Graph]) -> dict[str, Any]:
    """What the page shows besides the viewers: ``ranks``; ``groups``, each with its ``group`` text,
    member ``ranks`` and ``rows`` (``position``, ``cells`` one per member rank, ``None`` where a rank
    issued no more, ``agree``); ``mismatch`` (the first disagreement as text, or ``None``)."""
    first = mismatch(ranks)
    out = []
    for group, seqs in sequences(ranks):
        present = list(seqs)
        rows = []
        for i in range(max((len(s) for s in seqs.values()), default=0)):
            at = {r: s[i] if i < len(s) else None for r, s in seqs.items()}
            keys = {None if c is None else agreement_key(c) for c in at.values()}
            rows.append({"position": i, "cells": [_cell(at[r]) for r in present], "agree": len(keys) == 1,
                         "first": first is not None and first.group == group and first.position == i})
        out.append({"group": str(group), "ranks": present, "rows": rows})
    return {"ranks": sorted(ranks), "groups": out, "mismatch": None if first is None else str(first)}


_STYLE = """
body { margin: 0; font: 13px system-ui, sans-serif; }
#rank-bar { padding: 6px 8px; background: #f3f3f3; border-bottom: 1px solid #ccc; }
#rank-bar button { margin-right: 4px; } #rank-bar button.on { font-weight: bold; background: #dde8ff; }
iframe.rank { width: 100%; height: 70vh; border: 0; border-bottom: 1px solid #ccc; display: none; }
iframe.rank.on { display: block; }
section#collectives { padding: 8px; } table { border-collapse: collapse; margin-bottom: 12px; }
td, th { border: 1px solid #ccc; padding: 2px 6px; vertical-align: top; font-family: ui-monospace, monospace; font-size: 12px; }
tr.differ td { background: #ffe3e0; } tr.first td { background: #ffb3aa; } tr.slowest td { font-weight: bold; }\nsection#estimates { padding: 8px; }
.note { color: #666; } #verdict.bad { color: #b00; font-weight: bold; } #verdict.good { color: #060; }
"""

_SCRIPT = """
function dtRank(r) {
  document.querySelectorAll('iframe.rank').forEach(f => f.classList.toggle('on', f.dataset.rank === String(r)));
  document.querySelectorAll('#rank-bar button').forEach(b => b.classList.toggle('on', b.dataset.rank === String(r)));
}
document.querySelectorAll('[data-rank]').forEach(el => {
  if (el.tagName !== 'IFRAME') el.addEventListener('click', () => dtRank(el.dataset.rank));
});
"""


def _table(group: dict[str, Any]) -> str:
    head = "".join(f'<th data-rank="{r}">rank {r}</th>' for r in group["ranks"])
    rows = []
    for row in group["rows"]:
        cls = "first" if row["first"] else ("" if row["agree"] else "differ")
        cells = []
        for r, c in zip(group["ranks"], row["cells"], strict=True):
            if c is None:
                cells.append('<td class="note">(nothing more)</td>')
                continue
            params = f"<br>for {html.escape(', '.join(c['params']))}" if c["params"] else ""
            cells.append(f'<td data-rank="{r}" title="{html.escape(c["source"])}">%{html.escape(c["op"])} '
                         f'{html.escape(c["text"])}<br><span class="note">{c["phase"]}, '
                         f'{html.escape(c["serves"])}</span>{params}</td>')
        rows.append(f'<tr class="{cls}"><td>{row["position"]}</td>{"".join(cells)}</tr>')
    return (f"<h3>{html.escape(group['group'])}</h3>\n<table><tr><th>#</th>{head}</tr>\n"
            + "\n".join(rows) + "\n</table>")


def _estimates_section(est: RankEstimates | None) -> str:
    """Each rank's estimated step and exposed communication, the slowest rank marked (``dt.estimate_ranks``)."""
    if est is None:
        return ""
    rows = []
    for row in est.rows():
        cls = ' class="slowest"' if row["slowest"] and est.skew > 0 else ""
        cells = [str(row["rank"]), *(f"{row[k] * 1e3:.3f} ms" for k in ("step", "compute", "communication", "exposed")),
                 f"{100 * row['overlap']:.1f}%"]
        rows.append(f'<tr{cls} data-rank="{row["rank"]}">' + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
    spec = next(iter(est.estimates.values())).spec
    head = "".join(f"<th>{h}</th>" for h in ("rank", "step", "compute", "communication", "exposed", "hidden"))
    return (f'<section id="estimates"><h2>Estimated step on {html.escape(spec.title or spec.name)}: '
            f"{est.step * 1e3:.3f} ms (rank {est.slowest}), skew {est.skew * 1e3:.3f} ms</h2>\n"
            f"<table><tr>{head}</tr>\n" + "\n".join(rows) + "\n</table></section>\n")


@dataclass(frozen=True, slots=True, kw_only=True)
class RanksOptions(HtmlOptions):
    """What the ranks page takes: each rank's viewer's options, and ``estimate`` (a spec such as ``"h100"``, or
    what ``dt.estimate_ranks`` returned): each rank's estimated step and exposed communication, the slowest rank
    and the skew, at the top."""

    estimate: Any = None


def ranks_page(ranks: Mapping[int, Graph], o: HtmlOptions) -> str:
    """The whole page as text (with ``RanksOptions.estimate``: each rank's estimated step above the collectives)."""
    given = getattr(o, "estimate", None)
    estimates = given if isinstance(given, RankEstimates) or given is None else estimate_ranks(ranks, given)
    if not ranks:
        raise ValueError("no rank captures to show; load them with dt.load_ranks('trace.rank*.json')")
    p = ranks_payload(ranks)
    title = html.escape(o.title or "ranks")
    buttons = "".join(f'<button data-rank="{r}">rank {r}</button>' for r in p["ranks"])
    frames = "\n".join(f'<iframe class="rank" data-rank="{r}" title="rank {r}" '
                       f'srcdoc="{html.escape(page(g, o), quote=True)}"></iframe>' for r, g in sorted(ranks.items()))
    verdict = (f'<pre id="verdict" class="bad">{html.escape(p["mismatch"])}</pre>' if p["mismatch"]
               else '<p id="verdict" class="good">every group\'s member ranks issued the same collectives in the same order</p>')
    tables = "\n".join(_table(g) for g in p["groups"]) or '<p class="note">no collectives</p>'
    data = json.dumps(p, separators=(",", ":")).replace("<", "\\u003c")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
            f"<title>{title} · {len(p['ranks'])} ranks · dispatchtrace</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
            f'<nav id="rank-bar"><strong>{title}</strong> {buttons}</nav>\n{frames}\n{_estimates_section(estimates)}'
            f'<section id="collectives"><h2>Collectives by group, aligned by position</h2>\n{verdict}\n{tables}\n</section>\n'
            f'<script type="application/json" id="dt-ranks">{data}</script>\n'
            f"<script>{_SCRIPT}dtRank({p['ranks'][0]});</script>\n</body></html>\n")
