"""``Graph.lint``: checks every invariant the docs promise about a graph, and names the first one broken.

The invariants (``docs/semantics.md``, "Invariants"), checked in this order:

1. ``ops``: ``graph.ops[i].index == i``, each op's phase one of ``graph.PHASES``; op names are unique.
2. ``calls``: the root has no parent and depth -1; ``graph.calls`` lists every call below the root once, in the order
   they were entered (depth first through ``children``); each call's parent is the call whose children hold it, and its
   depth is its parent's plus one.
3. ``children``: walking the root's children depth first meets the ops in index order, each once, so each call's ops
   are one contiguous range inside its parent's and children run in order; a call's ``ops`` are its op children, and
   each op's ``call`` is the call that holds it.
4. ``call index``: per module path, the calls are numbered 0, 1, 2 ... in entry order (``0 <= index < repeat``).
5. ``versions``: along op order (inputs, then writes, then outputs of each op), the version of a storage never
   decreases.
6. ``mutated``: a written ref has a later version than the same storage read by that op; ``is_view`` is true exactly
   when the op writes nothing and an output shares an input's storage.
7. ``tensors``: every ref's producer is an op of this graph, and the ref is that op's output at ``slot`` (or a
   refreshed version of it: same storage, a later version); an op's outputs name it as producer with their position as
   slot; a ref without producer is no ``activation``.
8. ``producers``: each op's producers are ops of this graph that ran before it, each once; they include the producer of
   every tensor it reads, and each is such a producer or an op that wrote such a tensor's storage after the tensor was
   made (its producer's output version) and no later than the version read.
9. ``users``: each op's users are exactly the ops that list it as a producer, in execution order.
10. ``inputs``: an op's ``inputs`` are the tensor refs in its ``args`` then ``kwargs``, in order.
11. ``graph inputs/outputs``: ``graph.inputs`` are refs of kind ``input`` without producer; ``graph.outputs`` are the
    outputs of the top-level calls, each once; call inputs and outputs list each ref once.
12. ``attribution``: only backward and recompute ops have an ``origin`` (a call of the graph, not the root) and
    ``grad_of`` (an op that ran before, not an optimizer op); only backward ops a ``param`` (a non-empty name), and an
    op with a ``param`` has no ``origin``.
13. ``arguments``: only top-level calls have ``arguments`` (``((name, value), ...), {keyword: value}``, names unique);
    every tensor ref in them is one of the call's ``inputs``.
14. ``constants``: every name in ``graph.constants`` names a ref of kind ``constant`` of the graph, with the dtype and
    shape of that ref; a literal has a value for each element, or none and a ``why``.
15. ``notes``: ``graph.notes`` is a list of non-empty strings, each once.
16. ``dtensor``: the local ops of one DTensor-level op (``op.dtensor``) are consecutive, in one call, and DTensor-level
    ops are numbered in the order they ran (``dtensor.check_dtensor_ops``).
17. ``times``: each op's ``time`` is ``None`` or a finite number of seconds >= 0, and ``None`` for every op of a graph
    that was not timed (``graph.timed``).

>>> import torch, dispatchtrace as dt
>>> lin, x = torch.nn.Linear(4, 2), torch.ones(1, 4)
>>> with dt.capture(lin) as g:
...     _ = lin(x)
>>> g.lint()
>>> [op.name for op in g.ops]
['t', 'addmm']
>>> g.ops.reverse()
>>> g.lint()
Traceback (most recent call last):
...
dispatchtrace.errors.LintError: ops: graph.ops[0] is %addmm with index 1; ops are listed in execution order and an op's index is its position
"""

from __future__ import annotations

from operator import is_not
from typing import TYPE_CHECKING

from ..._structure import iter_leaves
from ...errors import LintError
from .._records import PHASES, Call, Op
from .._tensors import TensorRef
from .._users import Users
from ._dtensor import check_dtensor_ops
from ._refs import check_tensors, check_versions, mentions, refs_in
from ._refs import describe as _op

if TYPE_CHECKING:
    from .._graph import Graph


def _fail(invariant: str, message: str) -> None:
    raise LintError(f"{invariant}: {message}")


