"""Parameter counts of the modules a capture saw, read once at block exit while they are alive."""

from __future__ import annotations

import torch.nn as nn

Counts = dict[int, tuple[int, int]]


def count_params(modules: list[nn.Module]) -> tuple[Counts, int]:
    """``{id(module): (with children, own)}`` for ``modules`` and everything below them, and the
    total over all of ``modules``. Each parameter tensor counts once, so tied weights count once.

    >>> lin = nn.Linear(2, 3)
    >>> m = nn.Sequential(lin, nn.ReLU())
    >>> counts, total = count_params([m, lin])
    >>> counts[id(m)], counts[id(m[0])], counts[id(m[1])], total
    ((9, 0), (9, 9), (0, 0), 9)
    """
    counts: Counts = {}
    subtrees: dict[int, dict[int, int]] = {}

    def visit(module: nn.Module) -> dict[int, int]:
        known = subtrees.get(id(module))
        if known is not None:
            return known
        own: dict[int, int] = {}
        for p in module._parameters.values():
            if p is not None:
                own[id(p)] = p.numel()
        children = module._modules
        if not children:  # a leaf module (most of them): its subtree is its own parameters
            subtrees[id(module)] = own
            n = sum(own.values())
            counts[id(module)] = (n, n)
            return own
        every = dict(own)
        subtrees[id(module)] = every  # guards against cycles
        for child in children.values():
            if child is not None:
                every.update(visit(child))
        counts[id(module)] = (sum(every.values()), sum(own.values()))
        return every

    every: dict[int, int] = {}
    for module in modules:
        every.update(visit(module))
    return counts, sum(every.values())
