"""Eager runs probed op by op: the values of constants, and the first op where the replay differs."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx
import torch.nn as nn
from torch.utils import _pytree as pytree

from .._structure import tensor_leaves
from .._text import one_line
from .._torch import has_values
from ..graph import Graph, Op
from ..recording import OpMode, SourceTable, user_site
from ._forward import bind_arguments, replayed_ops
from ._snapshot import Runs

# ops whose outputs hold uninitialized memory: their values are never compared
_UNINITIALIZED = ("aten.empty.", "aten.empty_like.", "aten.empty_strided.", "aten.new_empty.", "aten.new_empty_strided.")


@dataclass(frozen=True, slots=True)
class Mismatch:
    """The first op whose replayed output differs from the eager one (or whose replay raised)."""

    op: str
    target: str
    call: str
    path: str
    source: str | None
    detail: str

    def __str__(self) -> str:
        where = f" at {self.source}" if self.source else ""
        return f"%{self.op} = {self.target} in {self.call}{where}: {self.detail}"


class RunsDiffer(Exception):  # noqa: N818 - a finding, not a failure of verify
    """Another eager run of the forward issued other ops than the capture: ``mismatch`` is where they part."""

    def __init__(self, message: str, mismatch: Mismatch | None) -> None:
        super().__init__(message)
        self.mismatch = mismatch


# ---- helpers ---------------------------------------------------------------------------------
def clone_tensors(value: Any) -> Any:
    """Clones of every tensor in ``value``; a tensor passed twice stays one tensor."""
    memo: dict[int, torch.Tensor] = {}

    def one(t: torch.Tensor) -> torch.Tensor:
        if id(t) not in memo:
            memo[id(t)] = t.detach().clone()
        return memo[id(t)]

    return pytree.tree_map_only(torch.Tensor, one, value)


def _unique_tensors(found: Any) -> list[torch.Tensor]:
    seen: dict[int, torch.Tensor] = {}
    for _, t in found:
        seen.setdefault(id(t), t)
    return list(seen.values())


def _compare(got: torch.Tensor, want: torch.Tensor) -> str | None:
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"{got.dtype} {tuple(got.shape)} vs {want.dtype} {tuple(want.shape)}"
    if not (has_values(got) and has_values(want)):  # meta, fake: what exists is compared
        if got.stride() != want.stride():
            return f"strides {got.stride()} vs {want.stride()}"
        return None
    try:
        torch.testing.assert_close(got, want, equal_nan=True)
    except AssertionError as exc:
        return " ".join(line.strip() for line in str(exc).splitlines()[:3] if line.strip())
    except Exception as exc:  # noqa: BLE001 - a tensor subclass whose values cannot be read
        return f"cannot compare values: {one_line(exc)}"
    return None


def _probe(model: nn.Module, args: Any, kwargs: Any, on_op: Callable[..., bool], *,
           graph: Graph | None = None, runs: Runs | None = None) -> None:
    """Run ``model`` on clones of the inputs, handing each forward op (index, func, args, kwargs, out)
    to ``on_op`` until it returns True. With ``graph``, raise ``RunsDiffer`` where the run's ops
    part from the capture's (another op at an index, fewer or more ops)."""
    a, k = clone_tensors((args, kwargs))
    index, stopped = 0, False
    parted: tuple[int, str, str | None] | None = None
    ops = _model_ops(graph) if graph is not None else None

    def forward(func: Any, op_args: tuple[Any, ...], op_kwargs: dict[str, Any], out: Any) -> None:
        nonlocal index, stopped, parted
        if stopped:
            return
        if ops is not None and (index >= len(ops) or str(func) != ops[index].target):
            parted, stopped = (index, str(func), _user_frame()), True
            return
        stopped = bool(on_op(index, func, op_args, op_kwargs, out))
        index += 1

    try:
        with (runs.run() if runs is not None else nullcontext()), OpMode(forward):
            model(*a, **k)
    except Exception as exc:
        if graph is None:
            raise
        if parted is None:
            raise RunsDiffer(f"another run of the forward raised {one_line(exc)} (the capture's run did not): "
                             f"it does not run the same way twice", None) from exc
    if ops is not None and parted is None and not stopped and index < len(ops):
        parted = (index, "", None)
    if parted is not None:
        assert graph is not None
        raise _parting(graph, *parted)


def _model_ops(g: Graph) -> list[Op]:
    """The capture's ops a run of the model alone gives: up to the last op inside a top-level call
    (a loss, a backward or an optimizer step after it ran in the block, not in the model)."""
    inside = [op.index for op in g.ops if op.call is not g.root]
    return g.ops[: inside[-1] + 1] if inside else []


