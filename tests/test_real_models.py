"""Issue 10's reproductions, one small test each: how real models call, build constants, recompute and alias.

Each test states the behaviour the issue asks for. Those that fail today are marked
``xfail(strict=True)`` with the item they belong to, so fixing one turns its mark into a failure:
drop the mark then. The ``transformers`` and ``timm`` models of ``benchmarks/zoo_libraries.py`` run
in the slow zoo, ``tests/test_zoo.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn as nn
from models import needs_node_hook
from torch.utils.checkpoint import checkpoint

import dispatchtrace as dt
from dispatchtrace import cli
from dispatchtrace.replay import ReplayError
from dispatchtrace.serialize import FormatError

ROOT = Path(__file__).resolve().parent.parent


def issue10(reason: str) -> pytest.MarkDecorator:
    """A reproduction that fails today: it must start passing when its item of issue 10 is fixed."""
    return pytest.mark.xfail(strict=True, reason=f"issue 10: {reason}")


def ancestors(op: dt.Op) -> set[str]:
    """Names of every op ``op`` depends on, through its producers."""
    seen: set[str] = set()
    todo = list(op.producers)
    while todo:
        p = todo.pop()
        if p.name not in seen:
            seen.add(p.name)
            todo.extend(p.producers)
    return seen


def only(g: dt.Graph, target: str) -> dt.Op:
    found = [op for op in g.ops if op.target == target]
    assert len(found) == 1, [op.target for op in g.ops]
    return found[0]


# ---- inputs and arguments ----------------------------------------------------------------------

class Embedder(nn.Module):
    """Called as Hugging Face models are: ``m(input_ids=..., attention_mask=...)``."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(10, 4)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.emb(input_ids) * attention_mask[..., None]


def _keywords(seed: int) -> dict[str, torch.Tensor]:
    torch.manual_seed(seed)
    return {"input_ids": torch.randint(0, 10, (2, 3)), "attention_mask": torch.tensor([[1.0, 1, 1], [1, 1, 0]])}


def test_keyword_tensors_are_inputs_named_by_their_keyword(tmp_path: Path) -> None:
    torch.manual_seed(0)
    m, kw = Embedder(), _keywords(0)  # made before the block: made inside, they would be its activations
    with dt.capture(m) as g:
        m(**kw)
    assert [r.name for r in g.inputs] == ["input_ids", "attention_mask"]
    assert [r.kind for r in g.calls[0].inputs] == ["input", "input"]
    assert not [r.name for op in g.ops for r in op.inputs if r.kind == "constant"]
    g.to_fx(m)  # no constants to supply
    g.save(tmp_path / "kw.json")
    loaded = dt.load(tmp_path / "kw.json")
    assert [r.name for r in loaded.inputs] == ["input_ids", "attention_mask"]
    torch.testing.assert_close(loaded.to_fx(m)(**_keywords(1)), m(**_keywords(1)))  # the record alone replays
    assert "input_ids" in g.to_dot().source and "attention_mask" in g.to_dot().source


def test_keyword_tensors_without_the_model_are_constants() -> None:
    # documented: without the model, capture sees no keyword arguments (the global pre-hook gets none)
    m, kw = Embedder(), _keywords(0)
    with dt.capture() as g:
        m(**kw)
    assert g.inputs == []
    assert sorted(r.name for op in g.ops for r in op.inputs if r.kind == "constant") == ["_tensor_constant0",
                                                                                          "_tensor_constant1"]


def test_replay_takes_the_forwards_own_arguments() -> None:
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(8, 2).eval()
    x, x2 = torch.randn(3, 1, 8), torch.randn(3, 1, 8)
    with dt.capture(mha) as g:
        mha(x, x, x)
    assert [r.name for r in g.inputs] == ["query"]  # one tensor, one input
    gm = g.to_fx(mha)
    assert gm.meta["dispatchtrace_inputs"] == ["query", "key", "value"]  # but every parameter exists
    got = gm(x2, x2, x2)  # self-attention: one tensor passed three times
    torch.testing.assert_close(got, mha(x2, x2, x2))
    torch.testing.assert_close(gm(query=x2, key=x2, value=x2), got)

    m, kw = Embedder(), _keywords(0)
    with dt.capture(m) as g:
        m(kw["input_ids"], attention_mask=kw["attention_mask"])  # mixed: as it was passed
    torch.testing.assert_close(g.to_fx(m)(**_keywords(1)), m(**_keywords(1)))
    kw1 = _keywords(1)
    torch.testing.assert_close(g.to_fx(m)(kw1["input_ids"], attention_mask=kw1["attention_mask"]), m(**kw1))
    assert dt.verify(m, input_ids=kw1["input_ids"], attention_mask=kw1["attention_mask"])


