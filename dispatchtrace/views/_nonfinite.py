"""``first_nonfinite``: the op that made the first NaN or Inf of a capture taken with ``values="stats"``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from ..errors import NoValuesError
from ..graph import Call, Graph, Op, Phase, Source, Stats, TensorRef

NonFiniteKind = Literal["any", "nan", "inf"]
KINDS: tuple[NonFiniteKind, ...] = get_args(NonFiniteKind)


Verdict = Literal["made", "carried", "unsure"]

#: ops whose results are memory not yet written (``recording/_stats.py``'s list): no value, so no stats
_UNINITIALIZED = frozenset({"empty", "empty_like", "empty_strided", "empty_permuted", "new_empty", "new_empty_strided"})
#: in-place ops that overwrite what they write without reading it (its old value cannot make their result)
_OVERWRITES = frozenset({"copy_", "fill_", "zero_", "normal_", "uniform_", "bernoulli_", "random_", "exponential_",
                         "geometric_", "cauchy_", "log_normal_", "set_"})


@dataclass(frozen=True, slots=True)
class NonFinite:
    """Where a NaN or Inf first shows: ``op`` and what it ran for, and the stats of what it read and made.

    ``tensor`` is its first result (or tensor it wrote) holding the value, ``stats`` that tensor's;
    ``call`` the call that ran it, ``origin`` / ``grad_of`` the forward call and op a backward op
    differentiates, ``param`` the parameter it wrote or whose gradient it made (an optimizer step),
    ``inputs`` each tensor it read with its stats (``None``: not known). ``verdict`` says what is known:
    ``"made"`` (its inputs are all known and finite: this op made it), ``"carried"`` (no op made it: the
    value was already in ``tensor``, a tensor the capture did not make, and ``op`` is the first op that read
    it) or ``"unsure"`` (the first result holding it, but some input's stats are not known, so whether this
    op made it or read it cannot be told; ``unsure`` says which input and why).
    """

    op: Op
    kind: NonFiniteKind
    tensor: TensorRef
    stats: Stats
    inputs: tuple[tuple[TensorRef, Stats | None], ...]
    carried: bool = False
    unsure: str | None = None

    @property
    def verdict(self) -> Verdict:
        return "carried" if self.carried else "unsure" if self.unsure is not None else "made"

    @property
    def call(self) -> Call:
        return self.op.call

    @property
    def phase(self) -> Phase:
        return self.op.phase

    @property
    def origin(self) -> Call | None:
        return self.op.origin

    @property
    def grad_of(self) -> Op | None:
        return self.op.grad_of

    @property
    def source(self) -> Source | None:
        return self.op.source

    @property
    def param(self) -> str | None:
        if self.op.param is not None:
            return self.op.param
        return self.tensor.name if self.tensor.kind == "parameter" else None

    def __str__(self) -> str:
        what = {"nan": "NaN", "inf": "Inf", "any": "NaN/Inf"}[self.kind]
        op = self.op
        verb = {"carried": f"already in {self.tensor.text}, first read by", "made": "first made by",
                "unsure": "first seen in"}[self.verdict]
        where = f"in {op.call.label}"
        if op.phase != "forward":
            where += f" [{op.phase}"
            if op.origin is not None:
                where += f" of {op.origin.label}"
            if op.grad_of is not None:
                where += f", gradient of %{op.grad_of.name}"
            where += "]"
        if self.param is not None:
            where += f", parameter {self.param}"
        lines = [f"{what} {verb} %{op.name} = {op.target} {where}",
                 f"  result {self.tensor.text}: {self.tensor.shape_text} {self.stats}"]
        if self.unsure is not None:
            lines.insert(1, f"  maker uncertain: {self.unsure}")
        if op.source is not None:
            lines.insert(1, f"  at {op.source}")
        if op.grad_of is not None and op.grad_of.source is not None:
            lines.insert(2, f"  differentiating %{op.grad_of.name} at {op.grad_of.source}")
        for ref, s in self.inputs:
            lines.append(f"  input {ref.text}: {ref.shape_text} {'(no stats)' if s is None else s}")
        return "\n".join(lines)


def has_stats(graph: Graph) -> None:
    """``NoValuesError`` unless ``graph`` holds statistics, saying why it does not and what to do."""
    if graph.values != "stats":
        raise NoValuesError("this capture holds no values: capture with dt.capture(model, values=\"stats\") "
                            "(CLI: --values stats) to record the statistics of every op's results")
    if not graph.stats and graph.ops:
        raise NoValuesError("this capture was taken with values=\"stats\" but its tensors had no values (meta or fake "
                            "tensors): there is no statistic to look at; capture on a real device (cpu, cuda)")


def first_nonfinite(graph: Graph, kind: NonFiniteKind = "any") -> NonFinite | None:
    """Where the first NaN / Inf (``kind``) of the capture shows, in execution order; ``None`` when every value
    the capture saw is finite.

    The first of these events: an op whose result holds one while every tensor input is known and has none
    (``made``); the first op to read a tensor the capture did not make that holds one already (``carried``);
    an op whose result holds one while no input is known to, but some input's stats are not known
    (``unsure``: that op is not named as the maker). ``kind="any"`` is the earlier of ``"nan"``'s and
    ``"inf"``'s answers (a carried one first at the same op), so it never comes after either.
    ``NoValuesError`` when the capture has no statistics (``values="none"``, or meta tensors).
    """
    if kind not in KINDS:
        raise ValueError(f"kind={kind!r} is not one of {', '.join(map(repr, KINDS))}")
    has_stats(graph)
    if kind != "any":
        return _first(graph, kind, kind)
    found = [f for f in (_first(graph, "nan", "any"), _first(graph, "inf", "any")) if f is not None]
    return min(found, key=lambda f: (f.op.index, f.verdict != "carried"), default=None)


def _first(graph: Graph, look: NonFiniteKind, kind: NonFiniteKind) -> NonFinite | None:
    """The first event of ``look`` (``"nan"`` or ``"inf"``), reported as ``kind``."""
    stats = graph.stats
    unwritten: set[int] = set()  # storages an empty-like op made and no op wrote yet: no value, no stats
    writer: dict[int, Op] = {}  # storage -> the last op that wrote it in place
    for op in graph.ops:
        inputs = tuple((r, stats.get(r.id)) for r in op.inputs)
        bad = next(((r, s) for r, s in inputs if s is not None and s.has(look)), None)
        if bad is not None:
            r = bad[0]
            if r.producer is None:
                w = writer.get(r.storage)  # a tensor the capture did not make, but wrote: was it in before?
                if w is None:
                    return NonFinite(op, kind, r, bad[1], inputs, carried=True)  # type: ignore[arg-type]
                if all(stats.get(m.id) is None for m in w.mutated if m.storage == r.storage):
                    why = f"input {r.text} was written in place by %{w.name} ({w.target}), whose result has no stats"
                    return NonFinite(op, kind, r, bad[1], inputs, unsure=why)  # type: ignore[arg-type]
        else:
            made = next(((r, s) for r in (*op.outputs, *op.mutated) if (s := stats.get(r.id)) is not None and s.has(look)),
                        None)
            if made is not None:
                why = _unknown(op, inputs, unwritten, writer)
                return NonFinite(op, kind, made[0], made[1], inputs, unsure=why)
        _track(op, unwritten, writer)
    return None


def _base(op: Op) -> str:
    """``aten.copy_.default`` -> ``copy_``."""
    return op.target.split(".")[1] if op.target.startswith("aten.") else op.target


def _unknown(op: Op, inputs: tuple[tuple[TensorRef, Stats | None], ...], unwritten: set[int], writer: dict[int, Op]) -> str | None:
    """Why an input of ``op`` cannot be judged (the first whose stats are not known), ``None`` when all can."""
    written = {r.storage for r in op.mutated}
    overwrites = _base(op) in _OVERWRITES or op.target.endswith((".out", "_out"))
    for r, s in inputs:
        if s is not None or r.storage in unwritten or (overwrites and r.storage in written):
            continue  # known, or no value to know (memory not yet written, or overwritten unread)
        w = writer.get(r.storage)
        if w is not None and all(m.id != r.id for m in w.mutated):
            return (f"input {r.text} has no stats: %{w.name} ({w.target}) wrote its storage through another view, "
                    "and its value after that write was not taken")
        if r.dtype.startswith("complex"):
            return f"input {r.text} has no stats: a complex tensor ({r.shape_text}) has none"
        if r.producer is None:
            return f"input {r.text} ({r.kind}) has no stats: the capture did not make it, and its value was not taken"
        return f"input {r.text} has no stats"
    return None


def _track(op: Op, unwritten: set[int], writer: dict[int, Op]) -> None:
    """What ``op`` leaves behind: the storages it wrote (their last writer), memory not yet written."""
    written = {r.storage for r in op.mutated}
    for sid in written:
        writer[sid] = op
    if _base(op) in _UNINITIALIZED:
        unwritten.update(r.storage for r in op.outputs)
    elif unwritten:
        if any(r.storage in unwritten and r.storage not in written for r in op.inputs):
            unwritten.update(r.storage for r in op.outputs)
            unwritten.update(written)
        unwritten.difference_update(written)