def _parting(g: Graph, index: int, func: str, frame: str | None) -> RunsDiffer:
    """Where another run of the forward parts from the capture's, as verify reports it."""
    why = ("the forward does not run the same ops each time, even from the same module and random state "
           "(state verify cannot put back: a global, a class attribute, the fields of an object it holds)")
    at = f" at {frame}" if frame else ""
    if index >= len(g.ops):
        last = g.ops[-1] if g.ops else None
        after = f"after the capture's last op %{last.name} = {last.target} in {last.call.label}" if last else "where the capture ran none"
        return RunsDiffer(f"{why}: another run issued {func}{at} {after}", None)
    op = g.ops[index]
    source = str(op.source) if op.source else None
    if func:
        detail = f"the runs part here: another run issued {func} as op {index}{at}"
    else:
        detail = f"the runs part here: another run ended after {index} ops"
    return RunsDiffer(f"{why}: they part at op {index}", Mismatch(op.name, op.target, op.call.label, op.call.path, source, detail))


def _constant_values(g: Graph, model: nn.Module, args: Any, kwargs: Any, *, runs: Runs | None = None) -> dict[str, torch.Tensor]:
    """Values of the capture's constants that it did not keep (tensor attributes, large literals), from an eager run;
    ``RunsDiffer`` when that run's ops part from the capture's before the last constant is read."""
    wanted: dict[int, list[tuple[int, str]]] = {}
    seen: set[str] = set()

    def recorded(name: str | None) -> bool:  # a literal whose value the capture kept
        literal = g.constants.get(name or "")
        return literal is not None and literal.values is not None

    for op in replayed_ops(g):  # the replay needs no constant a backward or optimizer step read
        for pos, ref in enumerate(op.inputs):  # argument order, as tensor_leaves walks the live ones
            if ref.producer is None and ref.kind == "constant" and ref.name not in seen and not recorded(ref.name):
                seen.add(ref.name)
                wanted.setdefault(op.index, []).append((pos, ref.name))
    if not wanted:
        return {}
    values: dict[str, torch.Tensor] = {}
    last = max(wanted)

    def on_op(i: int, func: Any, a: tuple[Any, ...], k: dict[str, Any], out: Any) -> bool:
        for pos, name in wanted.get(i, ()):
            t = tensor_leaves((list(a), list(k.values())))[pos]
            # a tensor attribute's value before this op, which may have written it in place
            before = runs.state.saved(t) if runs is not None else None
            values[name] = (before if before is not None else t.detach()).clone()
        return i >= last

    _probe(model, args, kwargs, on_op, graph=g, runs=runs)
    return values


class _Recording(fx.Interpreter):
    """Runs the replay and keeps a clone of every ATen node's tensors, by op index."""

    def __init__(self, gm: fx.GraphModule) -> None:
        super().__init__(gm)
        self.values: dict[int, tuple[torch.Tensor, ...]] = {}
        self.failed: tuple[int, str] | None = None

    def run_node(self, n: fx.Node) -> Any:
        try:
            result = super().run_node(n)
        except Exception as exc:
            if "dispatchtrace_op" in n.meta and self.failed is None:
                self.failed = (n.meta["dispatchtrace_op"], f"replay raised {one_line(exc)}")
            raise
        if n.op == "call_function" and (isinstance(n.target, torch._ops.OpOverload) or "dispatchtrace_aten" in n.meta):
            self.values[n.meta["dispatchtrace_op"]] = tuple(t.detach().clone() for t in tensor_leaves(result))
        return result


def _locate(g: Graph, gm: fx.GraphModule, model: nn.Module, args: Any, kwargs: Any, runs: Runs | None = None) -> Mismatch | None:
    a, k = clone_tensors((args, kwargs))
    rec = _Recording(gm)
    try:
        with (runs.run() if runs is not None else nullcontext()):
            rec.run(*bind_arguments(gm, a, k))
    except Exception:  # noqa: BLE001 - rec.failed names the op
        pass
    found: list[tuple[int, str, str | None]] = []
    if rec.failed is not None:
        index, detail = rec.failed
        stop = index
    else:
        stop = None

    def on_op(i: int, func: Any, a: tuple[Any, ...], k: dict[str, Any], out: Any) -> bool:
        if stop is not None:
            if i == stop:
                found.append((i, detail, _user_frame()))
            return i >= stop
        if str(func).startswith(_UNINITIALIZED) or i not in rec.values:
            return False
        mine = tensor_leaves(out)
        theirs = rec.values[i]
        problem = f"{len(theirs)} tensors replayed, {len(mine)} eager" if len(mine) != len(theirs) else None
        for j, (r, e) in enumerate(zip(theirs, mine, strict=False)):
            if problem is None and (p := _compare(r, e)):
                problem = f"output {j}: {p}"
        if problem:
            if torch.Tag.nondeterministic_seeded in getattr(func, "tags", ()):
                problem += (" (a random op: the replay drew other numbers than the eager run from the same seed; "
                            "a torch.Generator that verify does not reset, or a random kernel of the device)")
            found.append((i, problem, _user_frame()))
            return True
        return False

    _probe(model, args, kwargs, on_op, graph=g, runs=runs)
    if not found:
        return None
    index, detail, frame = found[0]
    op = g.ops[index]
    return Mismatch(op.name, op.target, op.call.label, op.call.path, str(op.source) if op.source else frame, detail)


def _user_frame() -> str | None:
    """``file.py:12 in forward: x = x + 1``: the innermost frame outside torch and dispatchtrace."""
    source = SourceTable().resolve(user_site(2))
    return None if source is None else str(source)