class EmptyCache(nn.Module):
    """``torch.tensor([])``, as a KV cache initialises itself."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([torch.tensor([]), x.flatten()]) * 2


class SlicedMask(nn.Module):
    """``mask[a:b, c:d] = 3``: the Python scalar is lifted to a tensor (``aten.lift_fresh``)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mask = torch.zeros(4, 4)
        mask[1:3, 0:2] = 3
        return x + mask


class Half(nn.Module):
    """``torch.tensor(0.5)`` inside forward."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.tensor(0.5)


@pytest.mark.parametrize("model", [EmptyCache, SlicedMask, Half], ids=lambda c: c.__name__)
def test_literal_constants_replay(model: type[nn.Module]) -> None:
    m, x, x2 = model(), torch.randn(4, 4), torch.randn(4, 4)
    with dt.capture(m) as g:
        m(x)
    torch.testing.assert_close(g.to_fx(m)(x2), m(x2))  # no constants= needed: the record holds their values


@pytest.mark.parametrize("model", [EmptyCache, SlicedMask, Half], ids=lambda c: c.__name__)
def test_literal_constants_verify(model: type[nn.Module]) -> None:
    assert dt.verify(model(), torch.randn(4, 4))  # verify takes the values from an eager run today


def test_a_literal_constant_on_meta_says_it_has_no_value() -> None:
    with torch.device("meta"):
        m, x = Half(), torch.randn(4, 4)
        with dt.capture(m) as g:
            m(x)
    with pytest.raises(ReplayError, match=r"(?s)_tensor_constant0.*(on the meta device|meta tensor|no value)"):
        g.to_fx(m)


# ---- calls that are not forward calls ----------------------------------------------------------

class CK(nn.Module):
    def __init__(self, reentrant: bool = False) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.reentrant = reentrant

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return checkpoint(self.a, x, use_reentrant=self.reentrant)


@pytest.mark.parametrize("reentrant", [False, True], ids=["non-reentrant", "reentrant"])
@needs_node_hook
def test_checkpoint_recomputation_in_backward_is_kept_out_of_the_calls(reentrant: bool) -> None:
    m, x = CK(reentrant), torch.randn(2, 4, requires_grad=True)
    with dt.capture(m) as g:
        m(x).sum().backward()
    assert x.grad is not None and any(op.phase == "backward" for op in g.ops)  # backward ran inside the block
    assert [c.label for c in g.calls] == ["CK", "a"]
    assert [c.type for c in g.root.children if isinstance(c, dt.Call)] == ["CK"]
    assert [op.call.label for op in g.ops if op.call is not g.root] == ["a", "a"]  # t, addmm: the forward's only
    recomputed = [op for op in g.ops if op.phase == "recompute"]
    assert "aten.t.default" in [op.target for op in recomputed]  # non-reentrant stops once t and x are back
    assert {op.origin.label for op in recomputed if op.target != "aten.detach.default"} == {"a"}
    assert all(op.call is g.root for op in g.ops if op.phase != "forward")  # backward ran at the top level
    assert [row.label for row in g.summary()] == ["CK", "a"]
    assert "#1" not in str(g.tree()) and str(g.tree()).count("Linear") == 1
    g.lint()


# ---- aliasing precision ------------------------------------------------------------------------

class SetStorage(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, y = x.clone(), x * 1
        a.set_(y)  # a now shares y's storage
        y.add_(1)
        return a * 2


def test_set_makes_the_tensor_share_the_other_storage() -> None:
    with dt.capture(SetStorage()) as g:
        SetStorage()(torch.randn(3))
    g.lint()
    (read,) = [op for op in g.ops if op.target == "aten.mul.Tensor" and op.args[1] == 2]
    add, set_ = only(g, "aten.add_.Tensor"), only(g, "aten.set_.source_Tensor")
    assert add in read.producers and set_ in read.producers
    assert read.inputs[0].storage == add.mutated[0].storage == set_.mutated[0].storage  # a is on y's storage now
    clone = only(g, "aten.clone.default")
    assert clone.name not in ancestors(add)  # the write to y does not read a's old storage


class Disjoint(nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        z = x.clone()
        z[0].add_(1)
        return z[1] * 2, z[0] * 3


def test_a_write_is_no_dependency_of_a_disjoint_read() -> None:
    with dt.capture(Disjoint()) as g:
        Disjoint()(torch.randn(2, 3))
    g.lint()
    add = only(g, "aten.add_.Tensor").name
    (read_other,) = [op for op in g.ops if op.target == "aten.mul.Tensor" and op.args[1] == 2]
    assert add not in ancestors(read_other)
    assert [p.target for p in read_other.producers] == ["aten.select.int"]


# ---- verify that tells the truth and touches nothing -------------------------------------------

def _state(m: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in m.state_dict().items()}


def test_verify_leaves_a_train_mode_batchnorm_unchanged() -> None:
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)).train()
    before, buffers = _state(m), dict(m.named_buffers())
    report = dt.verify(m, torch.randn(2, 3, 8, 8))
    assert report and report.max_diff == 0.0, str(report)
    after = m.state_dict()
    assert list(after) == list(before)
    for k, v in before.items():
        assert torch.equal(after[k], v), k
    assert all(b is buffers[k] for k, b in m.named_buffers())  # the same tensors, not copies
    assert int(m[1].num_batches_tracked) == 0 and m.training


class Counter(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("n", torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.n.add_(1)
        return x * self.n


class Rebind(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("state", torch.ones(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x + self.state
        self.state = y.detach() * 2  # rebinding a registered buffer
        return y


@pytest.mark.parametrize("model", [Counter, Rebind], ids=lambda c: c.__name__)
def test_a_stateful_forward_verifies_and_keeps_its_state(model: type[nn.Module]) -> None:
    m = model()
    before, buffers = _state(m), dict(m.named_buffers())
    report = dt.verify(m, torch.randn(3))
    assert report and report.max_diff == 0.0, str(report)
    assert list(m.state_dict()) == list(before)
    for k, v in before.items():
        assert torch.equal(m.state_dict()[k], v), k
    assert all(b is buffers[k] for k, b in m.named_buffers())  # a rebound buffer is the original again


def test_dropout_in_train_mode_verifies() -> None:
    torch.manual_seed(0)
    m, x = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5)).train(), torch.randn(4, 8)
    rng = torch.get_rng_state()
    report = dt.verify(m, x)
    assert report and report.max_diff == 0.0, str(report)
    assert torch.equal(torch.get_rng_state(), rng)  # the caller's random stream is not consumed


class FirstCallDiffers(nn.Module):
    """Set-up work on the first call only (as MultiScaleRoIAlign fills its scales), and a tensor attribute."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.table = torch.arange(4.0)  # a plain attribute: a constant of the capture
        self.ready = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.ready:
            self.ready = True
            x = x.relu()
        return (self.lin(x) + self.table).neg()


