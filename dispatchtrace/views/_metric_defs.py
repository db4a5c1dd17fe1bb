"""The built-in metrics: costs, parameters, a training step's split, the statistics' columns (``views/_metrics.py``).

Registered in this order, which is the summary's column order: each ``Metric`` names where it shows
(``shown``); a metric of the user's own shows everywhere unless it says otherwise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._attrs import trainable_frozen
from ._costs import costs
from ._memory import memory
from ._metrics import Metric, capture_of, register_metric, shared, with_stats
from ._phases import PhaseGraph, has_backward, has_training, phase_graph

if TYPE_CHECKING:
    from ..graph import Call, Graph, Op

SUMMARY, VIEWER, EXPLORER = ("summary",), ("viewer",), ("model_explorer",)
"""(``?`` is the text of a count that is unknown; ``-`` stays for FLOPs: no formula.)"""


def _cost(graph: Graph, call: Call) -> Any:
    return shared(graph, costs).call(call)


def _original(view: Graph, call: Call) -> Call:
    """The capture's call that ``call`` of a phase view shows (the root: the capture's root)."""
    if call.parent is None:
        return capture_of(view).root
    return view.original[call] if isinstance(view, PhaseGraph) else call


# ---- costs (views/_costs.py) -----------------------------------------------------------------------

def _params(graph: Graph, call: Call) -> int | None:
    return _cost(graph, call).params


def _self_params(graph: Graph, call: Call) -> int | None:
    return _cost(graph, call).self_params


def _flops(graph: Graph, call: Call) -> int | None:
    return _cost(graph, call).flops


def _self_flops(graph: Graph, call: Call) -> int | None:
    return _cost(graph, call).self_flops


def _output_bytes(graph: Graph, call: Call) -> int | None:
    return _cost(graph, call).output_bytes


def _bytes(graph: Graph, call: Call) -> int | None:
    c = shared(graph, costs)
    return c.call(call).bytes if c.sized(call) else None


def _self_bytes(graph: Graph, call: Call) -> int | None:
    c = shared(graph, costs)
    return c.call(call).self_bytes if c.sized(call) else None


def _op_flops(graph: Graph, op: Op) -> int | None:
    return shared(graph, costs).op(op).flops


def _op_bytes(graph: Graph, op: Op) -> int | None:
    return shared(graph, costs).op(op).bytes


# ---- the live modules' parameters (views/_attrs.py): None once the model is gone ---------------------

def _trainable_frozen(graph: Graph, call: Call) -> tuple[int | None, int | None]:
    return trainable_frozen(call.module) if call.parent is not None else shared(graph, _total_trainable)


def _trainable(graph: Graph, call: Call) -> int | None:
    return _trainable_frozen(graph, call)[0]


def _frozen(graph: Graph, call: Call) -> int | None:
    return _trainable_frozen(graph, call)[1]


def _total_trainable(graph: Graph) -> tuple[int | None, int | None]:
    """Trainable and frozen elements of every called module's parameters, each tensor once."""
    seen: dict[int, Any] = {}
    groups = graph.groups if isinstance(graph, PhaseGraph) else set()
    for call in graph.calls:
        if call in groups:
            continue
        module = call.module
        if module is None:
            return None, None
        for p in module.parameters():
            seen[id(p)] = p
    trainable = sum(p.numel() for p in seen.values() if p.requires_grad)
    return trainable, sum(p.numel() for p in seen.values()) - trainable


# ---- a training step (views/_phases.py, views/_memory.py) ------------------------------------------

class _Split:
    """Forward FLOPs, backward FLOPs (by origin) and saved bytes of each capture call of a training step."""

    def __init__(self, graph: Graph) -> None:
        self.memory = memory(graph)
        self.flops: list[dict[Call, int | None]] = []
        for phase in ("forward", "backward") if has_backward(graph) else ("forward",):
            view = phase_graph(graph, phase)  # type: ignore[arg-type]
            c = costs(view)
            pairs = [(view.root, graph.root), *((v, _original(view, v)) for v in view.calls)]
            self.flops.append({orig: c.call(v).flops for v, orig in pairs})


