"""Which ops of a capture are the forward function: what replay runs when the block also trained."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .graph import Graph, Op


def replayed_ops(graph: Graph) -> list[Op]:
    """The ops ``to_fx`` replays, in order: those inside a top-level module call (any phase), and
    the forward-phase ops at the root that read nothing a left-out op produced.

    >>> import torch, dispatchtrace as dt
    >>> lin, x = torch.nn.Linear(2, 1), torch.ones(1, 2)
    >>> with dt.capture(lin) as g:
    ...     lin(x).sum().backward()
    >>> [op.name for op in replayed_ops(g)]
    ['t', 'addmm', 'sum', 'ones_like']
    """
    root = graph.root
    left: set[int] = set()
    out: list[Op] = []
    for op in graph.ops:
        if op.call is root and (op.phase != "forward" or any(r.producer is not None and r.producer.index in left
                                                                  for r in op.inputs)):
            left.add(op.index)
        else:
            out.append(op)
    return out
