"""Save/load: a loaded capture is a real Graph whose text, views, costs and summary equal the original's."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn as nn
from models import needs_node_hook
from vision import torchvision

import dispatchtrace as dt
from dispatchtrace.graph import Call, Graph, Group, Op, Opaque, Saved, Source, TensorRef
from dispatchtrace.serialize import FormatError, dumps, from_json, load, loads
from dispatchtrace.serialize._values import OP_EXTRA, OP_FIELDS, VERSION, _record, _unrecord
from dispatchtrace.views import costs
from dispatchtrace.views._costs import OpCost
from dispatchtrace.views._summary import LIVE_FIELDS


def _kept(table: Any) -> list[dict[str, Any]]:
    """Summary rows less the fields only live modules give."""
    return [{k: v for k, v in r.items() if k not in LIVE_FIELDS} for r in table.rows()]


GOLDEN = Path(__file__).parents[1] / "golden"


def _as_objects(data: dict[str, Any], version: int) -> dict[str, Any]:
    """``data`` (format 3) with its ops written as format 1 and 2 wrote them: objects, optional keys absent."""
    ops = []
    for row in data["ops"]:
        entry = dict(zip(OP_FIELDS, row, strict=False))
        if entry["source"] is None:
            del entry["source"]
        entry.update(row[len(OP_FIELDS)] if len(row) > len(OP_FIELDS) else {})
        ops.append(entry)
    return {**data, "version": version, "ops": ops}


def _without_attributes(source: str) -> str:
    """DOT source less the tooltip line of layer attributes (``k=3 s=2 p=1``), which only a live module gives."""
    return re.sub(r'\\n(?:(?:k|s|p|d|g|heads)=[^\s"\\]+ ?)+(?=\\n|")', "", source)


@pytest.fixture(scope="module")
def resnet() -> tuple[nn.Module, Graph]:
    model = torchvision.models.resnet50(weights=None).eval()
    with dt.capture(model) as g:
        model(torch.randn(1, 3, 224, 224))
    return model, g


def _same_structure(a: Graph, b: Graph) -> None:
    assert str(a) == str(b)
    assert [c.label for c in a.calls] == [c.label for c in b.calls]
    assert [(c.depth, c.repeat, c.index, c.type) for c in a.calls] == [(c.depth, c.repeat, c.index, c.type) for c in b.calls]
    for x, y in zip([a.root, *a.calls], [b.root, *b.calls], strict=True):
        assert [repr(ch) for ch in x.children] == [repr(ch) for ch in y.children]
        assert [r.text for r in x.outputs] == [r.text for r in y.outputs]
    for x, y in zip(a.ops, b.ops, strict=True):
        assert [u.name for u in x.users] == [u.name for u in y.users]
        assert [p.name for p in x.producers] == [p.name for p in y.producers]
        assert [repr(r) for r in x.inputs] == [repr(r) for r in y.inputs]
        assert (x.is_view, x.mutated and [r.text for r in x.mutated]) == (y.is_view, y.mutated and [r.text for r in y.mutated])
    assert [repr(r) for r in a.inputs] == [repr(r) for r in b.inputs]
    assert [repr(r) for r in a.outputs] == [repr(r) for r in b.outputs]


def test_resnet50_round_trip(resnet: tuple[nn.Module, Graph], tmp_path: Path) -> None:
    model, g = resnet
    g.save(tmp_path / "trace.json")
    loaded = dt.load(tmp_path / "trace.json")
    assert type(loaded) is Graph and all(type(op) is Op for op in loaded.ops)
    assert all(type(c) is Call for c in loaded.calls) and type(loaded.ops[0].outputs[0]) is TensorRef
    _same_structure(g, loaded)
    assert repr(loaded) == repr(g)
    # the summary's trainable/frozen/attributes come from the live modules: unknown (None, `?`) once loaded
    assert _kept(loaded.summary()) == _kept(g.summary())
    assert all(r[k] is None for r in loaded.summary().rows() for k in LIVE_FIELDS)
    assert len(str(loaded.summary(depth=2)).splitlines()) == len(str(g.summary(depth=2)).splitlines())
    assert costs(loaded).total == costs(g).total
    assert str(loaded.tree(depth=2)) == str(g.tree(depth=2))
    assert str(loaded.tree()) == str(g.tree())
    assert loaded.to_dot(depth=2).source == _without_attributes(g.to_dot(depth=2).source)
    assert str(loaded.collapse(2)) == str(g.collapse(2)) and str(loaded.collapse(1)) == str(g.collapse(1))
    assert dumps(loaded) == dumps(g)  # saving a loaded capture writes the same file
    assert all(c.module is None for c in loaded.calls)


def test_loaded_graph_needs_no_model(resnet: tuple[nn.Module, Graph], tmp_path: Path) -> None:
    model, g = resnet
    path = tmp_path / "r.json"
    g.save(path)
    data = json.loads(path.read_text())
    assert data["format"] == "dispatchtrace" and data["version"] == 4
    assert all(type(o) is list and len(o) == len(OP_FIELDS) for o in data["ops"])  # forward ops: no optional object
    assert data["params"]["total"] == sum(p.numel() for p in model.parameters())
    loaded = load(path)
    assert loaded.summary().rows()[0]["params"] == 25557032


def test_args_with_torch_objects_and_odd_values_round_trip() -> None:
    x = torch.ones(2, 3, 4, 4)
    with dt.capture() as g:
        y = x.to(dtype=torch.float16, memory_format=torch.channels_last)
        z = torch.zeros(2, 2, dtype=torch.int64, layout=torch.strided, device="cpu")
        torch.clamp(x, min=float("-inf"), max=float("inf"))
        torch.cat((x, x), 1)
        torch.full((2,), 1 + 0j)
        y.sum(dim=(1, 2))
        z.add_(1)
    loaded = loads(dumps(g))
    assert str(loaded) == str(g)
    for a, b in zip(g.ops, loaded.ops, strict=True):
        assert a.args == tuple(b.args) or repr(a.args) == repr(b.args)
        assert {k: repr(v) for k, v in a.kwargs.items()} == {k: repr(v) for k, v in b.kwargs.items()}
    to = loaded.ops[0]
    assert to.kwargs["dtype"] is torch.float16 and to.kwargs["memory_format"] is torch.channels_last
    assert loaded.op("zeros").kwargs["device"] == torch.device("cpu")
    assert loaded.op("zeros").kwargs["layout"] is torch.strided
    assert isinstance(loaded.op("sum").args[1], list)
    assert loaded.op("add_").mutated[0].version == 1


def test_unknown_objects_keep_their_text() -> None:
    class Thing:
        def __str__(self) -> str:
            return "<thing>"

    from dispatchtrace.serialize._values import _unvalue, _value

    encoded = _value(Thing())
    assert encoded["text"] == "<thing>"
    decoded = _unvalue(json.loads(json.dumps(encoded)), {})
    assert isinstance(decoded, Opaque) and str(decoded) == "<thing>"


def test_records_are_saved_under_stable_tags_and_unknown_ones_are_refused() -> None:
    # a record is named by a tag that no module move changes, comes back as its class, and a record type this
    # dispatchtrace does not know is a FormatError naming it, never a stand-in that draws as something else
    src = Source("net.py", 12, "forward", "x = self.conv(x)")
    saved = json.loads(json.dumps(_record(src)))
    assert saved["$record"] == "Source" and _unrecord(saved) == src
    group = Group("0", (0, 1), 1, "gloo")
    assert _unrecord(json.loads(json.dumps(_record(group)))) == group
    # the module paths formats 1-3 wrote load as the same classes
    for path, value in [("dispatchtrace.source.Source", src), ("dispatchtrace.collectives.Group", group)]:
        assert _unrecord({**json.loads(json.dumps(_record(value))), "$record": path}) == value
    with pytest.raises(FormatError, match="'dispatchtrace.views.costs.OpCost', which this dispatchtrace does not know"):
        _unrecord({"$record": "dispatchtrace.views.costs.OpCost", "fields": {"flops": 1}})
    with pytest.raises(FormatError, match="damaged"):
        _unrecord({"$record": "Source", "fields": {"file": "a.py"}})
    with pytest.raises(TypeError, match="add it to RECORDS"):
        _record(OpCost(12, 48, (48,)))


def test_source_lines_round_trip_through_a_shared_table() -> None:
    model = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    x = torch.ones(1, 2)
    with dt.capture(model) as g:
        out = model(x) * 2  # the statement marker
    data = json.loads(dumps(g))
    loaded = loads(dumps(g))
    if all(getattr(op, "source", None) is None for op in g.ops):
        pytest.skip("this capture records no source lines")
    assert [op.source for op in loaded.ops] == [op.source for op in g.ops]
    assert type(loaded.ops[-1].source) is type(g.ops[-1].source)
    assert "statement marker" in loaded.ops[-1].source.text
    assert len(data["sources"]) < len(data["ops"])  # ops of one statement share one entry
    at = OP_FIELDS.index("source")
    assert all(o[at] is None or type(o[at]) is int for o in data["ops"]) and any(o[at] is not None for o in data["ops"])
    assert out.shape == (1, 2)


@needs_node_hook
def test_error_and_backward_ops_are_kept() -> None:
    lin = nn.Linear(3, 3)
    with pytest.raises(ValueError), dt.capture(lin) as g:
        lin(torch.ones(1, 3)).sum().backward()
        raise ValueError("boom")
    loaded = loads(dumps(g))
    assert type(loaded.error).__name__ == "ValueError" and str(loaded.error) == "boom"
    assert str(loaded) == str(g) and repr(loaded) == repr(g)

    def fields(graph):
        return [(op.phase, op.origin and op.origin.label, op.grad_of and op.grad_of.index, op.param) for op in graph.ops]
    assert fields(loaded) == fields(g) and ("backward", "Linear", 1, None) in fields(g)
    assert ("backward", None, None, "weight") in fields(g)


def test_a_format_1_file_with_backward_ops_apart_still_loads() -> None:
    lin, x = nn.Linear(3, 3), torch.ones(1, 3)
    with dt.capture(lin) as g:
        lin(x)
    data = _as_objects(json.loads(dumps(g)), 1)
    data["backward_ops"] = [["t_bw0", "aten.t.default"], ["mm_bw1", "aten.mm.default"]]
    loaded = from_json(data)
    assert str(loaded) == str(g)
    assert loaded.notes == ["this file (format 1) listed 2 backward ops apart, by name and target only; they are "
                            "not in g.ops (capture again to record them in order)"]
    data["version"] = 0
    with pytest.raises(FormatError, match="older than the 1"):
        from_json(data)


def test_truncated_file(resnet: tuple[nn.Module, Graph], tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    resnet[1].save(path)
    path.write_text(path.read_text()[:5000])
    with pytest.raises(FormatError, match="truncated"):
        load(path)


def test_newer_version_and_foreign_json(tmp_path: Path) -> None:
    lin, x = nn.Linear(2, 2), torch.ones(1, 2)
    with dt.capture(lin) as g:
        lin(x)
    data = json.loads(dumps(g))
    data["version"] = VERSION + 1
    with pytest.raises(FormatError, match="newer"):
        loads(json.dumps(data))
    with pytest.raises(FormatError, match="not a dispatchtrace capture"):
        loads('{"nodes": []}')
    with pytest.raises(FormatError, match="not a dispatchtrace capture"):
        loads("[1, 2]")
    data["version"] = 4
    old = _as_objects(data, 2)
    del old["ops"][0]["target"]
    with pytest.raises(FormatError, match="damaged"):
        loads(json.dumps(old))
    del data["ops"][0][1]
    with pytest.raises(FormatError, match=r"op 0 is list .*, not a row \[name, target, .*source\] optionally followed"):
        loads(json.dumps(data))
    path = tmp_path / "x.json"
    path.write_text("not json at all")
    with pytest.raises(FormatError, match="x.json is not valid JSON"):
        load(path)


def test_render_json_writes_a_loadable_capture(tmp_path: Path) -> None:
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU())
    with dt.capture(model) as g:
        model(torch.ones(1, 3, 8, 8))
    g.render(tmp_path / "c.json")
    assert str(load(tmp_path / "c.json")) == str(g)


def test_every_field_of_the_data_model_is_saved() -> None:
    # a new field on Op / Call / TensorRef / Graph must be added to serialize.py (and docs/format.md)
    from dataclasses import fields

    from dispatchtrace.graph import Rare

    saved = {
        Op: {"index", "name", "target", "call", "args", "kwargs", "inputs", "outputs", "is_view",
             "producers", "_users", "phase", "source", "rare", "time"},  # time: the file's "times" (serialize/_times.py)
        Rare: {"mutated", "origin", "grad_of", "param", "dtensor"},  # Op's rare fields, in one slot
        Call: {"path", "type", "index", "depth", "parent", "children", "ops", "inputs", "outputs", "repeat",
               "params", "self_params", "source", "returned", "arguments", "_module"},
        TensorRef: {"id", "shape", "dtype", "device", "storage", "version", "producer", "kind", "name", "slot"},
    }
    for cls, known in saved.items():
        new = {f.name for f in fields(cls)} - known
        assert not new, f"serialize.py does not save {cls.__name__}.{sorted(new)}; extend it and docs/format.md"
    graph_attrs = set(vars(Graph()))
    known_attrs = {"root", "ops", "calls", "inputs", "outputs", "error", "complete", "constants", "notes",
                   "saved", "values", "stats", "kept", "timed"}  # kept: beside the JSON (tests/serialize/test_values_io.py)
    assert graph_attrs <= known_attrs, f"serialize.py does not save Graph attributes {sorted(graph_attrs - known_attrs)}"
    assert {f.name for f in fields(Saved)} == {"storage", "bytes", "call"}, "serialize.py saves these fields of Saved"


def test_returned_structures_round_trip(tmp_path) -> None:
    class M(torch.nn.Module):
        def forward(self, x):
            return {"a": [x * 2, None], "b": (x + 1, 3)}

    model, x = M(), torch.ones(2)
    with dt.capture(model) as g:
        model(x)
    g.save(tmp_path / "t.json")
    loaded = dt.load(tmp_path / "t.json")
    got = loaded.calls[0].returned
    assert got["a"][1] is None and got["b"][1] == 3
    assert got["a"][0] is loaded.ops[0].outputs[0] and got["b"][0] is loaded.ops[1].outputs[0]


def test_save_and_dash_o_create_missing_folders_alike(tmp_path) -> None:
    from dispatchtrace import cli

    lin = torch.nn.Linear(4, 2)
    with dt.capture(lin) as g:
        lin(torch.ones(1, 4))
    g.save(tmp_path / "a" / "b" / "t.json")
    assert cli.main(["coolcnn", "-o", str(tmp_path / "c" / "d" / "t.json")]) == 0
    assert str(load(tmp_path / "a" / "b" / "t.json")) == str(g)
    assert load(tmp_path / "c" / "d" / "t.json").calls[0].type == "CoolCNN"


def test_a_loaded_error_is_the_builtin_type_or_a_saved_error_stand_in() -> None:
    from dispatchtrace.serialize import SavedError

    class Custom(Exception):
        pass

    for error, builtin in ((KeyError("k"), True), (NotImplementedError("n"), True), (Custom("c"), False),
                           (torch.OutOfMemoryError("oom"), False)):
        lin = torch.nn.Linear(4, 2)
        with pytest.raises(type(error)), dt.capture(lin) as g:
            lin(torch.ones(1, 4))
            raise error
        loaded = loads(dumps(g)).error
        assert type(loaded).__name__ == type(error).__name__ and str(loaded) == str(error)
        if builtin:
            assert type(loaded) is type(error)
        else:
            assert isinstance(loaded, SavedError) and loaded.type == f"{type(error).__module__}.{type(error).__name__}"
            assert loads(dumps(loads(dumps(g)))).error.type == loaded.type  # kept through a second save


def test_version_must_be_the_integer_this_reader_reads() -> None:
    lin = torch.nn.Linear(4, 2)
    with dt.capture(lin) as g:
        lin(torch.ones(1, 4))
    data = json.loads(dumps(g))
    for version, word in (("1", "not an integer"), (1.0, "not an integer"), (True, "not an integer"),
                          (0, "older"), (VERSION + 1, "newer")):
        with pytest.raises(FormatError, match=word):
            loads(json.dumps({**data, "version": version}))


def test_literal_constants_and_arguments_round_trip() -> None:
    class M(torch.nn.Module):
        def forward(self, x, *, scale, flag=False):
            return x * scale + torch.tensor([float("inf"), 2.0]) + torch.tensor(3, dtype=torch.int64)

    m, x, scale = M(), torch.randn(2), torch.tensor(2.0)
    with dt.capture(m) as g:
        m(x, scale=scale, flag=True)
    loaded = loads(dumps(g))
    assert loaded.constants == g.constants and len(g.constants) == 2
    assert repr(loaded.calls[0].arguments) == repr(g.calls[0].arguments)
    x2, s2 = torch.randn(2), torch.tensor(5.0)
    torch.testing.assert_close(loaded.to_fx(m)(x2, scale=s2), m(x2, scale=s2, flag=True))


def _mlp() -> tuple[nn.Module, Graph]:
    lin = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    with dt.capture(lin) as g:
        lin(torch.ones(1, 3)).sum().backward()
    return lin, g


@needs_node_hook
def test_a_format_2_file_written_by_the_previous_writer_still_loads() -> None:
    """golden/format2_mlp_backward.json: _mlp()'s capture, saved by the format 2 writer (main at 36e3b20)."""
    text = (GOLDEN / "format2_mlp_backward.json").read_text()
    assert json.loads(text)["version"] == 2 and all(type(o) is dict for o in json.loads(text)["ops"])
    loaded, (_, g) = loads(text), _mlp()
    assert str(loaded) == str(g) and repr(loaded) == repr(g) and loaded.costs().total == g.costs().total

    def fields(graph: Graph) -> list[Any]:
        return [(op.phase, op.origin and op.origin.label, op.grad_of and op.grad_of.index, op.param,
                 op.source and (op.source.line, op.source.text)) for op in graph.ops]
    assert any(f[0] == "backward" and f[1] for f in fields(g)) and any(f[3] for f in fields(g))  # origin, param
    assert [f[:4] for f in fields(loaded)] == [f[:4] for f in fields(g)]
    assert fields(loads(dumps(loaded))) == fields(loaded)  # written again as format 4, read back the same
    assert json.loads(dumps(loaded))["version"] == 4


