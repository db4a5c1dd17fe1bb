"""``verify``: capture a forward, replay it as ATen ops, compare, and name the first op that differs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn as nn

from .._structure import Built, leaves, template
from .._text import one_line
from .._torch import has_values, pytree_node
from ..graph import Graph
from ..recording import capture
from ._forward import bind_arguments, top_returned
from ._fx import ReplayError, to_fx
from ._locate import Mismatch, RunsDiffer, _compare, _constant_values, _locate, _unique_tensors, clone_tensors
from ._snapshot import Runs


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
    runs = Runs(model)
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
    runs = Runs(model)
    try:
        return _check(g, model, _frozen(output), args, kwargs or {}, runs)
    finally:
        runs.close()


def _check(g: Graph, model: nn.Module, output: Any, args: tuple[Any, ...], kwargs: dict[str, Any], runs: Runs) -> VerifyReport:
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
    try:
        flat = bind_arguments(gm, a2, k2)
    except TypeError as exc:
        return VerifyReport(**base, ok=False, error=f"the replay cannot take the forward's arguments: {exc}")
    if gm.meta["dispatchtrace_signature"] == "inputs" and len(flat) != len(g.inputs):
        return VerifyReport(**base, ok=False, error=f"the forward's positional arguments hold {len(flat)} tensors "
                            f"but the capture saw {len(g.inputs)} inputs")
    # what the replay returns (forward.output_structure): the forward's output in its structure
    # (namedtuples and dataclasses as dicts), or its tensors as a flat tuple when that is unknown
    want = output if top_returned(g) is not None else tuple(expected)
    try:
        with runs.run():
            got = _frozen(gm(*flat))  # placeholders in order; before the model is put back: a result may be a buffer
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


def _frozen(output: Any) -> Any:
    """The forward's output in the replay's structure, each tensor cloned once (a tensor returned
    twice stays one), so putting the model back cannot change it. Meta and fake tensors are kept
    as they are: they hold no values, and their strides are compared."""
    memo: dict[int, torch.Tensor] = {}

    def one(t: torch.Tensor) -> torch.Tensor:
        if id(t) not in memo:
            memo[id(t)] = t.detach().clone() if has_values(t) else t.detach()
        return memo[id(t)]

    return template(output, one, pytree_node)


def _no_values(tensors: list[torch.Tensor]) -> str | None:
    kinds = sorted({"meta" if t.device.type == "meta" else "fake" for t in tensors if not has_values(t)})
    return f"{' and '.join(kinds)} tensors hold no values" if kinds else None


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
    if isinstance(want, Built):
        if not isinstance(got, Built) or (got.type, got.how) != (want.type, want.how):
            return f"{path}: replay returned {_kind(got)}, the forward a {want.type}"
        return _compare_structure(got.fields, want.fields, path, diffs)
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


def _kind(value: Any) -> str:
    return value.type if isinstance(value, Built) else type(value).__name__


def _len(value: Any) -> str:
    return str(len(value)) if isinstance(value, (list, tuple, dict)) else "?"