def _split(graph: Graph) -> _Split:
    return shared(capture_of(graph), _Split)


def _forward_flops(graph: Graph, call: Call) -> int | None:
    return _split(graph).flops[0].get(_original(graph, call))


def _backward_flops(graph: Graph, call: Call) -> int | None:
    flops = _split(graph).flops
    return flops[1].get(_original(graph, call)) if len(flops) > 1 else None


def _saved(graph: Graph, call: Call) -> int | None:
    return _split(graph).memory.call(_original(graph, call)).saved


# ---- values="stats" (graph/_stats.py) ----------------------------------------------------------------

def _outputs(graph: Graph, call: Call) -> Any:
    return graph.outputs if call.parent is None else call.outputs


def _found(graph: Graph, refs: Any) -> list[Any]:
    stats = capture_of(graph).stats
    return [s for s in (stats.get(r.id) for r in refs) if s is not None]


def _norm(graph: Graph, call: Call) -> float | None:
    """The L2 norm of the call's first output with statistics."""
    found = _found(graph, _outputs(graph, call))
    return found[0].norm if found else None


def _op_norm(graph: Graph, op: Op) -> float | None:
    """The largest L2 norm of the op's results."""
    norms = [s.norm for s in _found(graph, (*op.outputs, *op.mutated)) if s.norm is not None]
    return max(norms) if norms else None


def _nonfinite(graph: Graph, call: Call) -> int | None:
    """NaN and Inf elements of the call's outputs."""
    found = _found(graph, _outputs(graph, call))
    return sum(s.nonfinite for s in found) if found else None


BUILTIN = (
    Metric(name="params", header="Params", title="parameters", call=_params, unknown="?"),
    Metric(name="self_params", header="Own params", title="own parameters", call=_self_params, colour=False,
           shown=VIEWER + EXPLORER),
    Metric(name="trainable", header="Trainable", call=_trainable, unknown="?", shown=SUMMARY),
    Metric(name="frozen", header="Frozen", call=_frozen, unknown="?", shown=SUMMARY),
    Metric(name="flops", header="FLOPs", unit="FLOPs", op=_op_flops, call=_flops),
    Metric(name="self_flops", header="Own FLOPs", unit="FLOPs", title="FLOPs in its own ops", call=_self_flops,
           colour=False, shown=VIEWER + EXPLORER),
    Metric(name="output_bytes", header="Out bytes", unit="B", call=_output_bytes, unknown="?", shown=SUMMARY),
    Metric(name="bytes", header="Written", unit="B", title="bytes written", op=_op_bytes, call=_bytes, unknown="?"),
    Metric(name="self_bytes", header="Own written", unit="B", title="bytes its own ops wrote", call=_self_bytes,
           colour=False, shown=VIEWER + EXPLORER),
    Metric(name="forward_flops", header="Fwd FLOPs", unit="FLOPs", title="forward FLOPs", call=_forward_flops,
           when=has_training, shown=SUMMARY),
    Metric(name="backward_flops", header="Bwd FLOPs", unit="FLOPs", title="backward FLOPs", call=_backward_flops,
           when=has_training, shown=SUMMARY),
    Metric(name="saved", header="Saved", unit="B", title="bytes saved for backward", call=_saved, when=has_training,
           shown=SUMMARY),
    Metric(name="norm", header="Out norm", title="L2 norm of the results", op=_op_norm, call=_norm,
           format=lambda v: f"{v:.4g}", when=with_stats, shown=SUMMARY + VIEWER, fold="max"),
    Metric(name="nonfinite", header="NaN/Inf", title="NaN and Inf elements of the outputs", call=_nonfinite,
           format=str, when=with_stats, shown=SUMMARY, colour=False),
)

for _m in BUILTIN:
    register_metric(_m)
