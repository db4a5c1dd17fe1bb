"""Graph.lint: every invariant, broken on purpose in a real capture (live or as its saved JSON), is named."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from models import needs_node_hook
from vision import torchvision

import dispatchtrace as dt
from dispatchtrace.graph import Graph
from dispatchtrace.graph.lint import LintError
from dispatchtrace.serialize import FormatError, from_json, to_json
from dispatchtrace.serialize._values import OP_FIELDS

Data = dict[str, Any]


@pytest.fixture(scope="module")
def capture() -> Graph:
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    x = torch.randn(1, 3, 64, 64)
    with dt.capture(model) as g:
        model(x)
    return g


@pytest.fixture()
def data(capture: Graph) -> Data:
    return copy.deepcopy(to_json(capture))


def _fresh(capture: Graph) -> Graph:
    """A graph of its own to break (the fixture's stays intact)."""
    return from_json(copy.deepcopy(to_json(capture)))


F = {name: i for i, name in enumerate(OP_FIELDS)}  # an op row's fields (format 3)


def _rows(data: Data) -> dict[int, list[Any]]:
    return {row[0]: row for row in data["tensors"]}


def _first(data: Data, pred: Callable[[list[Any]], bool]) -> int:
    return next(i for i, o in enumerate(data["ops"]) if pred(o))


def test_a_capture_and_its_loaded_copy_lint(capture: Graph, tmp_path: Path) -> None:
    capture.lint()
    capture.save(tmp_path / "t.json")
    dt.load(tmp_path / "t.json").lint()


def test_ops_reordered_by_hand_are_refused_on_load(data: Data, tmp_path: Path) -> None:
    ops = data["ops"]
    i = _first(data, lambda o: o[F["producers"]] and o[F["producers"]][-1] > 0)
    ops[i - 1], ops[i] = ops[i], ops[i - 1]
    path = tmp_path / "reordered.json"
    path.write_text(json.dumps(data))
    with pytest.raises(FormatError, match=r"reordered\.json is not a consistent dispatchtrace capture") as err:
        dt.load(path)
    assert any(w in str(err.value) for w in ("precede", "order they ran", "after its producer", "ran in call")), err.value


def _broken(data: Data, match: str) -> None:
    with pytest.raises(FormatError, match=match):
        from_json(data)


def test_op_names_are_unique(data: Data) -> None:
    data["ops"][5][F["name"]] = data["ops"][4][F["name"]]
    _broken(data, r"ops: ops 4 and 5 are both named .*op names are unique")


def test_a_call_depth_is_its_parents_plus_one(data: Data) -> None:
    data["calls"][3]["depth"] += 1
    _broken(data, r"a call's depth is its parent's plus one")


def test_an_op_is_a_child_of_the_call_it_ran_in(data: Data) -> None:
    data["ops"][10][F["call"]] = 0
    _broken(data, r"op 10 \(.*\) says it ran in call 0, but is a child of call")


def test_call_indices_count_the_calls_of_a_module(data: Data) -> None:
    k = next(i for i, c in enumerate(data["calls"]) if i and c["repeat"] == 1)
    data["calls"][k]["index"] = 1
    _broken(data, r"call index: .*0 <= index < repeat")
    k2 = next(i for i, c in enumerate(data["calls"]) if i and c["repeat"] == 1)
    data2 = copy.deepcopy(data)
    data2["calls"][k]["index"] = 0
    data2["calls"][k2]["repeat"] = 3
    data2["calls"][k2]["index"] = 2
    _broken(data2, r"call index: .*numbered 0, 1, 2")


def test_an_op_depends_on_the_producer_of_what_it_reads(data: Data) -> None:
    i = _first(data, lambda o: bool(o[F["producers"]]))
    data["ops"][i][F["producers"]] = data["ops"][i][F["producers"]][1:] if len(data["ops"][i][F["producers"]]) > 1 else []
    _broken(data, r"producers: .*an op depends on the producer of every tensor it reads")


def test_producers_precede_the_op(data: Data) -> None:
    data["ops"][3][F["producers"]].append(7)
    _broken(data, r"lists op 7 as a producer, which did not run before it: every op's producers precede it")


def test_a_producer_made_what_the_op_reads(data: Data) -> None:
    i = _first(data, lambda o: o[F["producers"]] == [o[F["producers"]][0]] if o[F["producers"]] else False)
    stranger = next(j for j in range(i) if j not in data["ops"][i][F["producers"]])
    data["ops"][i][F["producers"]].insert(0, stranger)
    data["ops"][i][F["producers"]].sort()
    _broken(data, r"producers: .*neither produced a tensor it reads nor wrote")


def test_users_are_exactly_the_ops_that_list_the_producer(capture: Graph) -> None:
    g = _fresh(capture)
    g.ops[3].users += (g.ops[40],)
    with pytest.raises(LintError, match=r"users: %.*users are exactly those, in execution order"):
        g.lint()


def test_inputs_are_the_tensor_arguments_in_order(data: Data) -> None:
    i = _first(data, lambda o: len(o[F["inputs"]]) >= 2)
    data["ops"][i][F["inputs"]].reverse()
    _broken(data, r"inputs: .*are not the tensor refs of its args and kwargs, in order")


def test_a_tensor_is_its_producers_output_at_its_slot(data: Data) -> None:
    rows = _rows(data)
    i = _first(data, lambda o: bool(o[F["inputs"]]) and rows[o[F["inputs"]][0]][6] is not None and len(o[F["outputs"]]) == 1)
    out = rows[data["ops"][i][F["outputs"]][0]]
    out[6] = out[6] - 1 if out[6] > 0 else out[6]  # this op's output now names the op before it
    _broken(data, r"tensors: .*(an op's outputs are its own|is not output)")


def test_a_ref_without_producer_is_no_activation(data: Data) -> None:
    rid = data["inputs"][0]
    _rows(data)[rid][7] = "activation"
    _broken(data, r"activation without producer|graph inputs")


def test_storage_versions_never_decrease(data: Data) -> None:
    rows = _rows(data)
    i = _first(data, lambda o: any(rows[r][5] > 0 for r in o[F["inputs"]]) and not o[F["mutated"]])
    rid = next(r for r in data["ops"][i][F["inputs"]] if rows[r][5] > 0)
    stale = [max(rows) + 1, *rows[rid][1:]]
    stale[5] = 0  # op i now reads the storage at version 0, after an earlier op saw a later one
    data["tensors"].append(stale)
    op = data["ops"][i]
    op[F["inputs"]] = [stale[0] if r == rid else r for r in op[F["inputs"]]]
    op[F["args"]] = json.loads(json.dumps(op[F["args"]]).replace(f'{{"$t": {rid}}}', f'{{"$t": {stale[0]}}}'))
    _broken(data, r"versions: .*versions of a storage never decrease")


def test_a_write_makes_a_new_version(data: Data) -> None:
    rows = _rows(data)
    i = _first(data, lambda o: bool(o[F["mutated"]]) and bool(o[F["inputs"]]))
    read = next(r for r in data["ops"][i][F["inputs"]] if rows[r][4] == rows[data["ops"][i][F["mutated"]][0]][4])
    rows[data["ops"][i][F["mutated"]][0]][5] = rows[read][5]
    _broken(data, r"mutated: .*a write makes a new version")


def test_is_view_means_shared_storage_and_no_write(data: Data) -> None:
    i = _first(data, lambda o: o[F["is_view"]])
    data["ops"][i][F["is_view"]] = False
    _broken(data, r"mutated: .*is_view is true exactly when the op writes nothing")


def test_graph_inputs_are_inputs(data: Data) -> None:
    rows = _rows(data)
    param = next(rid for rid, row in rows.items() if row[7] == "parameter")
    data["inputs"].append(param)
    _broken(data, r"graph inputs: .*graph inputs are refs of kind input")


def test_graph_outputs_are_the_top_level_calls_outputs(data: Data) -> None:
    data["outputs"] = []
    _broken(data, r"graph outputs: graph.outputs are not the outputs of the top-level calls")


def test_calls_are_listed_in_entry_order(capture: Graph) -> None:
    g = _fresh(capture)
    g.calls[1], g.calls[2] = g.calls[2], g.calls[1]
    with pytest.raises(LintError, match=r"calls: graph.calls\[1\] is not the call entered 1th"):
        g.lint()


def test_a_calls_ops_are_one_contiguous_range_in_order(capture: Graph) -> None:
    g = _fresh(capture)
    call = next(c for c in g.calls if len(c.children) >= 2 and all(c2.__class__.__name__ == "Op" for c2 in c.children))
    call.children.reverse()
    call.ops.reverse()
    with pytest.raises(LintError, match=r"children: .*one contiguous range inside its parent's"):
        g.lint()


def test_call_ops_are_its_op_children(capture: Graph) -> None:
    g = _fresh(capture)
    call = next(c for c in g.calls if c.ops)
    call.ops.pop()
    with pytest.raises(LintError, match=r"children: .*a call's ops are its op children"):
        g.lint()


def _step() -> Graph:
    model = torch.nn.Linear(3, 2)
    with dt.capture(model) as g:
        model(torch.randn(1, 3)).sum().backward()
    g.lint()
    return g


def test_phases_are_known_and_backward_ops_are_in_order() -> None:
    g = _step()
    assert {op.phase for op in g.ops} == {"forward", "backward"}
    next(op for op in g.ops if op.phase == "backward").phase = "sideways"  # type: ignore[assignment]
    with pytest.raises(LintError, match=r"ops: .*has phase 'sideways'; an op's phase is one of forward, backward"):
        g.lint()
    g = _step()
    g.ops.reverse()
    with pytest.raises(LintError, match=r"ops: .*listed in execution order"):
        g.lint()


@needs_node_hook
def test_attribution_belongs_to_backward_ops() -> None:
    g = _step()
    forward = g.ops[0]
    forward.origin = g.calls[0]
    with pytest.raises(LintError, match=r"attribution: .*a forward op with an origin"):
        g.lint()
    g = _step()
    backward = next(op for op in g.ops if op.origin is not None)
    backward.origin = g.root
    with pytest.raises(LintError, match=r"attribution: .*no call of the graph"):
        g.lint()
    g = _step()
    backward = next(op for op in g.ops if op.grad_of is not None)
    backward.grad_of = g.ops[-1]
    with pytest.raises(LintError, match=r"attribution: .*no earlier op"):
        g.lint()
    g = _step()
    accumulate = next(op for op in g.ops if op.param is not None)
    accumulate.origin = g.calls[0]
    with pytest.raises(LintError, match=r"attribution: .*named parameter, with no origin"):
        g.lint()


class _Literal(torch.nn.Module):
    def forward(self, x: torch.Tensor, *, scale: torch.Tensor) -> torch.Tensor:
        return x * scale + torch.tensor([1.0, 2.0])


def _literal_data() -> Data:
    m, x, scale = _Literal(), torch.randn(2), torch.tensor(3.0)
    with dt.capture(m) as g:
        m(x, scale=scale)
    g.lint()
    return copy.deepcopy(to_json(g))


def test_a_literal_has_its_constants_dtype_shape_and_values() -> None:
    data = _literal_data()
    assert data["constants"]["_tensor_constant0"]["values"] == [1.0, 2.0]
    from_json(copy.deepcopy(data)).lint()
    broken = copy.deepcopy(data)
    broken["constants"]["_tensor_constant0"]["values"] = [1.0]
    _broken(broken, r"constants: .* has 1 values for f32\[2\]")
    broken = copy.deepcopy(data)
    broken["constants"]["_tensor_constant0"]["shape"] = [3]
    _broken(broken, r"constants: .* dtype and shape")
    broken = copy.deepcopy(data)
    broken["constants"]["_tensor_constant7"] = broken["constants"]["_tensor_constant0"]
    _broken(broken, r"constants: graph.constants holds '_tensor_constant7', which is no constant")
    broken = copy.deepcopy(data)
    broken["constants"]["_tensor_constant0"].update(values=None, why=None)
    _broken(broken, r"constants: .* no values and no why")


def test_a_top_level_calls_arguments_are_among_its_inputs() -> None:
    data = _literal_data()
    positional, keywords = data["calls"][1]["arguments"]
    assert [name for name, _ in positional] == ["x"] and [k for k, _ in keywords["$dict"]] == ["scale"]
    broken = copy.deepcopy(data)
    broken["calls"][1]["inputs"] = broken["calls"][1]["inputs"][:1]
    _broken(broken, r"arguments: .* not among its inputs")
    broken = copy.deepcopy(data)
    broken["calls"][1]["arguments"][1]["$dict"][0][0] = "x"
    _broken(broken, r"arguments: .* names an argument twice")