def test_a_first_call_that_differs_gives_a_report_not_an_internal_error() -> None:
    m = FirstCallDiffers()
    first = dt.verify(m, torch.randn(2, 4))
    # every run starts from the state the capture started from, so each takes the set-up branch
    assert first and first.max_diff == 0.0 and first.constants == 0, str(first)  # the table's value is recorded
    assert m.ready is False
    m.ready = True  # a model already set up verifies without the branch, and stays set up
    later = dt.verify(m, torch.randn(2, 4))
    assert later and later.ops == first.ops - 1 and m.ready is True, str(later)


def test_verify_under_fake_tensor_mode_compares_what_exists() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        m, x = nn.Sequential(nn.Linear(4, 3), nn.ReLU()), torch.randn(2, 4)
        report = dt.verify(m, x)
    assert report and report.max_diff is None and report.no_values == "fake tensors hold no values", str(report)
    assert str(report).endswith("replay ok (shapes, dtypes and strides only: fake tensors hold no values)")


def test_verify_on_meta_compares_shapes_only() -> None:
    with torch.device("meta"):
        report = dt.verify(nn.Sequential(nn.Linear(4, 3), nn.ReLU()), torch.randn(2, 4))
    assert report and report.max_diff is None and report.no_values == "meta tensors hold no values", str(report)


