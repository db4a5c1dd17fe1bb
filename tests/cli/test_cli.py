"""The command line: end to end in subprocesses, and every error path as one line."""

import contextlib
import io
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from vision import needs_torchvision

import dispatchtrace as dt
from dispatchtrace import cli
from dispatchtrace.cli._errors import CliError
from dispatchtrace.cli._models import load_model, parse_dtype, parse_inputs, parse_shape

ROOT = Path(__file__).resolve().parents[2]
EXE = Path(sys.executable).with_name("dispatchtrace")

BROKEN = textwrap.dedent(
    """
    import torch
    import torch.nn as nn

    class Broken(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 2)

        def forward(self, x):
            y = self.fc(x)
            raise RuntimeError("kaboom in forward\\nsecond line")

    class Tiny(nn.Module):
        input_shape = (2, 4)

        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 3)

        def forward(self, x):
            return self.fc(x).relu()

    def make_tiny():
        return Tiny()

    class NeedsData(nn.Module):
        def __init__(self):
            super().__init__()
            width = int(torch.tensor(4.0).item())  # cannot run on meta
            self.fc = nn.Linear(width, 2)

        def forward(self, x):
            return self.fc(x)

    class TokenNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(10, 4)

        def forward(self, ids):
            return self.emb(ids)

    class Coin(nn.Module):
        def forward(self, x):
            return x.relu() if x.sum() > 0 else x.sigmoid()  # the ops depend on the random input

    NOT_A_MODEL = 3
    """
)


@pytest.fixture
def netfile(tmp_path: Path) -> Path:
    path = tmp_path / "nets.py"
    path.write_text(BROKEN)
    return path


