"""The captured graph: ops linked by data dependencies, and the tree of module calls."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

from ..errors import NotKeptError
from ._records import Call, Op, Phase, PhaseView, Saved, new_call
from ._stats import Stats
from ._tensors import TensorRef
from .lint import lint as _lint

__all__ = ["Graph"]

if TYPE_CHECKING:
    import os
    from collections.abc import Iterable, Sequence
    from pathlib import Path

    import graphviz
    import torch
    import torch.fx as fx
    import torch.nn as nn
    from typing_extensions import Unpack  # (typing's from Python 3.11)

    from ..hardware import DeviceSpec, Link
    from ..render import DotOptions, RenderOptions
    from ..replay import Constants
    from ..views import (
        CallRef,
        CollapsedGraph,
        Collectives,
        Costs,
        Estimate,
        Memory,
        NonFinite,
        NonFiniteKind,
        Predicate,
        Summary,
        Tree,
    )
    from ._depth import Depth
    from ._literal import Literal


class Graph:
    """What one ``capture`` block recorded.

    ``ops`` in execution order, every phase (``op.phase``), ``calls`` in entry order (the root excluded), ``root`` the
    synthetic call that encloses the block, ``inputs`` / ``outputs`` of the block,
    ``error`` the exception that ended the block early, if any. ``constants`` holds the
    values of literal constants by name (``literals.Literal``); ``saved`` the storages autograd saved
    for backward (``Saved``, one each, in the order first saved); ``notes`` what the capture could
    not see (a ``torch.jit.script`` module's inner calls, a ``torch.compile``'d model run eagerly),
    one sentence each.
    """

    def __init__(self) -> None:
        self.root: Call = new_call("", "<capture>", 0, None)
        self.ops: list[Op] = []
        self.calls: list[Call] = []
        self.inputs: list[TensorRef] = []
        self.outputs: list[TensorRef] = []
        self.saved: list[Saved] = []
        self.constants: dict[str, Literal] = {}
        self.error: BaseException | None = None
        self.complete: bool = False
        self.notes: list[str] = []
        self.values: str = "none"
        """What the capture kept of tensor values: ``"none"``, or ``"stats"`` (``capture(values="stats")``)."""
        self.stats: dict[int, Stats] = {}
        """``Stats`` by ``TensorRef.id`` (``values="stats"``): each op's results and written tensors, each tensor
        no op made (parameters, inputs) where first read; none for meta or fake tensors."""
        self.kept: dict[int, torch.Tensor] = {}
        """Copies kept by ``capture(keep=...)``, detached and on the CPU, by ``TensorRef.id``."""
        self.timed: bool = False
        """Whether the capture measured its ops' time (``capture(timing=True)``: ``op.time``)."""

    @property
    def time(self) -> float | None:
        """Measured seconds of every op (``capture(timing=True)``, ``root.time``); ``None`` when none was timed."""
        return self.root.time

    @property
    def phase_times(self) -> dict[Phase, float]:
        """Measured seconds per phase of a training step, ``{"forward": ..., "backward": ...}``, for each phase
        with a timed op (``{}`` when none was timed)."""
        out: dict[Phase, float] = {}
        for op in self.ops:
            if op.time is not None:
                out[op.phase] = out.get(op.phase, 0.0) + op.time
        return out

    def __str__(self) -> str:
        return "\n".join(str(op) for op in self.ops)

    def __repr__(self) -> str:
        state = "complete" if self.complete else "recording"
        err = f", error={type(self.error).__name__}" if self.error is not None else ""
        return f"<dispatchtrace.Graph {len(self.ops)} ops, {len(self.calls)} calls, {state}{err}>"

    def __len__(self) -> int:
        return len(self.ops)

    def lint(self) -> None:
        """Check every invariant ``docs/semantics.md`` promises; raise ``LintError`` naming the first broken one."""
        _lint(self)

    # ---- views and exports: thin doors to the modules that implement them -----------------
    # (imports are local: graph is the data model, the layers above it import graph, not back)

    # Depth: one type and one meaning for every method below; see ``graph/_depth.py``.

    def collapse(self, depth: Depth = "ops", *, predicate: Predicate | None = None, fold: bool = False,
                 params: bool = False, noise: bool = False, phase: PhaseView = "forward") -> CollapsedGraph:
        """Smaller DAG with every module call at ``depth`` as one node; see ``views/_collapse.py``
        (``phase``: what of a training step, ``views/_phases.py``)."""
        from ..views import collapse

        return collapse(self, depth, predicate=predicate, fold=fold, params=params, noise=noise, phase=phase)

    def tree(self, depth: Depth = "all", *, ops: bool = False, noise: bool = False, at: str | Call | None = None,
             statements: bool = False, phase: PhaseView = "forward", metrics: str | Sequence[str] = ()) -> Tree:
        """Nested box-drawing tree of calls, ops and parallel branches (``metrics``: the registry's metrics to write
        on each line, ``("time", "est_time")``); see ``views/_tree.py``."""
        from ..views import tree

        return tree(self, depth, ops=ops, noise=noise, at=at, statements=statements, phase=phase, metrics=metrics)

    def to_dot(self, depth: Depth = "auto", **options: Unpack[DotOptions]) -> graphviz.Digraph:
        """A ``graphviz.Digraph`` of the collapsed graph; the options (``DotOptions``: ``predicate``, ``fold``,
        ``params``, ``noise``, ``rankdir``, ``edge_labels``, ``max_nodes``, ``title``, ``source``, ``layout``,
        ``phase``) are declared once, by ``render``'s ``DiagramOptions``, and explained in ``render/_dot.py``'s
        ``to_dot``."""
        from ..render import to_dot

        return to_dot(self, depth, **options)

    def render(self, path: str | os.PathLike[str], *, format: str | None = None,  # noqa: A002
               **options: Unpack[RenderOptions]) -> Path:
        """Write a diagram, the tree, the viewer or the capture to ``path``, the format from its suffix or
        ``format=``; returns the path written. Each format declares its own options (``RenderOptions``: ``depth``,
        ``predicate``, ``fold``, ``params``, ``noise``, ``rankdir``, ``edge_labels``, ``max_nodes``, ``title``,
        ``source``, ``layout``, ``phase``, ``force``, ``ops``, ``at``, ``statements``, ``metrics``, ``estimate``; ``render/_files.py`` says
        which format takes which): one it does not take is a ``ValueError`` naming the formats that do."""
        from ..render import render

        return render(self, path, format=format, **options)

    def _repr_mimebundle_(self, include: Iterable[str] | None = None, exclude: Iterable[str] | None = None) -> dict[str, str]:
        """Jupyter display: the default-depth diagram as SVG (text only when ``dot`` is missing)."""
        from ..render import mimebundle

        return mimebundle(self, include, exclude)

    def to_fx(self, model: nn.Module | None = None, *, constants: Constants = "error") -> fx.GraphModule:
        """A ``torch.fx.GraphModule`` that re-runs the captured ATen ops; see ``replay.to_fx``."""
        from ..replay import to_fx

        return to_fx(self, model, constants=constants)

    def costs(self) -> Costs:
        """Per-op FLOPs and bytes, per-call totals and parameters (cached); see ``views/_costs.py``."""
        from ..views import costs

        return costs(self)

    def estimate(self, spec: str | os.PathLike[str] | DeviceSpec, *, ranks_per_node: int | None = None,
                 intra_node: Link | str | None = None, inter_node: Link | str | None = None) -> Estimate:
        """How long each op and call would take on a device (a built-in name such as ``"h100"``, a ``DeviceSpec``
        or a JSON spec's path), collectives priced on its links with ``ranks_per_node`` ranks to a node and the
        step played as a schedule; see ``views/_estimate.py`` and ``docs/timeline.md``."""
        from ..views import estimate

        return estimate(self, spec, ranks_per_node=ranks_per_node, intra_node=intra_node, inter_node=inter_node)

    def memory(self) -> Memory:
        """Bytes saved for backward per call, live bytes per op and the peak (cached); see ``views/_memory.py``."""
        from ..views import memory

        return memory(self)

    def collectives(self) -> Collectives:
        """The collective ops (c10d and functional), in order, with group and bytes; see ``views/_collectives.py``."""
        from ..views import collectives

        return collectives(self)

    def summary(self, depth: Depth = "all", *, phase: PhaseView = "forward") -> Summary:
        """Table of module calls with output shape, parameters, FLOPs, bytes; see ``views/_summary.py``."""
        from ..views import summary

        return summary(self, depth, phase=phase)

    def find_ops(self, target: str = "*", *, path: str | None = None, type: str | None = None,
                 direct: bool = False) -> list[Op]:
        """Ops by target pattern (``aten.add*``), module ``path=`` / ``type=`` pattern; see ``views/_query.py``."""
        from ..views import find_ops

        return find_ops(self, target, path=path, type=type, direct=direct)

    def find_calls(self, path: str | None = None, *, type: str | None = None) -> list[Call]:
        """Calls by path pattern (``layer1.*``) and ``type=`` pattern; see ``views/_query.py``."""
        from ..views import find_calls

        return find_calls(self, path, type=type)

    def calls_of(self, module: nn.Module | str) -> list[Call]:
        """Every call of a module instance (or of a path), in order; see ``views/_query.py``."""
        from ..views import calls_of

        return calls_of(self, module)

    def ops_between(self, first: CallRef, second: CallRef, *, inclusive: bool = False) -> list[Op]:
        """Ops run after call ``first`` returned and before ``second`` began; see ``views/_query.py``."""
        from ..views import ops_between

        return ops_between(self, first, second, inclusive=inclusive)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write this capture as versioned JSON; ``dispatchtrace.load`` reads it back. See ``serialize``."""
        from ..serialize import save

        return save(self, path)

    def op(self, name: str) -> Op:
        """The op with this unique name (``convolution_3``)."""
        for op in self.ops:
            if op.name == name:
                return op
        raise KeyError(f"no op named {name!r}; op names look like {self.ops[0].name!r}" if self.ops else f"no op named {name!r}: the capture recorded no ops")

    def first_nonfinite(self, kind: NonFiniteKind = "any") -> NonFinite | None:
        """The op that first made a NaN or Inf (``kind``: ``"any"``, ``"nan"``, ``"inf"``), ``None`` when all is
        finite; needs ``capture(values="stats")``. See ``views.first_nonfinite``."""
        from ..views import first_nonfinite

        return first_nonfinite(self, kind)

    def value(self, x: Op | Call | TensorRef | str) -> torch.Tensor | tuple[torch.Tensor, ...]:
        """The copy ``capture(keep=...)`` kept of a tensor, of an op's result or of a call's output (a tuple
        where there are several), the op or call given itself or by name (an op's, ``"addmm"``, else a call's
        label, ``"layer1.0.relu#2"``); ``NotKeptError`` for one it did not keep."""
        if isinstance(x, str):
            x = next((o for o in self.ops if o.name == x), None) or next((c for c in self.calls if c.label == x), None) or x
            if isinstance(x, str):
                raise KeyError(f"no op named {x!r} and no call labelled {x!r}: g.value takes an op, a call, a tensor ref "
                               f"or the name of one (op names look like {self.ops[0].name if self.ops else 'addmm'!r})")
        if not isinstance(x, (Op, Call, TensorRef)):
            raise TypeError(f"g.value takes an op, a call, a tensor ref or an op's name or call's label, not {type(x).__name__}")
        refs = (x,) if isinstance(x, TensorRef) else x.outputs
        what = x.text if isinstance(x, TensorRef) else f"%{x.name}" if isinstance(x, Op) else x.label
        if not refs:
            raise NotKeptError(f"{what} has no tensor result: there is no value to keep")
        missing = [r for r in refs if r.id not in self.kept]
        if missing:
            hint = (f"keep={x.name!r}" if isinstance(x, Op) else f"keep={x.label!r}" if isinstance(x, Call)
                    else "keep= matching the op that made it")
            why = "" if self.kept else " (this capture kept no value)"
            raise NotKeptError(f"{what} was not kept{why}: capture with dt.capture(model, {hint}) to keep it")
        values = tuple(self.kept[r.id] for r in refs)
        return values[0] if len(values) == 1 else values

    def text(self, *, stats: bool = False, values: bool | None = None) -> str:
        """``str(g)``, one line per op; ``stats=True`` adds each result's statistics (``capture(values="stats")``)
        after its op, ``= [min, max] mean .. norm ..`` (``no stats`` where there is none: meta tensors).
        (``values=`` is the deprecated spelling of ``stats=``: *values* are a tensor's data, ``Stats`` what is
        kept instead; it goes in the next release.)"""
        if values is not None:
            warnings.warn("g.text(values=...) is g.text(stats=...) now; values= goes in the next release",
                          DeprecationWarning, stacklevel=2)
            stats = values
        if not stats:
            return str(self)
        lines = []
        for op in self.ops:
            lines.append(str(op))
            for ref in dict.fromkeys((*op.outputs, *op.mutated)):
                s = self.stats.get(ref.id)
                lines.append(f"    {ref.text} = {'no stats' if s is None else s}")
        return "\n".join(lines)