# ---- where hooks cannot see --------------------------------------------------------------------

def test_a_scripted_module_gets_a_note(tmp_path: Path) -> None:
    m, x = torch.jit.script(nn.Sequential(nn.Linear(4, 4), nn.ReLU())), torch.randn(2, 4)
    with dt.capture(m) as g:
        m(x)
    assert len(g.calls) == 1 and [op.short for op in g.ops][:3] == ["aten::t", "aten::addmm", "aten::relu"]
    assert all(op.call is g.calls[0] for op in g.ops)  # the ops are seen, all labelled with the scripted call
    assert len(g.notes) == 1 and "torch.jit.script" in g.notes[0] and g.notes[0].startswith("Sequential "), g.notes
    g.save(tmp_path / "s.json")
    assert dt.load(tmp_path / "s.json").notes == g.notes


def test_a_scripted_submodule_note_names_its_path() -> None:
    m = nn.Sequential(nn.Linear(4, 4), torch.jit.script(nn.Sequential(nn.Linear(4, 4), nn.ReLU())))
    with dt.capture(m) as g:
        m(torch.randn(2, 4))
        m(torch.randn(2, 4))  # called twice: noted once
    assert [c.path for c in g.calls] == ["", "0", "1"] * 2
    assert len(g.notes) == 1 and g.notes[0].startswith("1 is a torch.jit.script module"), g.notes


def test_a_plain_model_has_no_notes() -> None:
    m, x = nn.Sequential(nn.Linear(4, 4), nn.ReLU()), torch.randn(2, 4)
    with dt.capture(m) as g:
        m(x)
    assert g.notes == []  # (an input made inside the block gets a note: replay takes it as the input)


def test_the_cli_prints_the_note_on_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "nets.py").write_text("import torch, torch.nn as nn\n"
                                      "def scripted():\n"
                                      "    return torch.jit.script(nn.Sequential(nn.Linear(4, 4), nn.ReLU()))\n")
    code, out, err = _main(capsys, f"{tmp_path / 'nets.py'}:scripted", "--input", "2x4")
    assert code == 0, err
    notes = [line for line in err.splitlines() if "note" in line]
    assert len(notes) == 1 and "torch.jit.script" in notes[0], err
    assert "note" not in out


class Tiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
        self.head = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


def _compiled(m: nn.Module) -> nn.Module:
    # backend="eager": the behaviour is the same with inductor (TorchDynamo skips every frame while a
    # dispatch mode is on the stack), and it needs no C compiler
    import warnings

    warnings.filterwarnings("ignore", message=".*global hooks on modules.*")
    return torch.compile(m, backend="eager")


@pytest.mark.parametrize("given", ["compiled", "original"])
def test_a_compiled_model_has_its_original_paths_and_a_note(given: str) -> None:
    torch.manual_seed(0)
    m, x = Tiny(), torch.randn(2, 4)
    with dt.capture(m) as eager:
        want = m(x)
    cm = _compiled(m)
    with dt.capture(cm if given == "compiled" else m) as g:
        got = cm(x)
    torch.testing.assert_close(got, want)
    assert [(c.path, c.type) for c in g.calls] == [(c.path, c.type) for c in eager.calls]
    assert [c.path for c in g.calls] == ["", "body", "body.0", "body.1", "head"]
    assert [op.target for op in g.ops] == [op.target for op in eager.ops]  # the eager ATen ops
    assert sorted(r.name for op in g.ops for r in op.inputs if r.kind == "parameter") == sorted(
        r.name for op in eager.ops for r in op.inputs if r.kind == "parameter")
    assert len(g.notes) == 1 and "torch.compile" in g.notes[0] and "eager" in g.notes[0], g.notes
    assert eager.notes == []
    g.lint()
    torch.testing.assert_close(g.to_fx(m)(x), want)


