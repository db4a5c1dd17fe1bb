"""``verify``: capture a forward, replay it as ATen ops, compare, and name the first op that differs."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx
import torch.nn as nn
from torch.utils import _pytree as pytree

from .capture import OpMode, capture
from .errors import one_line
from .graph import Graph
from .replay import ReplayError, tensor_leaves, to_fx, top_returned
from .snapshot import ModuleState, has_values
from .source import SourceTable, user_site
from .structure import leaves, template

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


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """What ``verify`` found. True when the replay reproduced every output of the forward."""

    model: str
    ops: int
    calls: int
    outputs: int
    constants: int
    ok: bool
    max_diff: float | None = None
    mismatch: Mismatch | None = None
    error: str | None = None
    no_values: str | None = None
    """Why values were not compared (``"fake tensors hold no values"``): only shapes, dtypes and strides were."""

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        head = f"{self.model}: {self.ops} ops, {self.calls} calls, {self.outputs} output{'s' * (self.outputs != 1)}"
        if self.constants:
            head += f", {self.constants} constants taken from the eager run"
        if self.ok:
            if self.max_diff is not None:
                diff = f" (max abs diff {self.max_diff:.3g})"
            else:
                diff = f" (shapes, dtypes and strides only: {self.no_values or 'values were not compared'})"
            return f"{head}: replay ok{diff}"
        lines = [f"{head}: replay FAILED"]
        if self.error:
            lines.append(f"  {self.error}")
        if self.mismatch is not None:
            lines.append(f"  first differing op: {self.mismatch}")
            lines.append(f"  module path: {self.mismatch.path or '(the model)'}")
        return "\n".join(lines)


def verify(model: nn.Module, *args: Any, **kwargs: Any) -> VerifyReport:
    """Capture ``model(*args, **kwargs)``, replay the capture with ``to_fx`` and compare outputs.

    verify touches nothing: every run it makes (the capture, the replay, and eager runs only
    where needed: values of constants and the search for the first op that differs) uses
    clones of the inputs, starts from the random state and the module state the capture
    started from, and puts the model back afterwards (``snapshot.ModuleState``: attributes,
    parameters, buffers, tensor attributes, by identity and value), also when a run raises.
    So train-mode BatchNorm keeps its running stats, a forward that updates or rebinds a buffer
    verifies, dropout in training draws the same numbers in the replay as in the capture, and
    the global random state is as before. On meta and fake tensors only shapes, dtypes and
    strides are compared (``report.no_values`` says why).

    >>> import torch, dispatchtrace as dt
    >>> print(dt.verify(torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()), torch.ones(2, 4)))
    Sequential: 4 ops, 3 calls, 1 output: replay ok (max abs diff 0)
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"verify needs an nn.Module (it names parameters through it), got {type(model).__name__}; "
                        f"wrap a function in a module whose forward calls it")
    for name, m in model.named_modules():
        if isinstance(m, nn.modules.lazy.LazyModuleMixin) and m.has_uninitialized_params():
            raise ValueError(f"verify cannot put back {name or 'the model'} ({type(m).__name__}): a lazy module whose "
                             f"parameters are made by its first forward; run the model once first (model(*inputs))")
    runs = _Runs(model)
    try:
        a1, k1 = clone_tensors((args, kwargs))
        with runs.run():
            with capture(model) as g:
                eager = model(*a1, **k1)
            want = _frozen(eager)  # before the model is put back: an output may be a buffer
        return _check(g, model, want, args, kwargs, runs)
    finally:
        runs.close()


def check(g: Graph, model: nn.Module, output: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None) -> VerifyReport:
    """``verify`` for a capture you already have: ``g`` recorded ``output = model(*args, **kwargs)``.

    ``args`` and ``kwargs`` must hold the inputs as they were before that forward (pass clones
    if it changed them in place); they are cloned again for every run. Its runs start from the
    model's state and the random state as they are now (after your capture), and leave both so:
    for a forward that changes its own state or draws random numbers, use ``verify``.
    """
    runs = _Runs(model)
    try:
        return _check(g, model, _frozen(output), args, kwargs or {}, runs)
    finally:
        runs.close()


