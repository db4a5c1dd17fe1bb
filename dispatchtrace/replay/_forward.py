"""The forward function of a capture: which ops it is (what replay runs when the block also trained),
how a call binds to its arguments, and what it returns."""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

import torch
import torch.fx as fx

from .._structure import leaves
from ..graph import Call

if TYPE_CHECKING:
    from ..graph import Graph, Op


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


def bind_arguments(gm: fx.GraphModule, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    """The values of ``gm``'s placeholders, in order, for the call ``gm(*args, **kwargs)`` (what
    ``fx.Interpreter.run`` takes); for a replay whose placeholders are ``graph.inputs``, the tensors
    of ``args``, each once. ``TypeError`` when the call does not fit.

    >>> import torch, dispatchtrace as dt
    >>> lin, x = torch.nn.Linear(4, 2), torch.ones(1, 4)
    >>> with dt.capture(lin) as g:
    ...     _ = lin(input=x)
    >>> [tuple(t.shape) for t in bind_arguments(g.to_fx(lin), (), {"input": x})]
    [(1, 4)]
    """
    if gm.meta.get("dispatchtrace_signature") == "arguments":
        return list(inspect.signature(gm.forward).bind(*args, **kwargs).arguments.values())
    seen: dict[int, torch.Tensor] = {}
    for _, t in leaves(args):
        seen.setdefault(id(t), t)
    return list(seen.values())


def output_structure(graph: Graph) -> Any:
    """What ``to_fx``'s GraphModule returns, with refs in place of tensors.

    The ``returned`` of the capture's only top-level call when there is exactly one and it is
    known; else ``tuple(graph.outputs)``.

    >>> import torch, dispatchtrace as dt
    >>> class Pair(torch.nn.Module):
    ...     def forward(self, x):
    ...         return {"double": [x * 2, None], "n": 3}
    >>> with dt.capture(Pair()) as g:
    ...     _ = Pair()(torch.ones(2))
    >>> output_structure(g)
    {'double': [TensorRef(%mul: f32[2], storage=1, v0, activation), None], 'n': 3}
    """
    returned = top_returned(graph)
    return tuple(graph.outputs) if returned is None else returned


def top_returned(graph: Graph) -> Any:
    """``returned`` of the capture's only top-level module call; ``None`` when there are several
    top-level calls, none, or the call's result is unknown (it raised)."""
    top = [c for c in graph.root.children if isinstance(c, Call)]
    return top[0].returned if len(top) == 1 else None