def lint(graph: Graph) -> None:
    """Raise ``LintError`` naming the first broken invariant of ``graph``; return ``None`` when all hold."""
    for check in (_check_ops, _check_calls, _check_children, _check_call_indices, _check_versions, _check_tensors,
                  _check_dataflow, _check_graph_io, _check_attribution, _check_arguments, _check_constants, _check_notes,
                  _check_times):
        check(graph)
    problem = check_dtensor_ops(graph.ops)
    if problem is not None:
        _fail("dtensor", problem)


def _check_ops(graph: Graph) -> None:
    names: dict[str, int] = {}
    for i, op in enumerate(graph.ops):
        if op.index != i:
            _fail("ops", f"graph.ops[{i}] is %{op.name} with index {op.index}; ops are listed in execution order "
                         f"and an op's index is its position")
        if op.phase not in PHASES:
            _fail("ops", f"{_op(op)} has phase {op.phase!r}; an op's phase is one of {', '.join(PHASES)}")
        if op.name in names:
            _fail("ops", f"ops {names[op.name]} and {i} are both named %{op.name}; op names are unique")
        names[op.name] = i


def _check_calls(graph: Graph) -> None:
    root = graph.root
    if root.parent is not None or root.depth != -1:
        _fail("calls", f"the root call has parent {root.parent!r} and depth {root.depth}; it has none and -1")
    entered: list[Call] = []

    def visit(call: Call) -> None:
        for child in call.children:
            if type(child) is Op or not isinstance(child, Call):  # (no call for the common child, an op)
                continue
            if child.parent is not call:
                _fail("calls", f"{child!r} is a child of {call!r} but says its parent is {child.parent!r}")
            if child.depth != call.depth + 1:
                _fail("calls", f"{child!r} has depth {child.depth}, its parent {call!r} {call.depth}; "
                               f"a call's depth is its parent's plus one")
            entered.append(child)
            visit(child)

    visit(root)
    if len(entered) != len(graph.calls) or any(a is not b for a, b in zip(entered, graph.calls, strict=True)):
        at = next((i for i, (a, b) in enumerate(zip(entered, graph.calls, strict=False)) if a is not b),
                  min(len(entered), len(graph.calls)))
        _fail("calls", f"graph.calls[{at}] is not the call entered {at}th (graph.calls has {len(graph.calls)}, the "
                       f"root's children hold {len(entered)}); graph.calls lists every call once, in entry order")


def _check_children(graph: Graph) -> None:
    ops = graph.ops
    for call in [graph.root, *graph.calls]:
        own = [c for c in call.children if type(c) is Op or isinstance(c, Op)]
        if len(own) != len(call.ops) or any(map(is_not, own, call.ops)):
            _fail("children", f"{call!r}.ops is not the list of its op children; a call's ops are its op children")
    met: list[Op] = []  # the ops walking the calls meets, depth first (one step per call, not per op and level)

    def visit(call: Call) -> None:
        for child in call.children:
            if type(child) is Op:
                met.append(child)
            elif isinstance(child, Call):
                visit(child)
            elif isinstance(child, Op):
                met.append(child)

    visit(graph.root)
    if len(met) != len(ops) or any(map(is_not, met, ops)):
        n = next((i for i, (a, b) in enumerate(zip(met, ops, strict=False)) if a is not b), min(len(met), len(ops)))
        if n < len(met):
            _fail("children", f"the {n}th op met walking the calls is {_op(met[n])}, not graph.ops[{n}]: each call's "
                              f"ops are one contiguous range inside its parent's, and children are in the order they ran")
        _fail("children", f"{_op(ops[n])} is in no call's children; every op is a child of the call that ran it")
    for call in [graph.root, *graph.calls]:
        for op in call.ops:
            if op.call is not call:
                _fail("children", f"{_op(op)} is a child of {call!r} but says it ran in {op.call!r}")


def _check_call_indices(graph: Graph) -> None:
    seen: dict[str, dict[int, int]] = {}
    for call in graph.calls:
        counts = seen.setdefault(call.path, {})
        k = call.index
        if not 0 <= k < call.repeat:
            _fail("call index", f"{call!r} has index {k} of repeat {call.repeat}; 0 <= index < repeat")
        if k > 0 and counts.get(k - 1, 0) <= counts.get(k, 0):
            _fail("call index", f"{call!r} has index {k} before any call of path {call.path!r} with index {k - 1}; "
                                f"calls of a module are numbered 0, 1, 2 ... in the order they ran")
        counts[k] = counts.get(k, 0) + 1