@needs_node_hook
def test_format_3_files_written_by_dispatchtrace_0_1_0_still_load() -> None:
    """golden/format3_*.json: saved by the format 3 writer (main at 0eddc0e, the flat layout), whose records are
    named by module paths (``dispatchtrace.source.Source``, ``dispatchtrace.collectives.Group``) that no longer
    exist: they load as the same classes, through serialize.LEGACY."""
    text = (GOLDEN / "format3_mlp_backward.json").read_text()
    assert json.loads(text)["version"] == 3 and '"dispatchtrace.source.Source"' in text
    loaded, (_, g) = loads(text), _mlp()
    assert str(loaded) == str(g) and repr(loaded) == repr(g) and loaded.costs().total == g.costs().total
    assert all(type(op.source) is Source for op in loaded.ops if op.source is not None)
    assert [op.source.text for op in loaded.ops if op.source] == [op.source.text for op in g.ops if op.source]
    text = (GOLDEN / "format3_allreduce.json").read_text()
    assert '"dispatchtrace.collectives.Group"' in text
    loaded = loads(text)
    reduce = loaded.op("allreduce_")
    assert reduce.args[1] == Group("0", (0,), 0, "gloo") and type(reduce.args[1]) is Group
    assert str(loaded).splitlines()[2] == ("%allreduce_ = c10d.allreduce_.default([%mul], group 0 [0], 'sum', None, "
                                           "False) -> f32[4]  # AR")
    again = json.loads(dumps(loaded))  # written again under the stable tags
    assert again["version"] == 4 and {r["$record"] for r in again["sources"]} == {"Source"}
    assert loads(json.dumps(again)).op("allreduce_").args[1] == reduce.args[1]


