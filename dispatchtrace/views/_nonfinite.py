"""``first_nonfinite``: the op that made the first NaN or Inf of a capture taken with ``values="stats"``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from ..errors import NoValuesError
from ..graph import Call, Graph, Op, Phase, Source, Stats, TensorRef

Kind = Literal["any", "nan", "inf"]
KINDS: tuple[Kind, ...] = get_args(Kind)


@dataclass(frozen=True, slots=True)
class NonFinite:
    """Where a NaN or Inf was first made: ``op`` and what it ran for, and the stats of what it read and made.

    ``tensor`` is its first result (or tensor it wrote) holding the value, ``stats`` that tensor's;
    ``call`` the call that ran it, ``origin`` / ``grad_of`` the forward call and op a backward op
    differentiates, ``param`` the parameter it wrote or whose gradient it made (an optimizer step),
    ``inputs`` each tensor it read with its stats (``None``: not known). ``carried`` is ``True`` when no
    op made it: the value was already in ``tensor``, a tensor the capture did not make (an input, a parameter),
    and ``op`` is the first op that read it.
    """

    op: Op
    kind: Kind
    tensor: TensorRef
    stats: Stats
    inputs: tuple[tuple[TensorRef, Stats | None], ...]
    carried: bool = False

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
        verb = f"already in {self.tensor.text}, first read by" if self.carried else "first made by"
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
                 f"  result {self.tensor.text}: {self.tensor.label} {self.stats}"]
        if op.source is not None:
            lines.insert(1, f"  at {op.source}")
        if op.grad_of is not None and op.grad_of.source is not None:
            lines.insert(2, f"  differentiating %{op.grad_of.name} at {op.grad_of.source}")
        for ref, s in self.inputs:
            lines.append(f"  input {ref.text}: {ref.label} {'(no stats)' if s is None else s}")
        return "\n".join(lines)


def has_stats(graph: Graph) -> None:
    """``NoValuesError`` unless ``graph`` holds statistics, saying why it does not and what to do."""
    if graph.values != "stats":
        raise NoValuesError("this capture holds no values: capture with dt.capture(model, values=\"stats\") "
                            "(CLI: --values stats) to record the statistics of every op's results")
    if not graph.stats and graph.ops:
        raise NoValuesError("this capture was taken with values=\"stats\" but its tensors had no values (meta or fake "
                            "tensors): there is no statistic to look at; capture on a real device (cpu, cuda)")


def first_nonfinite(graph: Graph, kind: Kind = "any") -> NonFinite | None:
    """The first op, in execution order, whose result has a NaN / an Inf (``kind``) while none of its tensor
    inputs has one; ``None`` when every value the capture saw is finite.

    Where no op made it (an input or parameter held it already), the first op that read it, ``carried``.
    ``NoValuesError`` when the capture has no statistics (``values="none"``, or meta tensors).
    """
    if kind not in KINDS:
        raise ValueError(f"kind={kind!r} is not one of {', '.join(map(repr, KINDS))}")
    has_stats(graph)
    stats = graph.stats
    carried: NonFinite | None = None
    for op in graph.ops:
        made = None
        for ref in (*op.outputs, *op.mutated):
            s = stats.get(ref.id)
            if s is not None and s.has(kind):
                made = (ref, s)
                break
        inputs = tuple((r, stats.get(r.id)) for r in op.inputs)
        bad = next(((r, s) for r, s in inputs if s is not None and s.has(kind)), None)
        if made is not None and bad is None:
            return NonFinite(op, kind, made[0], made[1], inputs)
        if carried is None and bad is not None and bad[0].producer is None:
            carried = NonFinite(op, kind, bad[0], bad[1], inputs, carried=True)  # type: ignore[arg-type]
    return carried