def test_a_compiled_submodule_keeps_its_path() -> None:
    m = Tiny()
    m.body = _compiled(m.body)
    with dt.capture(m) as g:
        m(torch.randn(2, 4))
    assert [c.path for c in g.calls] == ["", "body", "body.0", "body.1", "head"]
    assert g.notes and g.notes[0].startswith("body is torch.compile'd"), g.notes


# ---- command line and files --------------------------------------------------------------------

def _main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_dtype_casts_the_parameters_too(capsys: pytest.CaptureFixture[str], dtype: str) -> None:
    code, out, err = _main(capsys, "coolcnn", "--dtype", dtype, "--depth", "0")
    assert code == 0, err
    assert out.startswith("CoolCNN  " + {"float16": "f16", "bfloat16": "bf16"}[dtype])


def test_a_negative_looking_shape_says_what_a_shape_looks_like(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _main(capsys, "coolcnn", "--input", "-1x3x2x2")
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and "expected one argument" not in err
    assert "e.g. 1x3x224x224" in err


def test_a_malformed_shape_says_what_a_shape_looks_like(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _main(capsys, "coolcnn", "--input", "1x3xfoo")
    assert code == 2 and "e.g. 1x3x224x224" in err


def _saved(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    from dispatchtrace.models import CoolCNN

    torch.manual_seed(0)
    m = CoolCNN()
    with dt.capture(m) as g:
        m(torch.randn(1, 3, 32, 32))
    path = tmp_path / "g.json"
    g.save(path)
    return path, json.loads(path.read_text())


def _version(value: Any) -> Any:
    return lambda path, data: path.write_text(json.dumps({**data, "version": value}))


BAD_FILES = {
    "version-string": _version("1"),
    "version-older": _version(0),
    "version-newer": _version(99),
    "binary": lambda path, data: path.write_bytes(bytes(range(256)) * 4),
    "latin-1": lambda path, data: path.write_bytes(json.dumps(data).replace("CoolCNN", "CoolCNN\xe9").encode("latin-1")),
    "truncated": lambda path, data: path.write_text(json.dumps(data)[:200]),
}
FAILING_TODAY: dict[str, str] = {}


@pytest.mark.parametrize("case", [
    pytest.param(name, marks=issue10(FAILING_TODAY[name])) if name in FAILING_TODAY else name for name in BAD_FILES])
def test_a_bad_json_file_is_a_format_error_with_exit_status_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                              case: str) -> None:
    path, data = _saved(tmp_path)
    BAD_FILES[case](path, data)
    with pytest.raises(FormatError) as info:
        dt.load(path)
    if case.startswith("version"):
        word = {"version-string": "integer", "version-older": "older", "version-newer": "newer"}[case]
        assert word in str(info.value)
    code, _, err = _main(capsys, "render", str(path))
    assert code == 2 and err.startswith("dispatchtrace: error: ") and len(err.strip().splitlines()) == 1, err


def test_render_takes_at_like_the_main_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = _saved(tmp_path)
    code, want, err = _main(capsys, "coolcnn", "--at", "max_pool#1")
    assert code == 0, err
    code, got, err = _main(capsys, "render", str(path), "--at", "max_pool#1")
    assert code == 0, err
    assert got == want


class Raises(nn.Module):
    def __init__(self, error: BaseException) -> None:
        super().__init__()
        self.error = error

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x.clone().mul_(2)  # an op recorded before the error
        raise self.error


class MyError(Exception):
    pass


def test_a_loaded_builtin_error_keeps_its_type(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), dt.capture(m := Raises(RuntimeError("boom"))) as g:
        m(torch.ones(2))
    g.save(tmp_path / "e.json")
    loaded = dt.load(tmp_path / "e.json").error
    assert isinstance(loaded, RuntimeError) and str(loaded) == "boom"


def test_a_loaded_custom_error_keeps_its_name_and_message(tmp_path: Path) -> None:
    with pytest.raises(MyError), dt.capture(m := Raises(MyError("custom"))) as g:
        m(torch.ones(2))
    g.save(tmp_path / "e.json")
    loaded = dt.load(tmp_path / "e.json").error
    assert type(loaded).__name__ == "MyError" and str(loaded) == "custom"