def sh(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    cmd = [str(EXE), *args] if EXE.exists() else [sys.executable, "-m", "dispatchtrace", *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300)


def one_line_error(r: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert r.returncode != 0
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("dispatchtrace: error: ")
    for n in needles:
        assert n in lines[0]


# ---- subprocesses: the installed command and python -m -----------------------------------------

def test_python_m_prints_the_tree():
    r = subprocess.run([sys.executable, "-m", "dispatchtrace", "coolcnn", "--depth", "1"], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "CoolCNN  f32[1, 10]"
    assert lines[1] == "├── 2 parallel branches"
    assert "├── aten::add  f32[1, 16, 16, 16]  (joins 2 branches)" in lines


def test_writes_svg_and_txt(tmp_path):
    svg, txt = tmp_path / "x.svg", tmp_path / "sub" / "x.txt"
    r = sh("coolcnn", "-o", str(svg), "-o", str(txt), "--depth", "1")
    assert r.returncode == 0, r.stderr
    assert svg.read_text().lstrip().startswith("<?xml") and "</svg>" in svg.read_text()
    assert txt.read_text().startswith("CoolCNN  f32[1, 10]\n├── 2 parallel branches")
    assert r.stdout.splitlines() == [f"wrote {svg}", f"wrote {txt}"]


@needs_torchvision
def test_bad_model_name_is_one_line():
    one_line_error(sh("resnet5"), "unknown model 'resnet5'", "resnet50")


def test_malformed_shape_is_one_line():
    one_line_error(sh("coolcnn", "--input", "1x3x32xthirty"), "malformed input shape '1x3x32xthirty'")


def test_unreadable_file_is_one_line(tmp_path):
    one_line_error(sh(f"{tmp_path / 'nope.py'}:Net"), "cannot read", "nope.py")


def test_forward_that_raises_is_one_line(netfile):
    one_line_error(sh(f"{netfile}:Broken", "--input", "1x4"), "RuntimeError", "kaboom in forward", "1x4")


def test_debug_shows_the_traceback():
    r = sh("coolcnn", "--input", "1x3xq", "--debug")
    assert r.returncode != 0 and "Traceback" in r.stderr and "CliError" in r.stderr


# ---- in-process: the same main(), every error path ---------------------------------------------

@pytest.mark.parametrize(
    ("argv", "needles"),
    [
        (["resnet18", "--input", "1x3xa"], ["malformed input shape '1x3xa'"]),
        (["missing/file.py:Net"], ["cannot read missing/file.py"]),
        (["no_such_package_xyz.mod:make"], ["cannot import 'no_such_package_xyz.mod'"]),
        (["dispatchtrace.models:Nope"], ["has no attribute 'Nope'", "CoolCNN"]),
        (["coolcnn", "--dtype", "float99"], ["unknown dtype 'float99'"]),
        (["coolcnn", "--depth", "-1"], ["--depth", "N (a whole number >= 0), auto, ops or all; got '-1'"]),
        (["coolcnn", "--depth", "deep"], ["--depth", "auto, ops or all; got 'deep'"]),
        (["coolcnn", "-o", "x.bmp"], ["cannot tell the format", ".svg"]),
        (["coolcnn", "--bogus"], ["unrecognized arguments: --bogus"]),
        ([], ["MODEL"]),
        (["model.py"], ["model.py:ClassName"]),
        (["coolcnn", "--input", "1x3x8x8"], ["forward pass of coolcnn", "1x3x8x8"]),
        (["coolcnn", "--at", "nope"], ["no module call labelled 'nope'", "with #N"]),
        (["coolcnn", "--at", "max_pool #2"], ["write 'max_pool#2', with no space before #"]),
        (["coolcnn", "--at", "max_pool"], ["'max_pool' was called 3 times (max_pool#0, max_pool#1, max_pool#2)"]),
    ],
)
def test_errors_are_one_line(argv, needles, capsys):
    assert cli.main(argv) != 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("dispatchtrace: error: ")
    for n in needles:
        assert n in err


def test_files_that_cannot_be_written_or_read_are_one_line(tmp_path, monkeypatch, capsys):
    (tmp_path / "plain").write_text("")
    assert cli.main(["coolcnn", "-o", str(tmp_path / "plain" / "t.txt")]) == 2
    assert capsys.readouterr().err == (f"dispatchtrace: error: cannot write {tmp_path / 'plain' / 't.txt'}: "
                                       f"{tmp_path / 'plain'} is a file, not a folder\n")
    assert cli.main(["render", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith(f"dispatchtrace: error: {tmp_path} is a folder; name a capture file")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for command in ([], ["verify"]):
        assert cli.main([*command, "coolcnn", "--device", "cuda"]) == 2
        assert "device 'cuda': torch sees no CUDA device here" in capsys.readouterr().err


def test_file_model_errors(netfile, capsys):
    assert cli.main([f"{netfile}:NOT_A_MODEL"]) == 2
    assert "is a int, not an nn.Module class" in capsys.readouterr().err
    bad = netfile.with_name("bad.py")
    bad.write_text("def broken(:\n")
    assert cli.main([f"{bad}:Net"]) == 2
    assert "syntax error on line 1" in capsys.readouterr().err
    unreadable = netfile.with_name("dir.py")
    unreadable.mkdir()
    assert cli.main([f"{unreadable}:Net"]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_file_factory_and_input_shape_attribute(netfile, capsys):
    assert cli.main([f"{netfile}:make_tiny"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == ["Tiny  f32[2, 3]", "├── fc (Linear)  f32[2, 3]", "└── aten::relu  f32[2, 3]"]


def test_package_factory_ops_and_depth(capsys):
    assert cli.main(["dispatchtrace.models:CoolCNN", "--depth", "1", "--ops"]) == 0
    out = capsys.readouterr().out
    assert "│   │   │   └── aten::convolution  f32[1, 16, 32, 32]" in out


def test_tree_at_a_call(capsys):
    assert cli.main(["coolcnn", "--at", "max_pool#2", "--ops"]) == 0  # the label, as the tree prints it
    assert capsys.readouterr().out.splitlines() == [
        "max_pool#2 (MaxPool2d)  f32[1, 32, 8, 8]",
        "└── aten::max_pool2d_with_indices  f32[1, 32, 8, 8], i64[1, 32, 8, 8]",
    ]


@pytest.mark.parametrize("device", ["cpu", "meta"])
@needs_torchvision
def test_a_float_dtype_casts_the_model_too(device, capsys):
    assert cli.main(["resnet18", "--dtype", "bfloat16", "--device", device, "--input", "1x3x64x64", "--depth", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "ResNet  bf16[1, 1000]" and "├── layer1 (Sequential)  bf16[1, 64, 16, 16]" in out
    assert cli.main(["verify", "resnet18", "--dtype", "bfloat16", "--device", device, "--input", "1x3x64x64"]) == 0
    assert "replay ok" in capsys.readouterr().out


@needs_torchvision
def test_an_integer_dtype_is_for_the_inputs_only(netfile, capsys):
    m = load_model("coolcnn", dtype=torch.int64)
    assert {p.dtype for p in m.parameters()} == {torch.float32}
    # floating-point buffers are cast, batch-norm's integer counter is not
    assert {t.dtype for t in load_model("resnet18", dtype=torch.float16).state_dict().values()} == {torch.float16, torch.int64}
    assert cli.main([f"{netfile}:TokenNet", "--input", "2x5", "--dtype", "int64"]) == 0, capsys.readouterr().err
    assert capsys.readouterr().out.splitlines() == ["TokenNet  f32[2, 5, 4]", "└── emb (Embedding)  f32[2, 5, 4]"]


def test_the_seed_makes_a_run_repeatable(netfile, capsys):
    def tree(seed: int) -> str:
        assert cli.main([f"{netfile}:Coin", "--input", "1", "--ops", "--seed", str(seed)]) == 0
        return capsys.readouterr().out

    seen = {tree(s) for s in range(8) if tree(s) == tree(s)}  # each seed twice: the same run
    assert len(seen) == 2  # and the seed is what picks the input


def test_an_option_one_output_does_not_use_gets_a_note(tmp_path, capsys):
    assert cli.main(["coolcnn", "--at", "max_pool#1", "-o", str(tmp_path / "a.dot"), "-o", str(tmp_path / "a.txt")]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [f"wrote {tmp_path / 'a.dot'}", f"wrote {tmp_path / 'a.txt'}"]
    assert captured.err == f"dispatchtrace: note: {tmp_path / 'a.dot'} does not use --at; the other outputs take it\n"
    assert (tmp_path / "a.txt").read_text().startswith("max_pool#1 (MaxPool2d)")


@pytest.mark.parametrize(
    ("argv", "idle"),
    [
        (["--depth", "2", "-o", "t.json"], "--depth"),
        (["--ops", "--statements", "-o", "t.json", "-o", "t.mx.json"], "--ops and --statements"),
        (["--statements", "-o", "t.html"], "--statements"),
        (["--at", "max_pool#1", "--summary"], "--at"),
    ],
)
def test_an_option_no_output_uses_is_an_error_before_any_work(argv, idle, tmp_path, monkeypatch, capsys):
    # the same rule as the API's: nothing given is ignored in silence (the files would be byte-identical)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["coolcnn", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"dispatchtrace: error: {idle} would change nothing") and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


@needs_torchvision
def test_meta_device_runs_without_data(capsys):
    assert cli.main(["resnet18", "--device", "meta", "--depth", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "ResNet  f32[1, 1000]" and "├── layer1 (Sequential)  f32[1, 64, 56, 56]" in out


def test_missing_subcommand_is_one_line(monkeypatch, capsys):
    monkeypatch.setattr(cli, "SUBCOMMANDS", (*cli.SUBCOMMANDS, "nosuchcommand"))
    assert cli.main(["nosuchcommand", "x"]) == 2
    assert capsys.readouterr().err == "dispatchtrace: error: the 'nosuchcommand' command is not available in this version of dispatchtrace\n"


@pytest.mark.parametrize("command", [[], ["demo"], ["render"], ["verify"]])
def test_every_command_has_debug_once(command, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main([*command, "--help"])
    assert exit_.value.code == 0
    help_text = capsys.readouterr().out
    assert help_text.count("--debug") == 2 and "show Python tracebacks" in help_text  # usage line, then its help


def test_debug_reraises_in_process_and_is_accepted_where_nothing_fails(netfile, capsys):
    with pytest.raises(CliError, match="malformed input shape"):
        cli.main(["verify", "coolcnn", "--input", "1x3xq", "--debug"])
    assert cli.main([f"{netfile}:make_tiny", "--debug"]) == 0
    assert capsys.readouterr().out.startswith("Tiny  f32[2, 3]")


def test_output_help_lists_the_registry(capsys):
    from dispatchtrace.render import help_text

    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert f"the format comes from the suffix: {help_text()}; repeatable" in out
    assert ".svg .pdf .png (a diagram drawn by graphviz's dot), .dot .gv (its DOT source), .txt (the tree)" in out


# ---- the reusable API ----------------------------------------------------------------------------

@needs_torchvision
def test_load_model_forms(netfile):
    assert type(load_model("resnet18")).__name__ == "ResNet"
    assert type(load_model("CoolCNN")).__name__ == "CoolCNN"
    assert type(load_model(f"{netfile}:Tiny")).__name__ == "Tiny"
    m = load_model("coolcnn", device="meta")
    assert not m.training and all(p.device.type == "meta" for p in m.parameters())
    with pytest.raises(CliError, match="did you mean"):
        load_model("vit_b_61")


def test_meta_build_falls_back_to_cpu_then_moves(netfile):
    m = load_model(f"{netfile}:NeedsData", device="meta")
    assert m.fc.weight.is_meta and m.fc.in_features == 4


def test_parse_helpers():
    assert parse_shape(" 1X3x4 ") == (1, 3, 4)
    for bad in ("", "x", "1.5x2", "1x3xfoo"):
        with pytest.raises(CliError, match="malformed input shape .*: a shape is sizes >= 1 joined by 'x', e.g. 1x3x224x224"):
            parse_shape(bad)
    with pytest.raises(CliError, match=r"input shape '1x-2' has a negative size \(-2\): a shape is sizes >= 1"):
        parse_shape("1x-2")
    with pytest.raises(CliError, match=r"input shape '2x0x3' has a size of 0 \(an empty tensor\): a shape is"):
        parse_shape("2x0x3")
    assert parse_dtype("bf16") is torch.bfloat16
    ints = parse_inputs(["3x5"], dtype="int64")[0]
    assert ints.dtype == torch.int64 and ints.min() >= 0 and ints.max() <= 1
    assert parse_inputs(["2"], dtype=torch.bool)[0].dtype == torch.bool
    assert parse_inputs(["2x2"], device="meta")[0].is_meta
    assert parse_inputs(model=load_model("coolcnn"))[0].shape == (1, 3, 32, 32)
    assert parse_inputs()[0].shape == (1, 3, 224, 224)


# ---- demo ------------------------------------------------------------------------------------------

@needs_torchvision
def test_demo_writes_diagrams_and_trees(tmp_path, capsys):
    out = tmp_path / "demo"
    assert cli.main(["demo", str(out)]) == 0
    printed = capsys.readouterr()
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted([
        "coolcnn.txt", "coolcnn_ops.txt", "coolcnn.svg", "coolcnn.pdf",
        "resnet50.txt", "resnet50_relu_calls.txt", "resnet50.svg", "resnet50.pdf",
        "resnet50_bottlenecks.svg", "resnet50_bottlenecks.pdf",
    ])
    for name in names:
        assert f"{out / name}  (" in printed.out
    assert "wrote 10 files" in printed.err
    for stem in ("coolcnn", "resnet50", "resnet50_bottlenecks"):
        assert (out / f"{stem}.svg").read_text().rstrip().endswith("</svg>")
        assert (out / f"{stem}.pdf").read_bytes().startswith(b"%PDF")
    assert (out / "coolcnn.txt").read_text().splitlines()[1] == "├── 2 parallel branches"
    relus = (out / "resnet50_relu_calls.txt").read_text().splitlines()
    assert relus[0] == "49 ReLU calls" and len(relus) == 50 and relus[-1].split()[1] == "layer4.2.relu#2"
    assert (out / "resnet50.txt").read_text().count("(joins 2 branches)") == 16


def test_missing_dot_is_one_line_and_text_still_works(tmp_path):
    txt, svg = tmp_path / "t.txt", tmp_path / "t.svg"
    r = subprocess.run([sys.executable, "-m", "dispatchtrace", "coolcnn", "-o", str(txt), "-o", str(svg)], cwd=ROOT,
                       capture_output=True, text=True, timeout=300, env={"PATH": ""})
    one_line_error(r, "`dot` program was not found", "apt-get install graphviz")
    assert "DotNotFoundError" not in r.stderr and "--debug" not in r.stderr
    assert txt.read_text().startswith("CoolCNN") and not svg.exists()


# ---- docs/cli.md shows real outputs -----------------------------------------------------------------

def doc_examples() -> list[tuple[str, list[str]]]:
    """Each ``$ dispatchtrace ...`` line of docs/cli.md's text blocks with the lines shown after it, in order.

    A command with a ``#`` comment (its output needs a set-up the doc names) or one that prints sizes
    and times (``demo``) is left out; a shown ``...`` line ends the part of the output to compare.
    """
    examples: list[tuple[str, list[str]]] = []
    for block in re.findall(r"```text\n(.*?)```", (ROOT / "docs" / "cli.md").read_text(), flags=re.S):
        block = textwrap.dedent(block)
        for chunk in re.split(r"^(?=\$ )", block, flags=re.M):
            if not chunk.startswith("$ dispatchtrace "):
                continue
            command, *shown = chunk.rstrip("\n").split("\n")
            if " #" not in command and not command.startswith("$ dispatchtrace demo"):
                examples.append((command[2:], shown))
    return examples


def missing_catalogue(argv: list[str], shown: list[str] | tuple[str, ...] = ()) -> str | None:
    """The package an ``hf:`` or ``timm:`` model in ``argv`` needs when it is not installed, else ``None``;
    also the package whose catalogue a suggestion ``shown`` prints (``did you mean hf:gpt2?``) comes from."""
    import importlib.util

    for prefix, package in (("hf:", "transformers"), ("timm:", "timm")):
        if importlib.util.find_spec(package) is None and (
                any(arg.startswith(prefix) for arg in argv) or any(f"did you mean {prefix}" in line for line in shown)):
            return package
    return None


class _Tagged(io.StringIO):
    """A stream that appends what is written to ``chunks`` as ``(tag, text)``, in the order written."""

    def __init__(self, tag: str, chunks: list[tuple[str, str]]) -> None:
        super().__init__()
        self.tag, self.chunks = tag, chunks

    def write(self, text: str) -> int:
        self.chunks.append((self.tag, text))
        return len(text)


def _whole_slices() -> bool:
    """Whether this torch dispatches the ``:`` of ``x[:, 0]`` as a slice of the whole dimension before the
    select (torch 2.8; newer torch runs the select alone, as the docs show)."""
    with dt.capture() as g:
        torch.ones(2, 2)[:, 0]
    return any(op.target == "aten.slice.Tensor" for op in g.ops)


@needs_torchvision
def test_the_docs_show_real_outputs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # where `-o trace.json` lands, for the render examples after it
    examples = doc_examples()
    whole_slices = _whole_slices()
    assert len(examples) >= 12 and any(c.startswith("dispatchtrace render") for c, _ in examples)
    assert {"hf:", "timm:"} <= {c.split()[1][:c.split()[1].find(":") + 1] for c, _ in examples}
    for command, shown in examples:
        argv = shlex.split(command)[1:]
        if (shutil.which("dot") is None and re.search(r"\.(svg|pdf|png)\b", command)) or missing_catalogue(argv, shown):
            continue  # a diagram without graphviz; a catalogue without its package (the zoo extra)
        chunks: list[tuple[str, str]] = []
        with contextlib.redirect_stdout(_Tagged("out", chunks)), contextlib.redirect_stderr(_Tagged("err", chunks)):
            cli.main(argv)
        # as a terminal shows them (interleaved), or stdout then stderr (as `2>&1` after a pipe)
        orders = ["".join(t for _, t in chunks), "".join(t for k, t in chunks if k == "out") +
                  "".join(t for k, t in chunks if k == "err")]
        printed = [o.splitlines() for o in orders]
        if not any("aten::slice" in line for line in shown) and whole_slices:  # the docs show newer torch's ops
            printed = [[line for line in p if "aten::slice" not in line] for p in printed]
        if "..." in [line.strip() for line in shown]:
            shown = shown[:[line.strip() for line in shown].index("...")]
            printed = [p[:len(shown)] for p in printed]
        assert shown in printed, (command, printed[0])


@needs_torchvision
def test_the_help_examples_run(tmp_path, monkeypatch, capsys):
    from dispatchtrace.cli import _render as render
    from dispatchtrace.cli import _trace as trace
    from dispatchtrace.cli import _verify as verify

    monkeypatch.chdir(tmp_path)
    examples = [e for module in (trace, render, verify) for e in module.parser().examples]
    assert "dispatchtrace coolcnn -o trace.json" in examples[:examples.index(render.parser().examples[0])]
    assert len(examples) >= 10
    for example in examples:
        argv = shlex.split(example)[1:]
        if (any(":" in a and not a.startswith(("hf:", "timm:")) for a in argv) or missing_catalogue(argv)
                or (shutil.which("dot") is None and re.search(r"\.(svg|pdf|png)\b", example))):
            continue  # a user's own model, a catalogue without its package, or a diagram without graphviz
        assert cli.main(argv) == 0, (example, capsys.readouterr().err)
        capsys.readouterr()