def _check_dataflow(graph: Graph) -> None:
    ops, n = graph.ops, len(graph.ops)
    expected_users: dict[int, list[Op]] = {}
    writes: dict[int, list[tuple[int, int]]] = {}  # storage -> (version made, op index) of each write
    lazy = Users.unread(ops)  # users all still to be found from the producers agree with them
    for op in ops:
        inputs, at, listed = op.inputs, op.index, set()
        read = {r.producer.index for r in inputs if r.producer is not None}
        allowed = set(read) if writes else read
        if writes:
            for r in inputs:  # the writes of its storage after the tensor was born, up to the version read
                made = writes.get(r.storage)
                if made:
                    p = r.producer
                    born = p.outputs[r.slot].version if p is not None and r.slot < len(p.outputs) else -1
                    allowed.update(i for v, i in made if born < v <= r.version)
        for p in op.producers:
            i = p.index
            if not (0 <= i < n and ops[i] is p):
                _fail("producers", f"{_op(op)} lists %{p.name} as a producer, which is not an op of this graph")
            if i >= at:
                _fail("producers", f"{_op(op)} lists {_op(p)} as a producer, which runs after it; every op's "
                                   f"producers precede it")
            if i in listed:
                _fail("producers", f"{_op(op)} lists {_op(p)} twice as a producer; each producer is listed once")
            if i not in allowed:
                _fail("producers", f"{_op(op)} lists {_op(p)} as a producer, which neither produced a tensor it reads "
                                   f"nor wrote one's storage after that tensor was made; an edge means the op read "
                                   f"data the producer made")
            listed.add(i)
            if lazy is None:
                expected_users.setdefault(i, []).append(op)
        args, kwargs = op.args, op.kwargs  # no kwargs: the refs of (args, kwargs) are those of args
        if args is not inputs or kwargs:  # else every arg is a ref (the loader shares the tuple): its refs are itself
            refs = refs_in(args if type(args) is tuple and type(kwargs) is dict and not kwargs else (args, kwargs), [])
            if len(refs) != len(inputs) or any(map(is_not, refs, inputs)):
                _fail("inputs", f"{_op(op)}'s inputs are not the tensor refs of its args and kwargs, in order")
        if not read <= listed:
            ref = next(r for r in inputs if r.producer is not None and r.producer.index not in listed)
            _fail("producers", f"{_op(op)} reads {ref.text}, but its producer %{ref.producer.name} is not among "
                               f"the op's producers; an op depends on the producer of every tensor it reads")
        for ref in op.mutated:
            writes.setdefault(ref.storage, []).append((ref.version, op.index))
    for op in ops if lazy is None else ():
        want, users = expected_users.get(op.index, ()), op.users
        if len(want) != len(users) or any(map(is_not, want, users)):
            _fail("users", f"{_op(op)}'s users are {[u.name for u in users]}, but the ops that list it as a "
                           f"producer are {[u.name for u in want]}; users are exactly those, in execution order")


def _check_versions(graph: Graph) -> None:
    problem = check_versions(graph)
    if problem is not None:
        _fail(*problem)


def _check_tensors(graph: Graph) -> None:
    problem = check_tensors(graph)
    if problem is not None:
        _fail(*problem)


def _check_graph_io(graph: Graph) -> None:
    for ref in graph.inputs:
        if ref.kind != "input" or ref.producer is not None:
            _fail("graph inputs", f"{ref!r} is in graph.inputs; graph inputs are refs of kind input without producer")
    if len(set(map(id, graph.inputs))) != len(graph.inputs):
        _fail("graph inputs", "graph.inputs lists a ref twice; each input is listed once")
    tops = [c for c in graph.root.children if isinstance(c, Call)]
    want = list(dict.fromkeys(r for c in tops for r in c.outputs))
    if len(want) != len(graph.outputs) or any(a is not b for a, b in zip(want, graph.outputs, strict=True)):
        _fail("graph outputs", "graph.outputs are not the outputs of the top-level calls, each once, in order")
    for call in graph.calls:
        for name, refs in (("inputs", call.inputs), ("outputs", call.outputs)):
            if len(set(map(id, refs))) != len(refs):
                _fail(f"call {name}", f"{call!r}.{name} lists a ref twice; each is listed once")


