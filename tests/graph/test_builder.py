"""GraphBuilder: the one way calls and ops enter a Graph."""

from __future__ import annotations

import re
from pathlib import Path

import torch
from models import coolcnn

from dispatchtrace.graph import GraphBuilder, TensorRef


def _ref(rid: int, producer=None, kind="activation", storage=None) -> TensorRef:  # type: ignore[no-untyped-def]
    return TensorRef(rid, (2,), "float32", "cpu", rid if storage is None else storage, 0, producer, kind,
                     None if producer else f"t{rid}")


def test_calls_and_ops_are_linked_where_they_belong() -> None:
    b = GraphBuilder()
    root = b.graph.root
    outer = b.add_call(root, "", "Net", 0)
    inner = b.add_call(outer, "fc", "Linear", 0, repeat=2)
    x = _ref(0, kind="input")
    a = b.add_op(inner, "relu", "aten.relu.default", (x,), {}, (x,), ())
    ya = _ref(1, a)
    b.set_outputs(a, (ya,))
    m = b.add_op(outer, "mul", "aten.mul.Tensor", (ya, 2), {}, (ya,), (a,))
    b.set_outputs(m, (_ref(2, m),))
    assert (outer.depth, inner.depth, inner.repeat) == (0, 1, 2)
    assert b.graph.calls == [outer, inner] and outer.children == [inner, m] and inner.children == [a]
    assert inner.ops == [a] and outer.ops == [m] and b.graph.ops == [a, m]
    assert [op.index for op in b.graph.ops] == [0, 1] and a.users == (m,) and m.producers == (a,)
    bw = b.add_op(root, "mul_1", "aten.mul.Tensor", (ya, 3), {}, (ya,), (a,), phase="backward")
    b.set_attribution(bw, phase="backward", origin=inner, grad_of=a)
    assert (bw.index, bw.phase, bw.call, bw.origin, bw.grad_of) == (2, "backward", root, inner, a)
    assert b.graph.ops == [a, m, bw] and a.users == (m, bw)


def test_io_setters_keep_each_ref_once() -> None:
    b = GraphBuilder()
    call = b.add_call(b.graph.root, "", "Net", 0)
    x = _ref(0, kind="input")
    b.set_call_inputs(call, [x, x])
    b.set_call_result(call, [x, x], [x, None])
    b.set_graph_io([x, x], [x])
    g = b.finish(ValueError("stop"))
    assert call.inputs == (x,) and call.outputs == (x,) and call.returned == [x, None]
    assert g.inputs == [x] and g.outputs == [x] and g.complete and isinstance(g.error, ValueError)


def test_a_real_capture_built_through_the_builder_lints() -> None:
    g = coolcnn()
    g.lint()
    assert len(g.ops) > 10 and all(u.index > op.index for op in g.ops for u in op.users)


def test_nothing_else_adds_to_the_graphs_lists() -> None:
    package = Path(__file__).resolve().parents[2] / "dispatchtrace"
    pattern = re.compile(r"\.(children|ops|users|calls)\.(append|extend|insert)\(|"
                         r"\.(outputs|inputs|mutated|producers|users|children) = ")
    # views/_phases.py copies a finished capture into a phase view whose ops are regrouped by origin:
    # producers may come later in its walk order, which GraphBuilder's add-in-order contract cannot express
    offenders = [f"{p.name}:{i}" for p in package.rglob("*.py") if p.name not in ("_builder.py", "_phases.py")
                 for i, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert offenders == [], f"build graphs through dispatchtrace.graph.GraphBuilder: {offenders}"


def test_new_call_fills_calls_fields_in_their_declared_order() -> None:
    # new_call builds a Call from 16 positional values (the fastest way, once per module call): this pins the
    # order it assumes to the order Call declares, so a field added or moved in Call fails here, not silently
    import dataclasses
    import weakref

    from dispatchtrace.graph import Call, new_call

    assert [f.name for f in dataclasses.fields(Call)] == [
        "path", "type", "index", "depth", "parent", "children", "ops", "inputs", "outputs", "repeat", "params",
        "self_params", "source", "returned", "arguments", "_module"]
    module = torch.nn.ReLU()
    root = new_call("", "<capture>", 0, None)
    ref = TensorRef(0, (2,), "float32", "cpu", 0, 0, None, "input", "x", 0)
    call = new_call("act", "ReLU", 3, root, module, (ref,))
    assert (call.path, call.type, call.index, call.depth, call.parent) == ("act", "ReLU", 3, 0, root)
    assert (call.children, call.ops, call.inputs, call.outputs, call.repeat) == ([], [], (ref,), (), 1)
    assert (call.params, call.self_params, call.source, call.returned, call.arguments) == (None,) * 5
    assert isinstance(call._module, weakref.ref) and call._module() is module and root.depth == -1
