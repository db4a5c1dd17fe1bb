"""Queries: find ops and calls by op target, module path pattern, module type or module, without loops.

Patterns are shell-style (``fnmatch``: ``*``, ``?``, ``[...]``); ``*`` also matches dots.

>>> import torch, torch.nn as nn, dispatchtrace as dt
>>> class Net(nn.Module):
...     def __init__(self):
...         super().__init__()
...         self.fc, self.relu, self.out = nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2)
...     def forward(self, x):
...         x = self.relu(self.fc(x))
...         x = self.relu(x + 1)
...         return self.out(x)
>>> net, x = Net(), torch.ones(1, 4)
>>> with dt.capture(net) as g:
...     y = net(x)
>>> [op.name for op in find_ops(g, "aten.add*")]
['addmm', 'add', 'addmm_1']
>>> [op.name for op in find_ops(g, "aten::relu")]
['relu', 'relu_1']
>>> [op.name for op in find_ops(g, path="out")]
['t_1', 'addmm_1']
>>> [c.label for c in calls_of(g, net.relu)]
['relu#0', 'relu#1']
>>> [op.name for op in ops_between(g, "relu#0", "relu#1")]
['add']
>>> [c.label for c in find_calls(g, type="Linear")]
['fc', 'out']
>>> [x.label if isinstance(x, dt.Call) else x.name for x in search(g, "relu")]  # the viewer's search box: exact names first
['relu#0', 'relu#1', 'relu', 'relu_1']
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Union

from ..graph import Call, op_ranges
from ._noise import noise_ops

if TYPE_CHECKING:
    import torch.nn as nn

    from ..graph import Graph, Op

CallRef = Union["Call", str, "nn.Module"]


def _call_matches(call: Call, path: str | None, type: str | None) -> bool:
    if path is not None and not (fnmatchcase(call.path, path) or fnmatchcase(call.label, path)):
        return False
    return type is None or fnmatchcase(call.type, type)


def find_calls(graph: Graph, path: str | None = None, *, type: str | None = None) -> list[Call]:
    """Calls, in entry order, whose path (or label, ``relu#1``) matches ``path`` and type matches ``type``.

    ``find_calls(g, "layer1.*")``, ``find_calls(g, type="*Norm*")``; no pattern gives every call.
    """
    return [c for c in graph.calls if _call_matches(c, path, type)]


def find_ops(graph: Graph, target: str = "*", *, path: str | None = None, type: str | None = None,
             direct: bool = False) -> list[Op]:
    """Ops, in execution order, whose target matches ``target``, issued inside a matching call.

    ``target`` matches the overload (``aten.add*`` finds ``aten.add.Tensor``, ``aten.addmm.default``,
    ``aten.add_.Tensor``) or, when it contains ``::``, the packet (``aten::relu``). ``path`` / ``type``
    keep ops issued inside a call whose path or type matches, at any depth above the op
    (``direct=True``: the innermost call only). ``path=""`` selects calls of the model itself.
    """
    short = "::" in target
    out = []
    for op in graph.ops:
        if not fnmatchcase(op.short if short else op.target, target):
            continue
        if path is not None or type is not None:
            call: Call | None = op.call
            while call is not None and call.parent is not None:
                if _call_matches(call, path, type):
                    break
                call = None if direct else call.parent
            else:
                continue
        out.append(op)
    return out


def matches(text: str, query: str) -> bool:
    """The one search rule, the viewer's search box's too: a query with ``*``, ``?`` or ``[`` is a
    shell-style pattern over the whole text (``fnmatchcase``), any other query a substring; both
    case-sensitive, as every pattern of this module is.

    >>> matches("layer1.0.relu#2", "relu"), matches("layer1.0.relu#2", "relu*"), matches("layer1.0.relu#2", "*relu#?")
    (True, False, True)
    >>> matches("Bottleneck", "bottleneck")
    False
    """
    return fnmatchcase(text, query) if any(c in query for c in "*?[") else query in text


def search(graph: Graph, query: str, *, noise: bool = False) -> list[Call | Op]:
    """What the viewer's search box finds (``matches`` on each text): calls by label, path or type, then
    ops by target (``aten.add_.Tensor``, or without its overload ``aten.add_``) or name, each in capture
    order, and the items with a text equal to the query before the rest (``convolution_3`` first, then
    ``convolution_30``). Noise ops (``views.noise``) only with ``noise=True``, as the page shows them.
    """

    q = query.strip()
    if not q:
        return []
    hidden = set() if noise else {op.index for op in noise_ops(graph)}
    found: list[tuple[bool, Call | Op]] = []
    for call in graph.calls:
        texts = (call.label, call.path, call.type)
        if any(matches(t, q) for t in texts):
            found.append((q not in texts, call))
    for op in graph.ops:
        texts = (op.target, op.name, op.target.rsplit(".", 1)[0])
        if op.index not in hidden and any(matches(t, q) for t in texts):
            found.append((q not in texts, op))
    return [x for _, x in sorted(found, key=lambda f: f[0])]  # stable: capture order within each rank


def calls_of(graph: Graph, module: nn.Module | str) -> list[Call]:
    """Every call of one module instance (``g.calls_of(model.layer1[0].relu)``) or of one path, in order."""
    if isinstance(module, str):
        calls = [c for c in graph.calls if c.path == module]
        if not calls:
            known = ", ".join(repr(c.path) for c in graph.calls[:3])
            raise KeyError(f"no call of a module at path {module!r}; paths look like {known}" if known
                           else f"no call of a module at path {module!r}: the capture recorded no calls")
        return calls
    calls = [c for c in graph.calls if c.module is module]
    if not calls and graph.calls and all(c.module is None for c in graph.calls):
        raise LookupError("this capture no longer knows its modules (a loaded file, or the model was freed); "
                          "ask by path instead: g.calls_of('layer1.0.relu')")
    return calls


def resolve(graph: Graph, ref: CallRef) -> Call:
    """One call from a ``Call``, its label, a path called once, or a module called once.

    A label is ``Call.label``: the dotted path, with ``#N`` (no space) for the N-th call of a
    module called more than once (``layer1.0.relu#2``), as every view prints it.

    >>> import torch, dispatchtrace as dt
    >>> net, x = torch.nn.Sequential(torch.nn.ReLU()), torch.ones(1)
    >>> with dt.capture(net) as g:
    ...     _ = net(net(x))
    >>> resolve(g, "0#1").index, resolve(g, "Sequential#0").index
    (1, 0)
    """

    if isinstance(ref, Call):
        return ref
    if isinstance(ref, str):
        text = ref.strip()
        matches = [c for c in graph.calls if c.label == text] or [c for c in graph.calls if "#" not in text and c.path == text]
    else:
        matches = calls_of(graph, ref)
    if len(matches) == 1:
        return matches[0]
    if not matches:
        sample = ", ".join(c.label for c in graph.calls[1:4]) or "none were captured"
        hint = f"; write {ref.replace(' #', '#')!r}, with no space before #" if isinstance(ref, str) and " #" in ref else ""
        raise KeyError(f"no module call labelled {ref!r}{hint}; labels are dotted paths with #N for a module called "
                       f"more than once ({sample}, ...)")
    labels = ", ".join(c.label for c in matches[:4])
    raise KeyError(f"{ref!r} was called {len(matches)} times ({labels}); name one call by its label")


def span(graph: Graph, call: CallRef) -> range:
    """Positions in ``graph.ops`` of the ops issued while ``call`` ran (sub-calls included)."""
    target = resolve(graph, call)
    spans = op_ranges(graph.root)
    return spans[id(target)]


def ops_between(graph: Graph, first: CallRef, second: CallRef, *, inclusive: bool = False) -> list[Op]:
    """Ops that ran after ``first`` returned and before ``second`` was entered, in order.

    ``inclusive=True`` adds the ops of both calls. Calls are given as ``Call`` objects, labels
    (``layer1.0.relu#2``), paths called once, or modules called once.
    """
    spans = op_ranges(graph.root)
    a, b = spans[id(resolve(graph, first))], spans[id(resolve(graph, second))]
    if b.start < a.stop:
        raise ValueError(f"{resolve(graph, second).label!r} starts before {resolve(graph, first).label!r} "
                         "returns; give the earlier call first")
    return graph.ops[a.start if inclusive else a.stop:b.stop if inclusive else b.start]