def _check_attribution(graph: Graph) -> None:
    calls = set(map(id, graph.calls))
    for op in graph.ops:
        origin, grad_of, param = op.origin, op.grad_of, op.param
        if origin is None and grad_of is None and param is None:
            continue
        if op.phase not in ("backward", "recompute"):
            _fail("attribution", f"{_op(op)} is a {op.phase} op with an origin, grad_of or param; only backward "
                                 f"and recompute ops belong to a forward call, op or parameter")
        if origin is not None and id(origin) not in calls:
            _fail("attribution", f"{_op(op)} has origin {origin!r}, which is no call of the graph (the root is "
                                 f"none: an op of no call has origin None)")
        if grad_of is not None:
            if not (0 <= grad_of.index < op.index and graph.ops[grad_of.index] is grad_of) or grad_of.phase == "optimizer":
                _fail("attribution", f"{_op(op)} has grad_of {grad_of!r}, which is no earlier op of the graph outside "
                                     f"an optimizer step; grad_of is the op whose autograd node ran it")
        if param is not None and (op.phase != "backward" or origin is not None or not isinstance(param, str) or not param):
            _fail("attribution", f"{_op(op)} accumulates the gradient of {param!r}; gradient accumulation is a "
                                 f"backward op of a named parameter, with no origin")


def _check_arguments(graph: Graph) -> None:
    for call in graph.calls:
        if call.arguments is None:
            continue
        if call.parent is not graph.root:
            _fail("arguments", f"{call!r} has arguments but is not a top-level call; only those record them")
        positional, keywords = call.arguments
        names = [name for name, _ in positional] + list(keywords)
        if len(set(names)) != len(names):
            _fail("arguments", f"{call!r} names an argument twice in {names}; argument names are unique")
        inputs = set(map(id, call.inputs))
        for value in [v for _, v in positional] + list(keywords.values()):
            for ref in iter_leaves(value):
                if isinstance(ref, TensorRef) and id(ref) not in inputs:
                    _fail("arguments", f"{call!r} was passed {ref!r}, which is not among its inputs; every tensor "
                                       f"argument of a call is one of its inputs")


def _check_constants(graph: Graph) -> None:
    if not graph.constants:
        return
    read = {ref.name: ref for _, refs in mentions(graph) for ref in refs if ref.kind == "constant"}
    for name, literal in graph.constants.items():
        ref = read.get(name)
        if ref is None:
            _fail("constants", f"graph.constants holds {name!r}, which is no constant of the graph; each recorded "
                               f"literal is one")
        if ref.dtype != literal.dtype or tuple(ref.shape) != tuple(literal.shape):
            _fail("constants", f"graph.constants[{name!r}] is {literal.dtype} {list(literal.shape)}, but the ref is "
                               f"{ref.shape_text}; a literal has its constant's dtype and shape")
        if literal.values is None and not literal.why:
            _fail("constants", f"graph.constants[{name!r}] has no values and no why; a literal without a value says why")
        if literal.values is not None and len(literal.values) != ref.numel:
            _fail("constants", f"graph.constants[{name!r}] has {len(literal.values)} values for {ref.shape_text}; a "
                               f"literal has one value per element")
def _check_times(graph: Graph) -> None:
    timed = graph.timed
    for op in graph.ops:
        t = op.time
        if t is None:
            continue
        if not timed:
            _fail("times", f"{_op(op)} has a time ({t!r}) in a graph that was not timed; only a capture with "
                           f"timing=True (graph.timed) times its ops")
        if type(t) is not float or not 0 <= t < float("inf"):
            _fail("times", f"{_op(op)} has time {t!r}; an op's time is None or a finite number of seconds >= 0")


def _check_notes(graph: Graph) -> None:
    notes = graph.notes
    if not isinstance(notes, list) or not all(isinstance(n, str) and n for n in notes):
        _fail("notes", f"graph.notes is {notes!r}; notes are a list of non-empty strings")
    if len(set(notes)) != len(notes):
        _fail("notes", "graph.notes lists a note twice; each note is listed once")
