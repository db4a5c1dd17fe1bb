"""Which tensors of each op get ``Stats``, and when: the capture's side of ``values="stats"``."""

from __future__ import annotations

from typing import Any

import torch

from .._structure import tensor_leaves
from ..graph import Op, Stats
from . import _stats_rows
from ._schema import SCHEMAS as _schemas
from ._schema import schema_of
from ._stats import describable, stats_of
from ._stats_rows import StatsRows

Tensor = torch.Tensor
UNINITIALIZED = frozenset({"empty", "empty_like", "empty_strided", "empty_permuted", "new_empty", "new_empty_strided"})
"""Ops whose results are memory not yet written: their bytes are no value (no stats, so no false difference)."""
SAME_ELEMENTS = frozenset({"t", "transpose", "permute", "view", "_unsafe_view", "_reshape_alias", "alias", "detach",
                           "squeeze", "unsqueeze", "clone"})
"""Ops whose one result holds the very elements of their first input, rearranged at most: when the result has
as many of the same dtype (not ``view(dtype)``), it has the input's stats (no second pass over the same numbers:
a transposed weight, a flatten)."""

RELU = frozenset({"relu", "relu_"})
"""Ops whose result's range follows from their input's: a ReLU of a finite value whose min and max are known
is finite, with min and max ``max(v, 0)`` each (NaN and Inf inputs are taken in full). Only its norm needs a
pass (``stats_of(bounds=...)``): on ResNet-50, 15% of the values the stats read."""

_COLLECTIVES = ("c10d.", "_c10d_functional.", "c10d_functional.", "_c10d_functional_autograd.")
"""Namespaces of collectives and of the ops that wrap their pending results (``_wrap_tensor_autograd``)."""

Taken = Stats | int | None
"""A value's stats: taken (``Stats``), pending in row ``int`` of the device rows, or none (no values)."""


