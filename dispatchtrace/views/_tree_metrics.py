"""The tree's numbers on request: ``g.tree(metrics=("time", "est_time"))`` writes the named metrics of the registry
(``views/_metrics.py``) on each call's line, and on each op's line for a metric that has an op computation."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence

from ..graph import Call, Graph, Op
from ._metrics import Metric, all_metrics, metrics

Numbers = Callable[[Call | Op], str]


def chosen(graph: Graph, names: str | Sequence[str]) -> tuple[Metric, ...]:
    """The metrics ``names`` picks, checked: each a registered metric that applies to ``graph``'s capture; an unknown
    name or one that does not apply is a ``ValueError`` listing those that do.

    >>> import torch, dispatchtrace as dt
    >>> lin = torch.nn.Linear(4, 2)
    >>> with dt.capture(lin) as g:
    ...     _ = lin(torch.ones(1, 4))
    >>> [m.header for m in chosen(g, "flops")]
    ['FLOPs']
    >>> chosen(g, ["tme"])
    Traceback (most recent call last):
    ValueError: tree(metrics=...): no metric is named 'tme'; did you mean 'time'? The metrics that apply to this capture: params, self_params, trainable, frozen, flops, self_flops, output_bytes, bytes, self_bytes
    >>> chosen(g, ["time"])
    Traceback (most recent call last):
    ValueError: tree(metrics=...): 'time' does not apply to this capture (the time metrics need capture(timing=True) or --time, the estimate's g.estimate(spec) or --estimate, the stats' values="stats"); those that do: params, self_params, trainable, frozen, flops, self_flops, output_bytes, bytes, self_bytes
    """
    names = (names,) if isinstance(names, str) else tuple(names)
    known = {m.name: m for m in all_metrics()}
    applies = [m.name for m in metrics(graph)]
    for name in names:
        if name not in known:
            near = difflib.get_close_matches(name, list(known), n=1)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            raise ValueError(f"tree(metrics=...): no metric is named {name!r}{hint} The metrics that apply to this "
                             f"capture: {', '.join(applies)}")
        if name not in applies:
            raise ValueError(f"tree(metrics=...): {name!r} does not apply to this capture (the time metrics need "
                             "capture(timing=True) or --time, the estimate's g.estimate(spec) or --estimate, the stats' "
                             f"values=\"stats\"); those that do: {', '.join(applies)}")
    return tuple(known[n] for n in dict.fromkeys(names))


def numbers(graph: Graph, picked: tuple[Metric, ...]) -> Numbers:
    """What a call's or an op's line shows of ``picked``: ``Time: 9.72 ms, FLOPs: 822 M`` (as the summary writes each
    value), computed on ``graph`` (a phase view, as the summary computes it); an op leaves out the metrics that
    have no op computation; nothing picked, nothing written."""

    def text(x: Call | Op) -> str:
        parts = []
        for m in picked:
            fn = m.call if isinstance(x, Call) else m.op
            if fn is not None:
                parts.append(f"{m.header}: {m.text(fn(graph, x))}")
        return ", ".join(parts)

    return text
