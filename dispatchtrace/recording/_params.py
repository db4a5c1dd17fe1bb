"""Parameter counts of the modules a capture saw, read once at block exit while they are alive."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch.nn as nn

if TYPE_CHECKING:
    from ..graph import Graph

Counts = dict[int, tuple[int, int]]


def count_params(modules: list[nn.Module]) -> tuple[Counts, int]:
    """``{id(module): (with children, own)}`` for ``modules`` and everything below them, and the
    total over all of ``modules``. Each parameter tensor counts once, so tied weights count once.

    >>> lin = nn.Linear(2, 3)
    >>> m = nn.Sequential(lin, nn.ReLU())
    >>> counts, total = count_params([m, lin])
    >>> counts[id(m)], counts[id(m[0])], counts[id(m[1])], total
    ((9, 0), (9, 9), (0, 0), 9)
    >>> m.append(nn.Linear(3, 3, bias=False)); m[2].weight = nn.Parameter(lin.weight.new_ones(3, 3))
    Sequential(...)
    >>> m[0].weight = m[2].weight  # tied: counted once, in both modules
    >>> counts, total = count_params([m])
    >>> counts[id(m)], counts[id(m[0])], counts[id(m[2])], total
    ((12, 0), (12, 12), (9, 9), 12)
    """
    fast = _tree_counts(modules)
    return fast if fast is not None else _shared_counts(modules)


def _tree_counts(modules: list[nn.Module]) -> tuple[Counts, int] | None:
    """The counts with plain sums, one walk: ``None`` when some module or parameter is reached
    twice (shared, tied), where sums would count it twice (``_shared_counts`` then)."""
    counts: Counts = {}
    params: list[int] = []  # the id of every parameter met: all distinct, or the sums are wrong
    total = 0
    for root in modules:
        if id(root) in counts:  # below a module counted before
            continue
        walked: list[nn.Module] = []  # parents first; parent positions and counts alongside
        parents: list[int] = []
        every: list[int] = []
        todo: list[tuple[nn.Module, int]] = [(root, -1)]
        while todo:
            mod, parent = todo.pop()
            if id(mod) in counts:
                return None
            counts[id(mod)] = (0, 0)
            own = 0
            for p in mod._parameters.values():
                if p is not None:
                    params.append(id(p))
                    own += p.numel()
            at = len(walked)
            walked.append(mod)
            parents.append(parent)
            every.append(own)
            for child in mod._modules.values():
                if child is not None:
                    todo.append((child, at))
        owns = every[:]
        for at in range(len(walked) - 1, 0, -1):  # children after their parent: sums reach the root
            every[parents[at]] += every[at]
        for mod, n, own in zip(walked, every, owns, strict=True):
            counts[id(mod)] = (n, own)
        total += every[0]
    if len(set(params)) != len(params):
        return None
    return counts, total


def _shared_counts(modules: list[nn.Module]) -> tuple[Counts, int]:
    """``count_params`` for trees that share modules or parameters: a set of parameters per subtree."""
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


def add_params(graph: Graph) -> None:
    """Parameter counts per call (own, and with children), while the modules are still alive."""
    of_calls = [None if call._module is None else call._module() for call in graph.calls]  # .module, inline
    modules = {id(module): module for module in of_calls if module is not None}  # each once, first call first
    counts, total = count_params(list(modules.values()))
    for call, module in zip(graph.calls, of_calls, strict=True):
        if module is not None:
            call.params, call.self_params = counts[id(module)]
    graph.root.params, graph.root.self_params = total, 0