def _check(g: Graph, model: nn.Module, output: Any, args: tuple[Any, ...], kwargs: dict[str, Any], runs: _Runs) -> VerifyReport:
    expected = _unique_tensors(leaves(output))
    base = dict(model=type(model).__name__, ops=len(g.ops), calls=len(g.calls), outputs=len(expected), constants=0,
                no_values=_no_values(expected))
    try:
        constants = _constant_values(g, model, args, kwargs, runs=runs)
    except RunsDiffer as parted:
        return VerifyReport(**base, ok=False, error=str(parted), mismatch=parted.mismatch)
    base["constants"] = len(constants)
    try:
        gm = to_fx(g, model, constants=constants)
    except ReplayError as exc:
        return VerifyReport(**base, ok=False, error=f"cannot build the replay: {exc}")
    a2, k2 = clone_tensors((args, kwargs))
    flat = _unique_tensors(leaves(a2))
    if len(flat) != len(g.inputs):
        return VerifyReport(**base, ok=False, error=f"the forward's positional arguments hold {len(flat)} tensors "
                            f"but the capture saw {len(g.inputs)} inputs")
    # what the replay returns (replay.output_structure): the forward's output in its structure
    # (namedtuples and dataclasses as dicts), or its tensors as a flat tuple when that is unknown
    want = output if top_returned(g) is not None else tuple(expected)
    try:
        with runs.run():
            got = _frozen(gm(*flat))  # before the model is put back: a result may be a buffer
        failure = None
    except Exception as exc:  # noqa: BLE001 - reported, then located
        got, failure = None, f"replay raised {one_line(exc)}"
    if failure is None:
        diffs: list[float | None] = []
        failure = _compare_structure(got, want, "output", diffs)
        if failure is None:
            diff = None if any(d is None for d in diffs) else max(diffs, default=0.0)
            return VerifyReport(**base, ok=True, max_diff=diff)
    try:
        mismatch = _locate(g, gm, model, args, kwargs, runs)
    except RunsDiffer as parted:
        return VerifyReport(**base, ok=False, error=f"{failure}\n  {parted}", mismatch=parted.mismatch)
    return VerifyReport(**base, ok=False, error=failure, mismatch=mismatch)


class RunsDiffer(Exception):  # noqa: N818 - a finding, not a failure of verify
    """Another eager run of the forward issued other ops than the capture: ``mismatch`` is where they part."""

    def __init__(self, message: str, mismatch: Mismatch | None) -> None:
        super().__init__(message)
        self.mismatch = mismatch


class _Runs:
    """Every run starts from the module state and random state verify found (CPU and, once
    initialized, CUDA generators); the model is put back after each run, even when it raises."""

    def __init__(self, model: nn.Module) -> None:
        self.state = ModuleState(model)
        self._cpu = torch.get_rng_state()
        self._cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None

    def _reset_random(self) -> None:
        torch.set_rng_state(self._cpu)
        if self._cuda is not None:
            torch.cuda.set_rng_state_all(self._cuda)

    @contextmanager
    def run(self) -> Iterator[None]:
        self._reset_random()
        try:
            yield
        finally:
            self.state.restore()

    def close(self) -> None:
        """The random state as verify found it (as ``torch.random.fork_rng`` leaves it)."""
        self._reset_random()


def _frozen(output: Any) -> Any:
    """The forward's output in the replay's structure, each tensor cloned once (a tensor returned
    twice stays one), so putting the model back cannot change it. Meta and fake tensors are kept
    as they are: they hold no values, and their strides are compared."""
    memo: dict[int, torch.Tensor] = {}

    def one(t: torch.Tensor) -> torch.Tensor:
        if id(t) not in memo:
            memo[id(t)] = t.detach().clone() if has_values(t) else t.detach()
        return memo[id(t)]

    return template(output, one)