def test_format_3_rows_carry_the_optional_fields_in_a_trailing_object() -> None:
    _, g = _mlp()
    data = json.loads(dumps(g))
    extras = [o[len(OP_FIELDS)] for o in data["ops"] if len(o) > len(OP_FIELDS)]
    assert extras and all(set(e) <= set(OP_EXTRA) and e for e in extras)
    assert len(extras) == sum(op.phase != "forward" or op.param is not None for op in g.ops)
    assert str(loads(json.dumps(_as_objects(data, 2)))) == str(loads(json.dumps(data))) == str(g)
    bad = json.loads(json.dumps(data))
    bad["ops"][-1] = [*bad["ops"][-1][:len(OP_FIELDS)], ["phase", "backward"]]
    with pytest.raises(FormatError, match=r"op \d+ is list .*optionally followed by an object of phase, origin"):
        loads(json.dumps(bad))
    bad["ops"][-1] = {"name": "x"}
    with pytest.raises(FormatError, match=r"op \d+ is dict"):
        loads(json.dumps(bad))


def test_a_loaded_graph_shares_equal_records_as_one_object() -> None:
    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(6, 6)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = torch.relu(self.fc(x))
            return (y.view(2, 3) * 2).sin() + (y.view(2, 3) + 1).cos()

    net = Net()
    with dt.capture(net) as g:
        net(torch.ones(1, 6))
    loaded = loads(dumps(g))
    op = {o.name: o for o in loaded.ops}
    addmm, relu, view, view_1 = op["addmm"], op["relu"], op["view"], op["view_1"]
    # one (ref,) per ref read or returned alone: relu reads addmm's output, both views relu's
    assert relu.inputs is addmm.outputs and view.inputs is relu.outputs and view_1.inputs is relu.outputs
    assert view.producers is view_1.producers and view.producers == (relu,)  # one (op,) per lone producer
    assert relu.args is relu.inputs and op["sin"].args is op["sin"].inputs  # args that are exactly the inputs
    assert view.args[1] == [2, 3] and view.args[1] is view_1.args[1]  # equal int lists: one list
    assert relu.kwargs is view.kwargs == {}
    refs = [r for o in loaded.ops for r in (*o.inputs, *o.outputs)]
    assert len({id(r.dtype) for r in refs}) == len({r.dtype for r in refs}) == 1
    assert len({id(r.kind) for r in refs}) == len({r.kind for r in refs})
    assert len({id(o.target) for o in loaded.ops}) == len({o.target for o in loaded.ops}) < len(loaded.ops)
    loaded.lint()
    assert dumps(loaded) == dumps(g) and str(loaded) == str(g)