class StatsTaker:
    """Per op, after ``Recorder`` recorded it: the stats of each tensor it returned or wrote, and of each
    tensor it read whose current value has none yet, into ``stats`` by ref id: a tensor no op of the capture
    made (a parameter, a buffer, an input, optimizer state) where it is first read, and a view read after a
    write to its storage (a sibling view written in place: its ref is new, its value may be too).

    An op that writes a tensor reads its value from before the write: ``before`` (called before the op runs)
    takes the stats of the tensors of such an op that will need them, ``after`` hands them to their refs.
    ``live`` is the tracker's ``id(tensor) -> TensorState``, to know which ref a tensor will be read as.

    CPU tensors get their stats at once (``stats_of``); tensors on any other device (a GPU) get a row of
    ``StatsRows``, their reductions enqueued on the op's stream, and ``finish`` reads every row when the
    capture ends: no synchronisation per op. ``extras`` are ``capture(stats=...)``'s ``Extra`` names.

    What a collective returns or writes (a ``c10d`` op, a functional collective, what wraps its result) is
    complete only after its wait (``wait_tensor``, ``Work.wait``; on a GPU on another stream): its stats are
    taken where another op next reads it, after the wait."""

    def __init__(self, stats: dict[int, Stats], live: dict[int, Any], extras: frozenset[str] = frozenset()) -> None:
        self.stats = stats
        self._live = live
        self._mean = "mean" in extras
        self._zeros = "zeros" in extras
        self._fingerprint = "fingerprint" in extras
        self._bounded = not extras  # (the extras take their own passes: no pass to save)
        self._unwritten: set[int] = set()  # storages an ``UNINITIALIZED`` op made and no op wrote yet
        self._none: set[int] = set()  # refs without values (meta, complex): not asked again
        self._pre: dict[int, Taken] = {}  # id(tensor) -> its stats before the op that writes it ran
        self._rows: StatsRows | None = None
        self._row_of: dict[int, int] = {}  # ref id -> its row in ``_rows`` (until ``finish``)
        self._pending: dict[int, list[Any]] = {}  # storage -> the refs of it a collective returned or wrote, unread

    # ---- one tensor ----------------------------------------------------------------------------
    def _take(self, t: Tensor, bounds: tuple[float, float] | None = None) -> Taken:
        """``t``'s stats now (on the CPU), or the row its reductions will write (any other device); ``bounds``:
        its min and max where they are known and finite (``RELU``)."""
        if t.is_cpu and not _stats_rows.DEFER_ON_CPU:
            return stats_of(t, mean=self._mean, zeros=self._zeros, fingerprint=self._fingerprint, bounds=bounds)
        if not describable(t):
            return None
        if self._rows is None:
            self._rows = StatsRows(self._mean, self._zeros, self._fingerprint)
        return self._rows.add(t)

    def _put(self, rid: int, taken: Taken) -> None:
        if taken is None:
            self._none.add(rid)
        elif type(taken) is int:
            self._row_of[rid] = taken
        else:
            self.stats[rid] = taken  # type: ignore[assignment]

    def _has(self, rid: int) -> bool:
        return rid in self.stats or rid in self._row_of or rid in self._none

    # ---- one op --------------------------------------------------------------------------------
    def before(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Before an op runs: when it writes a tensor, the stats of each of its tensor arguments whose
        current value has none (their values after the op are others)."""
        self._pre = {}
        try:
            info = _schemas[id(func)]
        except KeyError:
            info = schema_of(func)
        if not info.writes or info.base in UNINITIALIZED:
            return
        live, unwritten, pre = self._live, self._unwritten, self._pre
        for t in tensor_leaves([list(args), list(kwargs.values())]):
            s = live.get(id(t))
            if s is not None and s() is t:
                if s.storage.sid in unwritten or (s.ref.version == s.storage.version and self._has(s.ref.id)):
                    continue
            if id(t) not in pre:
                pre[id(t)] = self._take(t)

    def _inputs(self, op: Op, args: tuple[Any, ...], kwargs: dict[str, Any], wrote: bool) -> None:
        """The stats of ``op``'s inputs that have none: those ``before`` took (an op that may write, such as
        batch norm's running statistics, read them before it ran), else taken now unless the op wrote."""
        unwritten = self._unwritten
        has = self._has
        pending = self._pending
        need = [i for i, r in enumerate(op.inputs) if not has(r.id) and r.storage not in unwritten
                and r.storage not in pending]
        if not need:
            return
        pre = self._pre
        tensors = tensor_leaves([list(args), list(kwargs.values())])
        for i in need:
            if i >= len(tensors):
                break
            ref, t = op.inputs[i], tensors[i]
            if ref.shape != tuple(t.shape):  # (the same leaf, checked)
                continue
            taken = pre.get(id(t), pre)  # (taken before the op ran: the value it read, written or not)
            if taken is not pre:
                self._put(ref.id, taken)  # type: ignore[arg-type]
            elif not wrote:
                self._put(ref.id, self._take(t))

    def after(self, op: Op, info: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> None:
        outputs = op.outputs
        mutated = op.mutated
        unwritten = self._unwritten
        if info.base in UNINITIALIZED:
            unwritten.update(r.storage for r in outputs)
            return
        if unwritten:  # what reads memory not yet written makes no value either (a copy of it, a view of it)
            written = {r.storage for r in mutated}
            if any(r.storage in unwritten and r.storage not in written for r in op.inputs):
                unwritten.update(r.storage for r in outputs)
                unwritten.update(written)
                return
            unwritten.difference_update(written)
        pending = self._pending
        if info.group is not None or (info.target.startswith(_COLLECTIVES) and info.base != "wait_tensor"):
            self._inputs(op, args, kwargs, bool(mutated))
            self._pre = {}
            inherited = [ref for r in op.inputs if r.storage in pending for ref in pending.pop(r.storage)]
            for r in (*outputs, *mutated):  # complete after the wait: stats where next read
                pending.setdefault(r.storage, []).append(r)
            if inherited and outputs:  # a wrapper of a pending result (``_wrap_tensor_autograd``): the same value
                pending[outputs[0].storage] += inherited
            return
        waited = [(r, pending.pop(r.storage)) for r in op.inputs if r.storage in pending] if pending else None
        self._inputs(op, args, kwargs, bool(mutated))  # read: after the wait (``wait_tensor``, ``Work.wait``)
        self._pre = {}
        if waited:  # the collective's own results and what wrapped them: the value read here
            self._share(waited)
        has = self._has
        if outputs:
            tensors = (out,) if isinstance(out, Tensor) else tensor_leaves(out)
            same: Taken = None
            if info.base in SAME_ELEMENTS and op.inputs and len(outputs) == 1:
                source = op.inputs[0]
                if source.dtype == outputs[0].dtype:
                    same = self.stats.get(source.id)
                    if same is None:
                        same = self._row_of.get(source.id)
            bounds = self._relu(op, outputs) if info.base in RELU else None
            for ref, t in zip(outputs, tensors, strict=False):
                if not has(ref.id) and ref.storage not in unwritten:  # (a view of memory not yet written: none)
                    self._put(ref.id, same if same is not None and _numel(ref) == _numel(op.inputs[0])
                              else self._take(t, bounds))
        if mutated:
            bounds = self._relu(op, mutated) if info.base in RELU else None
            for ref, t in zip(mutated, tensor_leaves(info.written(args, kwargs)), strict=False):
                if not has(ref.id):
                    self._put(ref.id, self._take(t, bounds))

    def _relu(self, op: Op, results: list[Any]) -> tuple[float, float] | None:
        """A ReLU's result's min and max from its input's stats, where those are on hand and finite (``RELU``)."""
        if not self._bounded or len(results) != 1 or not op.inputs:
            return None
        src = self.stats.get(op.inputs[0].id)
        if src is None or src.min is None or src.max is None or not src.finite or src.numel != _numel(results[0]):
            return None
        return (src.min if src.min > 0.0 else 0.0, src.max if src.max > 0.0 else 0.0)

    def _share(self, waited: list[tuple[Any, list[Any]]]) -> None:
        """Each ``(read, refs)``: ``refs`` a collective returned or wrote (or wrapped), read as ``read`` after their
        wait, get ``read``'s stats where they hold the same elements (shape and dtype)."""
        for read, refs in waited:
            taken: Taken = self.stats.get(read.id)
            if taken is None:
                taken = self._row_of.get(read.id)
            if taken is None:
                continue
            for ref in refs:
                if not self._has(ref.id) and ref.shape == read.shape and ref.dtype == read.dtype:
                    self._put(ref.id, taken)

    def finish(self) -> None:
        """Read the rows left on devices into ``stats`` (one copy to the host per device)."""
        if self._rows is None:
            return
        rows = self._rows.read()
        for rid, i in self._row_of.items():
            self.stats[rid] = rows[i]
        self._row_of.clear()
        self._rows = None


def _numel(ref: Any) -> int:
    n = 1
    for d in ref.shape:
        if type(d) is not int:
            return -1
        n *= d
    return n