def _no_values(tensors: list[torch.Tensor]) -> str | None:
    kinds = sorted({"meta" if t.device.type == "meta" else "fake" for t in tensors if not has_values(t)})
    return f"{' and '.join(kinds)} tensors hold no values" if kinds else None


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


def _compare_structure(got: Any, want: Any, path: str, diffs: list[float | None]) -> str | None:
    """The first difference between the replay's result and the forward's, by access path;
    ``diffs`` collects each tensor's max abs difference (``None`` for meta and fake tensors)."""
    if isinstance(want, torch.Tensor):
        if not isinstance(got, torch.Tensor):
            return f"{path}: replay returned {type(got).__name__}, the forward a tensor"
        problem = _compare(got, want)
        if problem:
            return f"{path} differs: {problem}"
        if not (has_values(got) and has_values(want)):
            diffs.append(None)
        elif want.numel():
            diffs.append(float((got.detach().double() - want.detach().double()).abs().nan_to_num(0.0).max()))
        return None
    if isinstance(want, (list, tuple)):
        if type(got) is not type(want) or len(got) != len(want):
            return (f"{path}: replay returned {type(got).__name__} of {_len(got)}, "
                    f"the forward {type(want).__name__} of {len(want)}")
        for i, (r, e) in enumerate(zip(got, want, strict=True)):
            if (problem := _compare_structure(r, e, f"{path}[{i}]", diffs)) is not None:
                return problem
        return None
    if isinstance(want, dict):
        if not isinstance(got, dict) or list(got) != list(want):
            keys = list(got) if isinstance(got, dict) else type(got).__name__
            return f"{path}: replay returned keys {keys}, the forward {list(want)}"
        for k, e in want.items():
            if (problem := _compare_structure(got[k], e, f"{path}[{k!r}]", diffs)) is not None:
                return problem
        return None
    if got != want and not (isinstance(want, float) and want != want and isinstance(got, float) and got != got):
        return f"{path}: replay returned {got!r}, the forward {want!r}"
    return None


def _len(value: Any) -> str:
    return str(len(value)) if isinstance(value, (list, tuple, dict)) else "?"


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
           graph: Graph | None = None, runs: _Runs | None = None) -> None:
    """Run ``model`` on clones of the inputs, handing each forward op (index, func, args, kwargs, out)
    to ``on_op`` until it returns True. With ``graph``, raise ``RunsDiffer`` where the run's ops
    part from the capture's (another op at an index, fewer or more ops)."""
    a, k = clone_tensors((args, kwargs))
    index, stopped = 0, False
    parted: tuple[int, str, str | None] | None = None
    ops = graph.ops if graph is not None else None

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
    if graph is not None and parted is None and not stopped and index < len(graph.ops):
        parted = (index, "", None)
    if parted is not None:
        assert graph is not None
        raise _parting(graph, *parted)


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


def _constant_values(g: Graph, model: nn.Module, args: Any, kwargs: Any, *, runs: _Runs | None = None) -> dict[str, torch.Tensor]:
    """Values of the capture's constants (keyword tensors, ``torch.tensor(...)`` in forward), from an eager run;
    ``RunsDiffer`` when that run's ops part from the capture's before the last constant is read."""
    wanted: dict[int, list[tuple[int, str]]] = {}
    seen: set[str] = set()
    for op in g.ops:
        for pos, ref in enumerate(op.inputs):  # argument order, as tensor_leaves walks the live ones
            if ref.producer is None and ref.kind == "constant" and ref.name not in seen:
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
        if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload):
            self.values[n.meta["dispatchtrace_op"]] = tuple(t.detach().clone() for t in tensor_leaves(result))
        return result


def _locate(g: Graph, gm: fx.GraphModule, model: nn.Module, args: Any, kwargs: Any, runs: _Runs | None = None) -> Mismatch | None:
    a, _ = clone_tensors((args, kwargs))
    rec = _Recording(gm)
    try:
        with (runs.run() if runs is not None else nullcontext()):
            rec.run(*_unique_tensors(leaves(a)))
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
